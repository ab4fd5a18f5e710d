use super::browser::WebClient;
use super::corpus::{ObjType, Page, WebObject};
use super::server::WebServer;
use super::setup::{host, Hosting};
use super::*;
use crate::engine::{NodeId, QueueLimit};
use crate::loss::LossSpec;
use crate::scenario::{run, FlowKind, FlowSpec, LinkSpec, Scenario};
use crate::sim::{chain, Sim};
use leoguard_core::{Bps, Bytes};

const RATE: Bps = Bps(100_000_000);
const D: u64 = 5_000_000; // one-way delay, ns

fn obj(id: u32, origin: u32, size: u64, kind: ObjType, parent: Option<u32>, w: f64) -> WebObject {
    WebObject { id, origin, size, kind, parent, visual_weight: w, above_fold: w > 0.0 }
}

fn page(objects: Vec<WebObject>) -> Page {
    let origins = objects.iter().map(|o| o.origin).max().unwrap_or(0) + 1;
    Page { index: 0, objects, origins }
}

/// Loads `pages` over one 100 Mbit/s link with 5 ms one-way delay; returns the load rows.
fn load(pages: Vec<Page>, http: Http, until_s: u64) -> (Vec<WebLoadRow>, Sim, crate::sim::AgentId) {
    let (mut sim, _) = chain(1, RATE, Duration(D), QueueLimit::Bytes(1_000_000), 1);
    let o = Hosting {
        http,
        cc: "newreno",
        think: Duration::from_secs(1),
        start: Instant::ZERO,
        tc: 0,
        reports: vec![],
        split: None,
    };
    let (a, b, _) = host(&mut sim, 0, 1, NodeId(0), NodeId(1), pages, &o);
    sim.run(Instant(until_s * 1_000_000_000));
    let client: &WebClient = sim.agent_by_id(a).and_then(|x| x.as_any().downcast_ref()).unwrap();
    let server: &WebServer = sim.agent_by_id(b).and_then(|x| x.as_any().downcast_ref()).unwrap();
    (client.rows(Some(server)), sim, a)
}

/// Serialisation time of `b` wire bytes on the link.
fn tx(b: u64) -> u64 {
    RATE.transmission_time(Bytes(b)).unwrap().as_nanos()
}

/// Time at which the HTML response (10,000 B body + 400 B header = 8 segments: 7 x 1448 + 264)
/// is complete at the browser, and when its last ACK and the child's request reach the server.
/// Every step is one message crossing the link: its serialisation plus the 5 ms delay.
fn html_done_and_child_request() -> (u64, u64) {
    let dns = tx(70) + D + tx(110) + D; // query, answer
    let syn = dns + tx(60) + D + tx(60) + D; // SYN, SYN-ACK
    let hello = syn + tx(517 + 52) + D; // ClientHello reaches the server
                                        // Server flight 4,500 B = 3 x 1448 + 156: the browser has it when the 4th segment lands.
    let flight = hello + 3 * tx(1500) + tx(156 + 52) + D;
    // The browser ACKs the 2nd segment pair, then sends Finished (64) + GET (500) in one segment.
    let get = flight + tx(52) + tx(564 + 52) + D;
    // The server's receiver now holds two unacked segments: an immediate ACK goes out before the
    // response (10,400 B: 7 full segments and 264 B), all within the initial window of 10.
    let html = get + tx(52) + 7 * tx(1500) + tx(264 + 52) + D;
    // The 8th segment triggers an immediate ACK; then the child's GET (500 B) on the same connection.
    let child_get = html + tx(52) + tx(500 + 52) + D;
    (html, child_get)
}

