//! The web server agent: answers DNS queries, accepts connections (SYN-ACK on every SYN), completes
//! the TLS 1.3 handshake and serves each HTTP request with its response, in request order, on the
//! server-to-client TCP stream of the connection (HTTP/2 responses are therefore not interleaved: a
//! response goes out whole after the ones requested before it on the same connection).
//!
//! Every host of a page is served by this one agent on the flow's destination node: hosts differ in
//! their connections (and DNS lookups), not in where they are.

use super::conn::{lock, Endpoint, Msg, SharedWire, FLAG_DNS, FLAG_SYN};
use super::{sizes, Http};
use crate::engine::{NodeId, Packet};
use crate::schemes::mpep::web::{chains_of, lock_split, WebSplit, TOKEN_SOURCE_RESUME};
use crate::sim::{Agent, Ctx};
use crate::tcp_agent::FLAG_ACK;
use leoguard_core::Instant;
use leoguard_proto::tcp::TcpConfig;
use std::any::Any;
use std::collections::BTreeMap;

const TOKEN_CONN: u64 = 1 << 62;

/// The server end of a web flow.
#[derive(Debug)]
pub struct WebServer {
    /// Flow id of connection slot 0.
    pub first_flow: u32,
    /// The browser's node.
    pub client: NodeId,
    /// HTTP version.
    pub http: Http,
    /// Congestion control of the server's senders.
    pub cc: String,
    /// IPv6 Traffic Class of its packets.
    pub tc: u8,
    /// Per connection slot (None until its first SYN).
    pub conns: Vec<Option<Endpoint>>,
    /// DNS queries answered.
    pub dns_answered: u64,
    /// SYN-ACKs sent.
    pub synacks: u64,
    /// The connections' M-PEP chains (None: not split): the server then talks to the last proxy,
    /// on that segment's flow id.
    pub split: Option<WebSplit>,
    /// Slot of each server-side segment flow id of a split connection (built on first use).
    split_slots: BTreeMap<u32, usize>,
    /// When the link layer reports an upcoming handover (SaTCP): passed to every connection's sender.
    pub handover_reports: Vec<Instant>,
    wire: SharedWire,
    cfg: TcpConfig,
}

impl WebServer {
    /// A server for `slots` connections with flow ids from `first_flow`.
    pub fn new(first_flow: u32, slots: u32, client: NodeId, http: Http, cc: &str, tc: u8, wire: SharedWire) -> Self {
        WebServer {
            first_flow,
            client,
            http,
            cc: cc.to_string(),
            tc,
            conns: (0..slots).map(|_| None).collect(),
            dns_answered: 0,
            synacks: 0,
            split: None,
            split_slots: BTreeMap::new(),
            handover_reports: Vec::new(),
            wire,
            cfg: TcpConfig::default(),
        }
    }

    fn control(&self, p: &Packet, flags: u16, size: u32, dst: NodeId, ctx: &mut Ctx) {
        ctx.send(Packet {
            flow: p.flow,
            seq: p.seq,
            size,
            dst: dst.0,
            sent_at: ctx.now(),
            flags,
            net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        });
    }

    /// The slot of a packet's flow id: its own (the browser's side) or a split connection's server
    /// segment.
    fn slot_of(&mut self, flow: u32) -> Option<usize> {
        if let Some(s) = flow.checked_sub(self.first_flow).map(|s| s as usize).filter(|&s| s < self.conns.len()) {
            return Some(s);
        }
        if self.split_slots.is_empty() {
            if let Some(split) = &self.split {
                for (slot, c) in lock_split(split).iter().enumerate() {
                    if let Some(c) = c {
                        self.split_slots.insert(c.server_flow(), slot);
                    }
                }
            }
        }
        self.split_slots.get(&flow).copied()
    }

    /// The node to talk to on connection `slot` (the client, or the last M-PEP proxy) and, for a
    /// split connection, its endpoint's view of that proxy applied.
    fn sync(&mut self, slot: usize) -> NodeId {
        let Some(c) = chains_of(&self.split, slot) else { return self.client };
        let v = c.server_view();
        if let Some(ep) = self.conns[slot].as_mut() {
            ep.peer = v.peer;
            ep.paused = v.paused;
        }
        v.peer
    }

