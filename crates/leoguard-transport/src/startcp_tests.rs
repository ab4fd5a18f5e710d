//! StarTCP through the transport's bytes (scripted time, `netsim`): the probes and the receiver's
//! signals travel in option kind 1 of real datagrams, parsed back at the other end, across a path
//! that goes down for 100 ms every 15 s (the paper's two-path experiment's interruptions).

use leoguard_core::{Duration, Instant};
use leoguard_proto::startcp::{StartcpConfig, StartcpPolicy, StartcpSpec};

use crate::netsim::{run, sender_config, Net, Run};
use crate::report::{RecvStartcp, SendStartcp};
use crate::sender::Amount;

const PERIOD: Duration = Duration::from_secs(15);

fn two_path_like(cc: &str, policy: StartcpPolicy) -> Run {
    let mut cfg = sender_config(cc, Amount::For(Duration::from_secs(50)));
    cfg.startcp = Some(StartcpSpec { config: StartcpConfig::default(), policy });
    let net = Net {
        delay: Duration::from_millis(50),
        queue: 400,
        outage: Some((PERIOD, Duration::from_millis(100))),
        ..Net::default()
    };
    run(&cfg, net, Duration::from_secs(70))
}

#[test]
fn startcp_stalls_probes_and_resumes_on_the_notice_carried_in_the_datagrams() {
    let out = two_path_like("startcp", StartcpPolicy::Heuristic);
    let (s, r) = (&out.sender, &out.receiver);
    assert!(s.is_complete() && s.is_closed(), "not finished at {:?}", out.now);
    assert_eq!(r.delivered(), s.written());
    assert_eq!(r.counters.corrupt + r.counters.malformed + s.counters.malformed, 0);
    // The receiver saw the three outages (at the last arrival before each: 15, 30, 45 s plus up to
    // a packet's serialisation).
    let m = RecvStartcp::of(r).expect("Handover Manager on");
    let near = |t: u64, at: f64| (t as f64 / 1e9 - at).abs() < 0.2;
    for h in [15.0, 30.0, 45.0] {
        assert!(
            m.interruptions.iter().any(|x| near(x.start_ns, h)),
            "no interruption near {h} s: {:?}",
            m.interruptions
        );
    }
    // Predictions reached the sender in option kind 1 of the ACKs, and its probes the receiver in
    // option kind 1 of empty data segments.
    assert!(s.counters.startcp_signals > 0 && r.counters.startcp_signals > 0);
    let st = SendStartcp::of(s).expect("Sending Controller on");
    assert_eq!(st.policy, "heuristic");
    // Probes sent while the path was down are lost; the others arrive.
    assert!(r.counters.probes > 0 && r.counters.probes < st.probes_sent, "{} of {}", r.counters.probes, st.probes_sent);
    // With two periods' interruptions at the handover phase (min_events = 2) it stalls, at the latest
    // for the third handover: before it, probing across it, resumed by the receiver's notice soon
    // after the link came back. (Here it stalls from the second on: the flow's start-up gaps at 0 s
    // share the handovers' phase.)
    let stall = st.stalls.iter().find(|x| near(x.predicted_ns, 45.0)).expect("a stall for the 45 s handover");
    let h = Instant::from_secs_f64(45.0).as_nanos();
    assert!(stall.stall_start_ns < h, "{stall:?}");
    assert!(stall.probes >= 100, "probes every 1 ms across 100 ms: {stall:?}");
    assert_eq!(stall.reason, "notice", "{stall:?}");
    let end = stall.stall_end_ns.expect("resumed");
    // Resumed after the outage ended (45.1 s) and within a round trip of it, not at the timeout.
    assert!(end > h + 100_000_000 && end < h + 100_000_000 + 150_000_000, "{stall:?}");
    let notices = st.stalls.iter().filter(|x| x.reason == "notice").count() as u64;
    assert_eq!(m.notices, notices, "{:?}", m.interruptions);
    assert!(m.interruptions.iter().any(|x| x.stalled && near(x.start_ns, 45.0)));
}

#[test]
fn startcp_loses_less_than_bbr_at_the_handovers_it_predicts() {
    let bbr = two_path_like("bbr", StartcpPolicy::Heuristic);
    let star = two_path_like("startcp", StartcpPolicy::Heuristic);
    let (rb, rs) = (bbr.sender.stats().retransmissions, star.sender.stats().retransmissions);
    // Both lose what the first two outages destroy; only BBR loses at the third.
    eprintln!("retransmissions: bbr {rb}, startcp {rs}; dropped {:?} / {:?}", bbr.dropped, star.dropped);
    assert!(rb > 0 && rs < rb, "bbr {rb}, startcp {rs}");
    assert!(star.dropped.0 < bbr.dropped.0, "{:?} {:?}", star.dropped, bbr.dropped);
}

#[test]
fn a_fixed_lead_is_the_stall_s_lead() {
    let out = two_path_like("startcp", StartcpPolicy::Fixed(Duration::from_millis(250)));
    let st = SendStartcp::of(&out.sender).expect("on");
    assert_eq!(st.policy, "fixed");
    let stall = st.stalls.first().expect("a stall");
    assert_eq!(stall.lead_ns, 250_000_000);
    // The stall starts on the first microsecond tick at or after predicted - lead.
    assert!((stall.predicted_ns - stall.stall_start_ns).abs_diff(250_000_000) < 1_000, "{stall:?}");
}