#[test]
fn a_two_object_page_loads_in_the_analytic_time() {
    let p = page(vec![obj(0, 0, 10_000, ObjType::Html, None, 1.0), obj(1, 0, 5_000, ObjType::Image, Some(0), 0.0)]);
    let (rows, _, _) = load(vec![p], Http::Http1, 2);
    let (html, child_get) = html_done_and_child_request();
    // Child response 5,400 B = 3 x 1448 + 1056: one burst (the server's delayed ACK of the GET fires
    // 40 ms later, after the load).
    let child = child_get + 3 * tx(1500) + tx(1056 + 52) + D;
    let r = &rows[0];
    assert_eq!(r.plt_ns, Some(child), "PLT {:?} vs analytic {child}", r.plt_ns);
    // Only the HTML is visual: the Speed Index is its completion time.
    assert_eq!(r.speed_index_ns, Some(html));
    assert_eq!((r.connections, r.objects_done, r.retransmissions, r.setup_retries), (1, 2, 0, 0));
    assert_eq!(r.dns_ns, tx(70) + tx(110) + 2 * D);
    // Set-up: SYN to SYN-ACK, then ClientHello to the whole server flight.
    let hs = tx(60) * 2 + 2 * D + tx(569) + D + 3 * tx(1500) + tx(208) + D;
    assert_eq!(r.handshake_ns, hs);
}

#[test]
fn a_child_larger_than_the_window_costs_one_more_round_trip() {
    // The server's window when the child is requested: 10 segments + slow-start growth from the ACKs
    // of the HTML (3 x 2896 B) = 23,168 B, i.e. 16 full segments. Linux grows the window in slow
    // start only while it is below twice the most in flight (`tcp_is_cwnd_limited`): the TLS flight
    // (4,500 B in flight, window 14,480) and the HTML's last ACK (1,712 B; 23,168 >= 2 x 10,400) add
    // nothing. The child response (33,904 + 400 B = 23 x 1448 + 1000) needs 24: 16 go at once, the
    // ACK of the first two (immediate: every 2nd segment) frees 2 and grows the window by 2 x 1448,
    // releasing 4; the ACK of the next two, two segment times later, releases the last 4, which
    // queue behind them.
    let p = page(vec![obj(0, 0, 10_000, ObjType::Html, None, 0.0), obj(1, 0, 33_904, ObjType::Image, Some(0), 1.0)]);
    let (rows, _, _) = load(vec![p], Http::Http1, 2);
    let (_, child_get) = html_done_and_child_request();
    let first_ack_back = child_get + 2 * tx(1500) + D + tx(52) + D;
    let child = first_ack_back + 7 * tx(1500) + tx(1000 + 52) + D;
    let r = &rows[0];
    assert_eq!(r.plt_ns, Some(child), "PLT {:?} vs analytic {child}", r.plt_ns);
    // The only visual object completes last: Speed Index = PLT.
    assert_eq!(r.speed_index_ns, r.plt_ns);
}

#[test]
fn http2_beats_http1_on_many_small_objects_and_http1_opens_six_connections() {
    let mut objects = vec![obj(0, 0, 20_000, ObjType::Html, None, 1.0)];
    for i in 1..=40 {
        objects.push(obj(i, 0, 3_000, ObjType::Image, Some(0), 0.0));
    }
    let (h1, sim1, a1) = load(vec![page(objects.clone())], Http::Http1, 5);
    let (h2, _, _) = load(vec![page(objects)], Http::Http2, 5);
    assert_eq!(h1[0].connections, 6);
    assert_eq!(h2[0].connections, 1);
    let (p1, p2) = (h1[0].plt_ns.unwrap(), h2[0].plt_ns.unwrap());
    assert!(p2 < p1, "HTTP/2 {p2} ns, HTTP/1.1 {p1} ns");
    // HTTP/1.1: never more than one request outstanding per connection; the 40 images over 6
    // connections take at least ceil(40 / 6) = 7 request rounds after the HTML.
    let client: &WebClient = sim1.agent_by_id(a1).and_then(|x| x.as_any().downcast_ref()).unwrap();
    let html_done = client.loads[0].done_at[0].unwrap().as_nanos();
    assert!(p1 - html_done >= 7 * 2 * D, "{} ns after the HTML", p1 - html_done);
}

#[test]
fn speed_index_is_the_area_above_visual_completeness() {
    let t = |ms: u64| Some(Instant(ms * 1_000_000));
    // Half the weight at 100 ms, the rest at 300 ms: 100 + 0.5 x 200 = 200 ms.
    let si = speed_index(Instant::ZERO, &[(t(100), 1.0), (t(300), 1.0), (t(900), 0.0)]);
    assert_eq!(si, Some(Duration::from_millis(200)));
    assert_eq!(speed_index(Instant::ZERO, &[(None, 1.0)]), None);
}