    fn settle(&mut self, slot: usize, ctx: &mut Ctx) {
        self.sync(slot);
        if let Some(ep) = self.conns[slot].as_mut() {
            ep.pump(ctx);
            let want = ep.deadline(None);
            ep.arm(want, TOKEN_CONN | (slot as u64) << 32, ctx);
        }
    }
}

impl Agent for WebServer {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        for (i, &t) in self.handover_reports.iter().enumerate() {
            ctx.timer(t, super::browser::TOKEN_REPORT | i as u64);
        }
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        let Some(slot) = self.slot_of(p.flow) else { return };
        if p.flags & FLAG_DNS != 0 {
            // DNS is not proxied: the answer goes straight back to the browser.
            self.dns_answered += 1;
            self.control(p, FLAG_DNS, super::sizes::DNS_ANSWER, self.client, ctx);
            return;
        }
        let peer = self.sync(slot);
        if p.flags & FLAG_SYN != 0 {
            if self.conns[slot].is_none() {
                let Ok(c) = leoguard_proto::cc::build(&self.cc, u64::from(self.cfg.mss), self.cfg.init_cwnd_segments)
                else {
                    return; // validated when the scenario was built
                };
                self.conns[slot] = Some(Endpoint::new(p.flow, peer, self.cfg, c, self.tc));
            }
            // A repeated SYN means the SYN-ACK was lost: answer again.
            self.synacks += 1;
            self.control(p, FLAG_SYN | FLAG_ACK, sizes::SYN, peer, ctx);
            return;
        }
        let Some(ep) = self.conns[slot].as_mut() else { return };
        let fresh = ep.on_packet(p, ctx);
        if fresh {
            if let Some(c) = chains_of(&self.split, slot) {
                c.server_received(ep.rx.rcv_nxt());
            }
        }
        if fresh {
            let mut wire = lock(&self.wire);
            let up = wire.queue(slot, true);
            let mut out: Vec<(u64, Msg)> = Vec::new();
            while let Some(&(end, m)) = up.front() {
                if end > ep.rx.rcv_nxt() {
                    break;
                }
                up.pop_front();
                match m {
                    Msg::ClientHello => {
                        let preface = if self.http == Http::Http2 { sizes::H2_PREFACE } else { 0 };
                        out.push((sizes::SERVER_FLIGHT + preface, Msg::ServerFlight));
                    }
                    Msg::Request { obj, body } => {
                        let header = match self.http {
                            Http::Http1 => sizes::H1_RESPONSE_HEADER,
                            Http::Http2 => sizes::H2_RESPONSE_HEADER,
                        };
                        out.push((header + body, Msg::Response { obj }));
                    }
                    Msg::ClientFinished | Msg::ServerFlight | Msg::Response { .. } => {}
                }
            }
            let down = wire.queue(slot, false);
            for (bytes, m) in out {
                ep.write(bytes, m, down);
            }
        }
        self.settle(slot, ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if token & !0xFFFF_FFFF == TOKEN_SOURCE_RESUME {
            // The proxy next to the server resumed after a migration: rebuild in slow start.
            let slot = (token & 0xFFFF_FFFF) as usize;
            let Some(c) = chains_of(&self.split, slot) else { return };
            let (at, cc) = c.resume_server();
            if let Some(ep) = self.conns.get_mut(slot).and_then(|e| e.as_mut()) {
                ep.tx.restart(cc, at);
            }
            self.settle(slot, ctx);
            return;
        }
        if token & TOKEN_CONN == 0 && token & super::browser::TOKEN_REPORT != 0 {
            for ep in self.conns.iter_mut().flatten() {
                ep.tx.cc_report_handover(ctx.now());
            }
            return;
        }
        let slot = ((token & !TOKEN_CONN) >> 32) as usize;
        let Some(ep) = self.conns.get_mut(slot).and_then(|c| c.as_mut()) else { return };
        if !ep.is_current(token) {
            return;
        }
        self.sync(slot);
        let Some(ep) = self.conns[slot].as_mut() else { return };
        ep.on_timeout(ctx);
        self.settle(slot, ctx);
    }
}
