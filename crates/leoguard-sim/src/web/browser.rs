//! The browser agent: loads a list of corpus pages one after another, each as a cold browser would
//! (fresh DNS lookups and connections per page load), with `think` time between loads.
//!
//! A page load starts with the root document's host. Per host: one DNS query (UDP, answered by the
//! server node; retried after 1 s, doubling), then connections: TCP handshake (SYN retried after 1 s,
//! doubling), TLS 1.3 (ClientHello -> server flight -> Finished, one round trip) over the TCP streams,
//! then requests. HTTP/1.1 keeps one request outstanding per connection and opens another connection
//! (up to six per host) while requests wait and no connection is free; HTTP/2 sends every request on
//! one connection per host at once. An object's children are discovered when it completes (no
//! progressive HTML parsing, no preload scanner). The page is loaded (onload) when every object is.

use super::conn::{lock, Endpoint, Msg, SharedWire, FLAG_DNS, FLAG_SYN};
use super::corpus::Page;
use super::{sizes, slots_of, speed_index, Http, WebLoadRow, H1_CONNS_PER_HOST, SETUP_TIMEOUT};
use crate::engine::{NodeId, Packet};
use crate::schemes::mpep::web::{chains_of, WebSplit, TOKEN_SOURCE_RESUME};
use crate::sim::{Agent, Ctx};
use crate::tcp_agent::FLAG_ACK;
use leoguard_core::{Duration, Instant};
use leoguard_proto::tcp::TcpConfig;
use std::any::Any;
use std::collections::VecDeque;

const TOKEN_NEXT: u64 = 1 << 63;
const TOKEN_DNS: u64 = 1 << 62;
const TOKEN_CONN: u64 = 1 << 61;
/// A SaTCP handover report (index in the low bits).
pub(crate) const TOKEN_REPORT: u64 = 1 << 60;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Syn,
    Tls,
    Ready,
}

/// One connection of a page load.
#[derive(Debug)]
pub struct ClientConn {
    /// Host it goes to.
    pub origin: u32,
    /// Connection slot (flow id = first flow + slot).
    pub slot: u32,
    /// The TCP end.
    pub ep: Endpoint,
    phase: Phase,
    syn_deadline: Option<Instant>,
    syn_tries: u32,
    opened: Instant,
    /// When TLS completed.
    pub ready_at: Option<Instant>,
    busy: u32,
}

#[derive(Debug, Default)]
struct Host {
    dns_sent: Option<Instant>,
    dns_tries: u32,
    dns_done: Option<Instant>,
    /// Indices into the load's connections.
    conns: Vec<usize>,
    queue: VecDeque<u32>,
}

/// One page load in progress or done.
#[derive(Debug)]
pub struct Load {
    /// The page.
    pub page: Page,
    /// Navigation start.
    pub start: Instant,
    /// First connection slot of the load.
    pub first_slot: u32,
    /// First slot of each host.
    host_slot: Vec<u32>,
    hosts: Vec<Host>,
    /// Connections opened.
    pub conns: Vec<ClientConn>,
    /// Completion time of each object.
    pub done_at: Vec<Option<Instant>>,
    /// When each object's request was written (None: not yet).
    pub requested_at: Vec<Option<Instant>>,
    children: Vec<Vec<u32>>,
    remaining: usize,
    /// When the last object completed.
    pub finished: Option<Instant>,
    /// SYNs and DNS queries repeated.
    pub setup_retries: u64,
}

/// The browser end of a web flow.
#[derive(Debug)]
pub struct WebClient {
    /// Scenario flow index.
    pub flow: u32,
    /// Flow id of connection slot 0.
    pub first_flow: u32,
    /// The server's node.
    pub server: NodeId,
    /// HTTP version.
    pub http: Http,
    /// Congestion control of the browser's senders.
    pub cc: String,
    /// IPv6 Traffic Class of its packets.
    pub tc: u8,
    /// Pages to load, in order.
    pub pages: Vec<Page>,
    /// Pause between one load's end and the next one's start.
    pub think: Duration,
    /// When the first load starts.
    pub start_at: Instant,
    /// When the link layer reports an upcoming handover (SaTCP): passed to every open connection's
    /// sender, in time order.
    pub handover_reports: Vec<Instant>,
    /// Loads started so far.
    pub loads: Vec<Load>,
    /// First slot of each load (one past the last: the slot total).
    slot_base: Vec<u32>,
    /// The connections' M-PEP chains (None: not split): the browser then talks to the first proxy.
    pub split: Option<WebSplit>,
    wire: SharedWire,
    cfg: TcpConfig,
}