fn two_node(kind: FlowKind, loss: LossSpec, secs: u64) -> Scenario {
    Scenario {
        nodes: 2,
        links: vec![LinkSpec {
            a: 0,
            b: 1,
            rate: Bps::mbps(50),
            delay: Duration::from_millis(20),
            queue: QueueLimit::Bytes(500_000),
            loss_ab: loss.clone(),
            loss_ba: loss,
            rate_schedule: None,
        }],
        flows: vec![FlowSpec { src: 0, dst: 1, kind, start: Instant::ZERO, tc: 0 }],
        duration: Duration::from_secs(secs),
        seed: 3,
        ..Default::default()
    }
}

fn web(pages: Vec<u32>, http: Http) -> FlowKind {
    FlowKind::Web { cc: "cubic".into(), http, corpus_seed: 42, pages, think: Duration::from_secs(1) }
}

#[test]
fn corpus_pages_load_over_a_scenario_and_unfinished_loads_are_reported() {
    let s = two_node(web((0..5).collect(), Http::Http2), LossSpec::None, 8);
    let r = run(&s).unwrap();
    assert!(r.web.len() >= 2, "{} loads", r.web.len());
    let done: Vec<_> = r.web.iter().filter(|w| w.plt_ns.is_some()).collect();
    assert!(!done.is_empty());
    for w in &done {
        assert!(w.speed_index_ns.unwrap() <= w.plt_ns.unwrap());
        assert_eq!(w.objects, w.objects_done);
        // Each host costs at least one RTT of set-up (40 ms).
        assert!(w.plt_ns.unwrap() >= 3 * 40_000_000);
    }
    // Loads follow one another with the think time.
    for pair in r.web.windows(2) {
        assert!(pair[1].start_ns >= pair[0].start_ns + pair[0].plt_ns.unwrap() + 1_000_000_000);
    }
    if r.web.len() < 5 {
        assert!(r.web.last().unwrap().plt_ns.is_none(), "the last load started is cut off by the end");
    }
    let f = &r.flows[0];
    assert!(f.delivered_bytes >= done.iter().map(|w| w.bytes).sum::<u64>());
    assert_eq!(f.retransmissions, 0);
}

#[test]
fn a_page_completes_under_two_percent_loss_with_retransmissions() {
    let s = two_node(web(vec![0, 1, 2], Http::Http1), LossSpec::Bernoulli { p: 0.02 }, 60);
    let r = run(&s).unwrap();
    assert_eq!(r.web.len(), 3);
    assert!(r.web.iter().all(|w| w.plt_ns.is_some()), "{:?}", r.web);
    let retx: u64 = r.web.iter().map(|w| w.retransmissions + w.setup_retries).sum();
    assert!(retx > 0);
    assert_eq!(r.flows[0].retransmissions, r.web.iter().map(|w| w.retransmissions).sum::<u64>());
    // Drops of connection packets are booked to the scenario flow.
    assert!(!r.drops.is_empty() && r.drops.iter().all(|d| d.flow == 0));
    assert!(r.flows[0].network_loss > 0.0);
}

#[test]
fn bad_web_flows_are_refused_with_the_field_named() {
    let e = |kind| run(&two_node(kind, LossSpec::None, 1)).unwrap_err().to_string();
    assert!(e(web(vec![], Http::Http2)).contains("flows[0].pages"));
    assert!(e(web(vec![3, corpus::CORPUS_PAGES], Http::Http2)).contains("flows[0].pages[1]"));
    let bad_cc =
        FlowKind::Web { cc: "reno2".into(), http: Http::Http1, corpus_seed: 1, pages: vec![0], think: Duration::ZERO };
    assert!(e(bad_cc).contains("flows[0].cc"));
    assert_eq!(Http::parse("3"), None);
}

#[test]
fn a_capture_of_a_web_flow_converts_its_connections() {
    let mut s = two_node(web(vec![0], Http::Http2), LossSpec::None, 3);
    s.capture = Some(crate::capture::CaptureSpec { nodes: vec![0], max_packets: 100_000, snaplen: 128 });
    let r = run(&s).unwrap();
    assert!(r.capture.as_ref().is_some_and(|c| c.len() > 1000));
    assert_eq!(r.capture_missed, 0);
}
