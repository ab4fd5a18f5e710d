//! One end of a web connection: a TCP sender for what this end writes and a TCP receiver for what
//! the other end writes, over one flow id, plus the table of application messages in each direction.
//!
//! Packets carry no payload, so the messages (TLS flights, HTTP requests and responses) live in a
//! table shared by the two ends, keyed by the byte offset at which each message ends in its stream:
//! a message is complete at the receiving end once the receiver's in-order point passes that offset.

use crate::engine::{NodeId, Packet};
use crate::sim::Ctx;
use crate::tcp_agent::{FLAG_ACK, FLAG_DATA, FLAG_RETX};
use leoguard_core::Instant;
use leoguard_proto::tcp::{Ack, TcpConfig, TcpReceiver, TcpSender};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Packet flag: TCP SYN (with [`FLAG_ACK`]: SYN-ACK).
pub const FLAG_SYN: u16 = 8;
/// Packet flag: a DNS query (to the server node) or answer (to the client); `seq` is the origin.
pub const FLAG_DNS: u16 = 16;

/// Header bytes of a data segment or ACK on the wire (IPv4 20 + TCP 20 + timestamps 12).
pub const HEADER: u32 = 52;

/// An application message on a connection's byte stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msg {
    /// TLS 1.3 ClientHello.
    ClientHello,
    /// The server's TLS flight (ServerHello .. Finished, certificate chain included).
    ServerFlight,
    /// The client's TLS Finished (plus the HTTP/2 preface where used).
    ClientFinished,
    /// An HTTP request for object `obj` whose response body has `body` bytes.
    Request {
        /// Object index in the page.
        obj: u32,
        /// Response body bytes.
        body: u64,
    },
    /// The response carrying object `obj`.
    Response {
        /// Object index in the page.
        obj: u32,
    },
}

/// The messages in flight on every connection of a web flow: per connection slot, client-to-server
/// and server-to-client queues of (end offset, message).
#[derive(Debug, Default)]
pub struct Wire {
    up: Vec<VecDeque<(u64, Msg)>>,
    down: Vec<VecDeque<(u64, Msg)>>,
}

/// The wire table shared by a web flow's client and server.
pub type SharedWire = Arc<Mutex<Wire>>;

impl Wire {
    /// A table for `slots` connections.
    pub fn new(slots: usize) -> SharedWire {
        Arc::new(Mutex::new(Wire { up: vec![VecDeque::new(); slots], down: vec![VecDeque::new(); slots] }))
    }

    /// The queue of messages `from_client` (or from the server) on connection `slot`.
    pub fn queue(&mut self, slot: usize, from_client: bool) -> &mut VecDeque<(u64, Msg)> {
        if from_client {
            &mut self.up[slot]
        } else {
            &mut self.down[slot]
        }
    }
}

/// Locks the wire table (single-threaded simulator: the lock is never contended; a poisoned lock
/// still holds consistent data because no code panics while holding it).
pub fn lock(w: &SharedWire) -> std::sync::MutexGuard<'_, Wire> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

/// One end of a connection.
#[derive(Debug)]
pub struct Endpoint {
    /// Flow id of the connection.
    pub flow: u32,
    /// The other end's node.
    pub peer: NodeId,
    /// What this end writes.
    pub tx: TcpSender,
    /// What the other end writes.
    pub rx: TcpReceiver,
    /// IPv6 Traffic Class of its packets.
    pub tc: u8,
    /// Whether sending waits (the M-PEP proxy next to this end is migrating).
    pub paused: bool,
    gen: u32,
    armed: Option<Instant>,
}

impl Endpoint {
    /// An idle connection end.
    pub fn new(
        flow: u32,
        peer: NodeId,
        cfg: TcpConfig,
        cc: Box<dyn leoguard_proto::cc::CongestionControl>,
        tc: u8,
    ) -> Self {
        Endpoint {
            flow,
            peer,
            tx: TcpSender::new(cfg, cc, Some(0)),
            rx: TcpReceiver::new(cfg),
            tc,
            paused: false,
            gen: 0,
            armed: None,
        }
    }

    /// Appends a message of `bytes` to this end's stream.
    pub fn write(&mut self, bytes: u64, msg: Msg, q: &mut VecDeque<(u64, Msg)>) {
        self.tx.write(bytes);
        // The limit is Some: the sender was built with a finite limit.
        q.push_back((self.tx.limit().unwrap_or(0), msg));
    }

    /// Handles a data segment or an ACK of this connection; returns whether in-order data arrived.
    pub fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) -> bool {
        let now = ctx.now();
        let mut fresh = false;
        if p.flags & FLAG_DATA != 0 {
            let (newly, ack) = self.rx.on_segment(now, p.seq, p.size.saturating_sub(HEADER), p.sent_at);
            fresh = newly > 0;
            if let Some(a) = ack {
                self.send_ack(&a, ctx);
            }
        } else if p.flags & FLAG_ACK != 0 {
            let ack =
                Ack { cum: p.ack, sack: p.sack, n_sack: p.n_sack, rwnd: p.seq, ts_ecr: p.ts_ecr, ..Default::default() };
            self.tx.on_ack(now, &ack);
        }
        fresh
    }

    fn send_ack(&self, a: &Ack, ctx: &mut Ctx) {
        ctx.send(Packet {
            flow: self.flow,
            seq: a.rwnd,
            ack: a.cum,
            sack: a.sack,
            n_sack: a.n_sack,
            ts_ecr: a.ts_ecr,
            size: HEADER,
            dst: self.peer.0,
            sent_at: ctx.now(),
            flags: FLAG_ACK,
            net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        });
    }

    /// Sends what the window allows.
    pub fn pump(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        if self.paused {
            return;
        }
        while let Some(seg) = self.tx.poll_transmit(now) {
            ctx.send(Packet {
                flow: self.flow,
                seq: seg.seq,
                size: seg.len + HEADER,
                dst: self.peer.0,
                sent_at: now,
                flags: FLAG_DATA | if seg.retransmission { FLAG_RETX } else { 0 },
                net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
                ..Default::default()
            });
        }
    }

    /// Handles the sender's and receiver's timers that are due.
    pub fn on_timeout(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        if self.tx.poll_timeout().is_some_and(|t| t <= now) {
            self.tx.handle_timeout(now);
        }
        if self.rx.poll_timeout().is_some_and(|t| t <= now) {
            if let Some(a) = self.rx.handle_timeout(now) {
                self.send_ack(&a, ctx);
            }
        }
        self.pump(ctx);
    }

    /// The earliest protocol deadline (with `extra`, e.g. a SYN retransmission).
    pub fn deadline(&self, extra: Option<Instant>) -> Option<Instant> {
        [self.tx.poll_timeout(), self.rx.poll_timeout(), extra].into_iter().flatten().min()
    }

    /// (Re-)arms the connection's single timer at `want`; the token is `base | generation`. A
    /// superseded timer is recognised by [`Endpoint::is_current`].
    pub fn arm(&mut self, want: Option<Instant>, base: u64, ctx: &mut Ctx) {
        let want = want.map(|t| t.max(ctx.now()));
        if want != self.armed {
            self.armed = want;
            self.gen = self.gen.wrapping_add(1);
            if let Some(t) = want {
                ctx.timer(t, base | u64::from(self.gen));
            }
        }
    }

    /// Whether a timer token's generation is the armed one (and disarms it if so).
    pub fn is_current(&mut self, token: u64) -> bool {
        if token as u32 == self.gen && self.armed.is_some() {
            self.armed = None;
            true
        } else {
            false
        }
    }
}