impl WebClient {
    /// A browser; `slot_base` is [`plan`]'s first slot per load.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        flow: u32,
        first_flow: u32,
        server: NodeId,
        http: Http,
        cc: &str,
        pages: Vec<Page>,
        think: Duration,
        slot_base: Vec<u32>,
        wire: SharedWire,
    ) -> Self {
        WebClient {
            flow,
            first_flow,
            server,
            http,
            cc: cc.to_string(),
            tc: 0,
            pages,
            think,
            start_at: Instant::ZERO,
            handover_reports: Vec::new(),
            loads: Vec::new(),
            slot_base,
            split: None,
            wire,
            cfg: TcpConfig::default(),
        }
    }

    fn send(&self, flow: u32, seq: u64, flags: u16, size: u32, ctx: &mut Ctx) {
        ctx.send(Packet {
            flow,
            seq,
            size,
            dst: self.server.0,
            sent_at: ctx.now(),
            flags,
            net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        });
    }

    fn begin(&mut self, ctx: &mut Ctx) {
        let k = self.loads.len();
        let Some(page) = self.pages.get(k).cloned() else { return };
        let (host_slot, _) = slots_of(&page, self.http);
        let n = page.objects.len();
        let children = page.children();
        let mut hosts: Vec<Host> = (0..page.origins).map(|_| Host::default()).collect();
        hosts[0].queue.push_back(0);
        self.loads.push(Load {
            page,
            start: ctx.now(),
            first_slot: self.slot_base[k],
            host_slot,
            hosts,
            conns: Vec::new(),
            done_at: vec![None; n],
            requested_at: vec![None; n],
            children,
            remaining: n,
            finished: None,
            setup_retries: 0,
        });
        self.dispatch(k, 0, ctx);
    }

    /// Moves host `o` of load `k` forward: DNS, connections, requests.
    fn dispatch(&mut self, k: usize, o: usize, ctx: &mut Ctx) {
        let now = ctx.now();
        let http = self.http;
        let load = &mut self.loads[k];
        let host = &mut load.hosts[o];
        if host.dns_done.is_none() {
            if host.dns_sent.is_none() {
                host.dns_sent = Some(now);
                host.dns_tries = 1;
                let flow = self.first_flow + load.first_slot + load.host_slot[o];
                self.send(flow, o as u64, FLAG_DNS, sizes::DNS_QUERY, ctx);
                ctx.timer(now + SETUP_TIMEOUT, TOKEN_DNS | (k as u64) << 32 | o as u64);
            }
            return;
        }
        // Requests on ready connections.
        let mut wire = lock(&self.wire);
        for &ci in &host.conns {
            let c = &mut load.conns[ci];
            if c.phase != Phase::Ready {
                continue;
            }
            let slot = c.slot as usize;
            loop {
                if http == Http::Http1 && c.busy > 0 {
                    break;
                }
                let Some(obj) = host.queue.pop_front() else { break };
                let (req, body) = match http {
                    Http::Http1 => (sizes::H1_REQUEST, load.page.objects[obj as usize].size),
                    Http::Http2 => (sizes::H2_REQUEST, load.page.objects[obj as usize].size),
                };
                c.ep.write(req, Msg::Request { obj, body }, wire.queue(slot, true));
                c.busy += 1;
                load.requested_at[obj as usize] = Some(now);
            }
        }
        drop(wire);
        // New connections: HTTP/2 one per host; HTTP/1.1 while requests wait for more connections
        // than are being set up, up to six.
        let limit = match http {
            Http::Http1 => H1_CONNS_PER_HOST as usize,
            Http::Http2 => 1,
        };
        loop {
            let host = &load.hosts[o];
            let opening = host.conns.iter().filter(|&&ci| load.conns[ci].phase != Phase::Ready).count();
            let want = match http {
                Http::Http1 => host.queue.len() > opening,
                Http::Http2 => !host.queue.is_empty() && host.conns.is_empty(),
            };
            if !want || host.conns.len() >= limit {
                break;
            }
            let slot = load.first_slot + load.host_slot[o] + host.conns.len() as u32;
            let Ok(cc) = leoguard_proto::cc::build(&self.cc, u64::from(self.cfg.mss), self.cfg.init_cwnd_segments)
            else {
                return; // validated when the scenario was built
            };
            let flow = self.first_flow + slot;
            // Split by M-PEP: the SYN goes to the first proxy, which terminates it.
            let peer = chains_of(&self.split, slot as usize).map_or(self.server, |c| c.client_view().peer);
            let ep = Endpoint::new(flow, peer, self.cfg, cc, self.tc);
            load.conns.push(ClientConn {
                origin: o as u32,
                slot,
                ep,
                phase: Phase::Syn,
                syn_deadline: Some(now + SETUP_TIMEOUT),
                syn_tries: 1,
                opened: now,
                ready_at: None,
                busy: 0,
            });
            let ci = load.conns.len() - 1;
            load.hosts[o].conns.push(ci);
            ctx.send(syn(flow, peer, now, self.tc));
        }
        let conns: Vec<usize> = self.loads[k].hosts[o].conns.clone();
        for ci in conns {
            self.settle(k, ci, ctx);
        }
    }

    /// Applies the M-PEP view of connection `ci` of load `k` (its first proxy's node, whether
    /// sending waits for that proxy's migration).
    fn sync(&mut self, k: usize, ci: usize) {
        let c = &mut self.loads[k].conns[ci];
        if let Some(ch) = chains_of(&self.split, c.slot as usize) {
            let v = ch.client_view();
            c.ep.peer = v.peer;
            c.ep.paused = v.paused;
        }
    }

    fn settle(&mut self, k: usize, ci: usize, ctx: &mut Ctx) {
        self.sync(k, ci);
        let c = &mut self.loads[k].conns[ci];
        c.ep.pump(ctx);
        let want = c.ep.deadline(c.syn_deadline);
        c.ep.arm(want, TOKEN_CONN | u64::from(c.slot) << 32, ctx);
    }

    /// The load and connection of a slot.
    fn locate(&self, slot: u32) -> Option<(usize, usize)> {
        let k = self.slot_base.partition_point(|&b| b <= slot).checked_sub(1)?;
        let load = self.loads.get(k)?;
        let local = slot - load.first_slot;
        let o = load.host_slot.partition_point(|&b| b <= local).checked_sub(1)?;
        let ci = *load.hosts[o].conns.get((local - load.host_slot[o]) as usize)?;
        Some((k, ci))
    }

    fn complete(&mut self, k: usize, obj: u32, ctx: &mut Ctx) {
        let now = ctx.now();
        let load = &mut self.loads[k];
        if load.done_at[obj as usize].is_some() {
            return;
        }
        load.done_at[obj as usize] = Some(now);
        load.remaining -= 1;
        let mut touched: Vec<usize> = Vec::new();
        for &ch in &load.children[obj as usize] {
            let o = load.page.objects[ch as usize].origin as usize;
            load.hosts[o].queue.push_back(ch);
            if !touched.contains(&o) {
                touched.push(o);
            }
        }
        if load.remaining == 0 {
            load.finished = Some(now);
            // The browser is done with the page's connections: M-PEP proxies drop their state.
            for c in &load.conns {
                if let Some(ch) = chains_of(&self.split, c.slot as usize) {
                    ch.close();
                }
            }
            if self.loads.len() < self.pages.len() {
                ctx.timer(now + self.think, TOKEN_NEXT);
            }
        }
        for o in touched {
            self.dispatch(k, o, ctx);
        }
    }

    /// One row per load started.
    pub fn rows(&self, server: Option<&super::server::WebServer>) -> Vec<WebLoadRow> {
        let mut out = Vec::with_capacity(self.loads.len());
        for (k, l) in self.loads.iter().enumerate() {
            let visual: Vec<(Option<Instant>, f64)> =
                l.page.objects.iter().map(|o| (l.done_at[o.id as usize], o.visual_weight)).collect();
            let si = l.finished.and_then(|_| speed_index(l.start, &visual));
            let dns: Vec<u64> = (l.hosts.iter())
                .filter_map(|h| Some(h.dns_done?.saturating_duration_since(h.dns_sent?).as_nanos()))
                .collect();
            let hs: Vec<u64> = l
                .conns
                .iter()
                .filter_map(|c| Some(c.ready_at?.saturating_duration_since(c.opened).as_nanos()))
                .collect();
            let mut retx: u64 = l.conns.iter().map(|c| c.ep.tx.stats.retransmissions).sum();
            if let Some(s) = server {
                let (a, b) = (l.first_slot as usize, self.slot_base[k + 1] as usize);
                retx += (s.conns[a..b].iter().flatten()).map(|e| e.tx.stats.retransmissions).sum::<u64>();
            }
            let mean = |v: &[u64]| if v.is_empty() { 0 } else { v.iter().sum::<u64>() / v.len() as u64 };
            out.push(WebLoadRow {
                flow: self.flow,
                load: k as u32,
                page: l.page.index,
                start_ns: l.start.as_nanos(),
                plt_ns: l.finished.map(|t| t.saturating_duration_since(l.start).as_nanos()),
                speed_index_ns: si.map(|d| d.as_nanos()),
                objects: l.page.objects.len() as u32,
                objects_done: (l.page.objects.len() - l.remaining) as u32,
                bytes: l.page.bytes(),
                origins: l.page.origins,
                connections: l.conns.len() as u32,
                dns_ns: mean(&dns),
                handshake_ns: mean(&hs),
                retransmissions: retx,
                setup_retries: l.setup_retries,
            });
        }
        out
    }
}

impl Load {
    /// DNS queries and SYNs the browser sent for this load (retries included).
    pub fn setup_packets(&self) -> u64 {
        let first_queries = self.hosts.iter().filter(|h| h.dns_sent.is_some()).count() as u64;
        first_queries + self.conns.len() as u64 + self.setup_retries
    }
}

impl WebClient {
    /// One row per object of every load started (objects not yet discovered included).
    pub fn object_rows(&self) -> Vec<super::WebObjectRow> {
        let mut out = Vec::new();
        for (k, l) in self.loads.iter().enumerate() {
            let since = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(l.start).as_nanos());
            for o in &l.page.objects {
                out.push(super::WebObjectRow {
                    flow: self.flow,
                    load: k as u32,
                    object: o.id,
                    origin: o.origin,
                    kind: o.kind.name(),
                    size: o.size,
                    parent: o.parent,
                    requested_ns: since(l.requested_at[o.id as usize]),
                    done_ns: since(l.done_at[o.id as usize]),
                    visual_weight: o.visual_weight,
                });
            }
        }
        out
    }
}

/// The connection slots of a flow's page loads: the first slot of each load, then the total.
pub fn plan(pages: &[Page], http: Http) -> Vec<u32> {
    let mut base = Vec::with_capacity(pages.len() + 1);
    let mut total = 0;
    for p in pages {
        base.push(total);
        total += slots_of(p, http).1;
    }
    base.push(total);
    base
}

impl Agent for WebClient {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        for (i, &t) in self.handover_reports.iter().enumerate() {
            ctx.timer(t, TOKEN_REPORT | i as u64);
        }
        if self.start_at > ctx.now() {
            ctx.timer(self.start_at, TOKEN_NEXT);
        } else {
            self.begin(ctx);
        }
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        let Some(slot) = p.flow.checked_sub(self.first_flow) else { return };
        if p.flags & FLAG_DNS != 0 {
            let k = self.slot_base.partition_point(|&b| b <= slot).saturating_sub(1);
            let o = p.seq as usize;
            let Some(h) = self.loads.get_mut(k).and_then(|l| l.hosts.get_mut(o)) else { return };
            if h.dns_done.is_none() {
                h.dns_done = Some(ctx.now());
                self.dispatch(k, o, ctx);
            }
            return;
        }
        let Some((k, ci)) = self.locate(slot) else { return };
        self.sync(k, ci);
        let now = ctx.now();
        let http = self.http;
        let load = &mut self.loads[k];
        let c = &mut load.conns[ci];
        let mut completed: Vec<u32> = Vec::new();
        let mut ready = false;
        if p.flags & FLAG_SYN != 0 {
            if p.flags & FLAG_ACK != 0 && c.phase == Phase::Syn {
                c.phase = Phase::Tls;
                c.syn_deadline = None;
                let mut wire = lock(&self.wire);
                c.ep.write(sizes::CLIENT_HELLO, Msg::ClientHello, wire.queue(slot as usize, true));
            }
        } else if c.ep.on_packet(p, ctx) {
            if let Some(ch) = chains_of(&self.split, slot as usize) {
                ch.client_received(c.ep.rx.rcv_nxt());
            }
            let mut wire = lock(&self.wire);
            let down = wire.queue(slot as usize, false);
            let mut finished = false;
            while let Some(&(end, m)) = down.front() {
                if end > c.ep.rx.rcv_nxt() {
                    break;
                }
                down.pop_front();
                match m {
                    Msg::ServerFlight => finished = true,
                    Msg::Response { obj } => {
                        c.busy = c.busy.saturating_sub(1);
                        completed.push(obj);
                    }
                    _ => {}
                }
            }
            if finished && c.phase == Phase::Tls {
                let preface = if http == Http::Http2 { sizes::H2_PREFACE } else { 0 };
                c.ep.write(sizes::CLIENT_FINISHED + preface, Msg::ClientFinished, wire.queue(slot as usize, true));
                c.phase = Phase::Ready;
                c.ready_at = Some(now);
                ready = true;
            }
        }
        let o = c.origin as usize;
        for obj in completed {
            self.complete(k, obj, ctx);
        }
        if ready || self.http == Http::Http1 {
            self.dispatch(k, o, ctx);
        }
        self.settle(k, ci, ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        let now = ctx.now();
        if token == TOKEN_NEXT {
            self.begin(ctx);
            return;
        }
        if token & !0xFFFF_FFFF == TOKEN_SOURCE_RESUME {
            // The first proxy resumed after a migration: the connection restarts in slow start.
            let slot = token as u32;
            let (Some((k, ci)), Some(ch)) = (self.locate(slot), chains_of(&self.split, slot as usize)) else { return };
            let (at, cc) = ch.resume_client();
            let peer = ch.client_view().peer;
            let c = &mut self.loads[k].conns[ci];
            c.ep.tx.restart(cc, at);
            if c.phase == Phase::Syn {
                // The connection is rebuilt towards the proxy's new place: its SYN goes out again.
                c.syn_deadline = Some(ctx.now() + SETUP_TIMEOUT);
                let flow = c.ep.flow;
                ctx.send(Packet {
                    flow,
                    size: sizes::SYN,
                    dst: peer.0,
                    sent_at: ctx.now(),
                    flags: FLAG_SYN,
                    net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
                    ..Default::default()
                });
            }
            self.settle(k, ci, ctx);
            return;
        }
        if token & (TOKEN_NEXT | TOKEN_DNS | TOKEN_CONN) == 0 && token & TOKEN_REPORT != 0 {
            for c in self.loads.iter_mut().flat_map(|l| l.conns.iter_mut()) {
                c.ep.tx.cc_report_handover(now);
            }
            return;
        }
        if token & TOKEN_DNS != 0 && token & TOKEN_NEXT == 0 {
            let (k, o) = ((token & !TOKEN_DNS) >> 32, token & 0xFFFF_FFFF);
            let flow = {
                let Some(l) = self.loads.get_mut(k as usize) else { return };
                let first = l.first_slot + l.host_slot[o as usize];
                let h = &mut l.hosts[o as usize];
                if h.dns_done.is_some() {
                    return;
                }
                h.dns_tries += 1;
                l.setup_retries += 1;
                let wait = Duration(SETUP_TIMEOUT.as_nanos() << (h.dns_tries - 1).min(6));
                ctx.timer(now + wait, token);
                self.first_flow + first
            };
            self.send(flow, o, FLAG_DNS, sizes::DNS_QUERY, ctx);
            return;
        }
        let slot = ((token & !TOKEN_CONN) >> 32) as u32;
        let Some((k, ci)) = self.locate(slot) else { return };
        if !self.loads[k].conns[ci].ep.is_current(token) {
            return;
        }
        self.sync(k, ci);
        let c = &mut self.loads[k].conns[ci];
        if c.phase == Phase::Syn && c.syn_deadline.is_some_and(|t| t <= now) {
            c.syn_tries += 1;
            c.syn_deadline = Some(now + Duration(SETUP_TIMEOUT.as_nanos() << (c.syn_tries - 1).min(6)));
            let (flow, peer) = (c.ep.flow, c.ep.peer);
            self.loads[k].setup_retries += 1;
            ctx.send(syn(flow, peer, now, self.tc));
        } else {
            c.ep.on_timeout(ctx);
        }
        self.settle(k, ci, ctx);
    }
}

/// A SYN of connection flow `flow` to `peer` (a first one, or a retry).
fn syn(flow: u32, peer: NodeId, now: Instant, tc: u8) -> Packet {
    Packet {
        flow,
        size: sizes::SYN,
        dst: peer.0,
        sent_at: now,
        flags: FLAG_SYN,
        net: crate::engine::NetFields { tc, ..Default::default() },
        ..Default::default()
    }
}
