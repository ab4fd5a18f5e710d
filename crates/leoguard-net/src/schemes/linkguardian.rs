//! LinkGuardian (SIGCOMM'23; the SATGUARD paper's "LinkGuard" baseline) on a simulator node: one
//! [`LgSender`] per outgoing link and one [`LgReceiver`] per incoming link, the same partial traffic
//! processing by Traffic Class as SATGUARD (§3.5) so both schemes protect the same packets.
//!
//! * Departure: a protected packet gets the link's 16-bit sequence number (LinkGuardian seq option,
//!   8 bytes of Hop-by-Hop header from `leoguard-wire`) and a copy stays in the sender's Tx buffer.
//!   The hook sees the packet enter the interface queue; LinkGuardian stamps and copies it in the
//!   egress pipeline, after the queue. The order is the same (data leaves FIFO), and the sender is
//!   told when the packet leaves ([`Ctx::egress_wait`]): its copy joins the Tx buffer and its timers
//!   start then, so a deep queue neither evicts live copies nor fires timers on packets not sent.
//! * Arrival: the receiver takes the packet out of the network, answers with a leading ACK (plus a
//!   loss notification when a hole is open) sent back on the reverse link as a link-local control
//!   packet, and hands on what it releases (in order in ordered mode, at once otherwise) through
//!   [`Ctx::resume`]. The option comes off at every hop; the next hop stamps its own.
//! * Retransmissions (each sent twice) and dummies go straight onto the link with [`Ctx::send_on`],
//!   on LinkGuardian's priority queue: the engine serves control packets (`NET_CONTROL`) ahead of
//!   all queued data, so retransmissions travel flagged `NET_CONTROL | NET_RETX` and the receiving
//!   hook turns them back into data. A retransmission therefore leaves at once, which the sender's
//!   1-RTT guard and fixed timer assume; at the tail of a deep data queue every round would wait
//!   for the queue. ACKs and dummies are link-local control packets: never forwarded, not counted as
//!   a flow's losses (neither is a lost retransmission copy: the flow's packet was counted when its
//!   first transmission was lost).
//! * Only links with LinkGuardian at both ends are protected ([`LgLinkParams::guarded`]): a link to
//!   a host outside the satellite network has no receiver to acknowledge, so every copy would be
//!   given up for lack of feedback after dummies that only the host's routing drops.
//! * No handover awareness (the weakness SATGUARD §5 shows): when a link goes down its sender's
//!   buffer is discarded ([`LgSender::on_link_change`], counted as given up for a link change) and
//!   the receiver across it starts afresh, dropping what it held back.
//!
//! ## Egress idle, dummy trains
//! LinkGuardian sends a dummy train when the egress of a link goes idle with unacknowledged copies
//! (tail loss); the sender paces trains at one per link RTT (`leoguard_proto::linkguardian`, "Dummy
//! rule"), so a link at partial load, which drains after almost every packet, does not follow each
//! packet with a train. The hook clocks the drains with a timer on a *virtual transmitter*: every
//! packet this node puts on a link passes the hook (routed departures through
//! [`Agent::on_depart`], its own retransmissions, dummies and ACKs through one helper), links
//! serialise FIFO at a fixed rate, so `busy_until = max(now, busy_until) + size / rate` is when the
//! link's egress drains (whatever order the queue serves packets in, as long as it does not idle
//! while holding any). This needs no
//! change to the simulator and, unlike an "egress queue drained" callback on the engine's transmit
//! events, it also covers a burst whose last packet the loss model dropped: the engine draws that
//! loss before the packet occupies the link, so the real link never went busy, yet LinkGuardian's
//! hardware would have sent it and then gone idle. The estimate is late only after drop-tail queue
//! drops (the link was congested anyway). The check is a `DeadlineTimer`: an event that comes before
//! the earliest drain asked for (packets sent since moved it later) only sets the timer again, so a
//! busy link costs a timer event per check, not per packet, and no look at its ports.
//!
//! ## Link parameters
//! [`LgConfig::for_link`] scales buffers and timers by the link's rate and round-trip time. The hook
//! reads them from the [`LgLinkParams`] table it is built with, when a link's sender or receiver is
//! first created; a link's later delay changes (orbital motion) do not reach it. Callers of
//! constellation runs should put the delay to size the link for (its largest) in the table, and
//! mark links to nodes without the hook (hosts) not [`guarded`](LgLinkParams::guarded). The
//! round trip includes the serialisation of a full-size packet (`MTU_BYTES`): with propagation
//! alone, the 1-RTT retransmission guard and the fallback trains expire just before the ACK they
//! wait for returns (both retransmit or probe spuriously).

use crate::host::{Agent, Ctx, DeadlineTimer};
use crate::link::{Link, LinkId};
use crate::packet::{NetFields, Packet, NET_CONTROL, NET_HSEQ, NET_RETX};
use leoguard_core::{Bps, Bytes, Duration, Instant, Seq16};
use leoguard_proto::linkguardian::{
    GiveUpReason, LgAck, LgConfig, LgConfigError, LgEvent, LgReceiver, LgSender, OutKind,
};
use leoguard_wire::{HbhRepr, LinkGuardianAck, LinkGuardianSeq, IPV6_HEADER_LEN, NEXT_HEADER_NONE};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Traffic Class value that marks delay-sensitive traffic (DSCP EF), as on the wire.
pub use leoguard_wire::TC_DELAY_SENSITIVE;

/// Bytes the Hop-by-Hop header with the LinkGuardian seq option adds to a data packet.
fn seq_bytes() -> u32 {
    super::wire::data_header_bytes(super::wire::WireScheme::LinkGuardian)
}

/// Size of an ACK packet: the IPv6 header plus a Hop-by-Hop header with the LinkGuardian ACK option.
fn ack_bytes() -> u32 {
    let mut h = HbhRepr::new(NEXT_HEADER_NONE);
    h.lg_ack = Some(LinkGuardianAck::default());
    (IPV6_HEADER_LEN + h.buffer_len()) as u32
}

/// Size of a dummy: the IPv6 header plus a Hop-by-Hop header with the seq option (dummy flag), no payload.
fn dummy_bytes() -> u32 {
    let mut h = HbhRepr::new(NEXT_HEADER_NONE);
    h.lg_seq = Some(LinkGuardianSeq { dummy: true, ..LinkGuardianSeq::default() });
    (IPV6_HEADER_LEN + h.buffer_len()) as u32
}

/// LinkGuardian switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkGuardianOptions {
    /// Ordered mode: receivers hold packets behind a hole and release them in order.
    pub ordered: bool,
    /// One fixed retransmission timer on shared (one-to-many) links instead of loss notifications
    /// (SATGUARD §3.3); `None`: notifications on every link.
    pub shared_links_fixed_timeout: Option<Duration>,
    /// Process every packet (partial traffic processing off); else only delay-sensitive ones.
    pub process_all: bool,
}

impl Default for LinkGuardianOptions {
    fn default() -> Self {
        LinkGuardianOptions { ordered: true, shared_links_fixed_timeout: None, process_all: false }
    }
}

/// What LinkGuardian needs to know about one link (index = link id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LgLinkParams {
    /// Capacity (serialisation of the virtual transmitter, BDP of the Tx buffer).
    pub rate: Bps,
    /// One-way propagation delay the link's timers and buffer are sized for.
    pub delay: Duration,
    /// A shared one-to-many link (a user link): uses the fixed timer when one is configured.
    pub shared: bool,
    /// LinkGuardian runs at both ends. A link to a node without it (a host outside the satellite
    /// network) carries packets unprotected: nothing there would acknowledge them.
    pub guarded: bool,
    /// Up when the run starts. The engine reports link state changes only, so a link created down
    /// (a ground link not yet in use) would otherwise look up: packets routed onto it before it
    /// comes up would be stamped and buffered, their copies given up for lack of feedback, and the
    /// receiver would wait out the hole they leave when the link comes up.
    pub up: bool,
}

impl LgLinkParams {
    /// The table for every link of `net` as it is now (current delays and states, no link shared,
    /// all guarded).
    pub fn table<P: Copy>(links: &[Link<P>]) -> Vec<LgLinkParams> {
        links
            .iter()
            .map(|l| LgLinkParams { rate: l.rate, delay: l.delay, shared: false, guarded: true, up: l.up })
            .collect()
    }
}

counters! {
    /// Counters of one node (summed over nodes with `+=`).
    pub struct LinkGuardianStats {
        /// Packets stamped with a link sequence number on departure (first transmissions).
        protected,
        /// Packets passed untouched (not delay-sensitive, or their link was down).
        unprotected,
        /// Retransmitted copies sent (both copies of every round).
        retransmissions,
        /// Packets acknowledged after at least one retransmission.
        recovered,
        /// Dummies sent.
        dummies,
        /// Bytes of dummies sent.
        dummy_bytes,
        /// ACK packets sent.
        acks_sent,
        /// Bytes of ACK packets sent.
        ack_bytes,
        /// Of the ACKs sent, those carrying a loss notification.
        notifications_sent,
        /// ACKs from before the link last went down, ignored.
        stale_acks,
        /// Packets given up after `max_retries` rounds.
        given_up_retries,
        /// Packets evicted from a full Tx buffer.
        given_up_buffer_full,
        /// Packets discarded because their link went down (no handover awareness).
        given_up_link_change,
        /// Packets given up after dummy trains brought no feedback.
        given_up_no_feedback,
        /// Packets a receiver held back (ordered mode) and dropped when its link went down.
        held_discarded,
        /// Sequence numbers receivers gave up after their hole timeout.
        holes_skipped,
        /// Duplicate copies dropped by receivers.
        duplicates,
        /// Protocol timer expiries handled.
        timer_runs,
        /// Egress idle checks run (module docs, "Egress idle").
        idle_checks,
        ; // the largest of all nodes, not a sum
        /// Largest Tx buffer occupancy of any one link, bytes (`+=` keeps the maximum).
        max_buffer_bytes,
    }
}
impl LinkGuardianStats {
    /// Packets given up for any reason.
    pub fn given_up(&self) -> u64 {
        self.given_up_retries + self.given_up_buffer_full + self.given_up_link_change + self.given_up_no_feedback
    }

    fn on_event(&mut self, e: LgEvent) {
        match e {
            LgEvent::Delivered { .. } => {}
            LgEvent::Recovered { .. } => self.recovered += 1,
            LgEvent::GivenUp { reason, .. } => match reason {
                GiveUpReason::RetriesExhausted => self.given_up_retries += 1,
                GiveUpReason::BufferFull => self.given_up_buffer_full += 1,
                GiveUpReason::LinkChange => self.given_up_link_change += 1,
                GiveUpReason::NoFeedback => self.given_up_no_feedback += 1,
            },
        }
    }
}

/// Packet sizes from the wire format.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    seq: u32,
    ack: u32,
    dummy: u32,
}

/// The egress side of one link at this node.
#[derive(Debug)]
struct Port {
    rate: Bps,
    /// When the virtual transmitter finishes what this node has put on the link.
    busy_until: Instant,
    /// Protected data left since the last idle check: the next drain is reported to the sender.
    idle_pending: bool,
    up: bool,
    /// When the link last went down: ACKs sent at or before it belong to the discarded numbering.
    down_at: Option<Instant>,
    tx: Option<LgSender<Packet>>,
}

impl Port {
    fn new(rate: Bps, up: bool) -> Port {
        Port { rate, busy_until: Instant::ZERO, idle_pending: false, up, down_at: None, tx: None }
    }

    /// Accounts a packet of `size` bytes put on the link now; returns its serialisation time.
    fn occupy(&mut self, now: Instant, size: u32) -> Duration {
        let t = self.rate.transmission_time(Bytes(u64::from(size))).unwrap_or(Duration::ZERO);
        self.busy_until = self.busy_until.max(now) + t;
        t
    }

    /// Accounts a control packet (ACK, dummy, retransmission) put on the link now: the engine sends
    /// it ahead of the data queued there, which leaves that much later (the sender's copies of it
    /// join the Tx buffer then).
    fn occupy_priority(&mut self, now: Instant, size: u32) {
        let t = self.occupy(now, size);
        if let Some(s) = self.tx.as_mut() {
            s.on_priority_sent(now, t);
        }
    }

    /// Sends the retransmissions and dummies the sender wants on `link` and counts its events.
    fn pump(&mut self, link: LinkId, sizes: Sizes, stats: &mut LinkGuardianStats, ctx: &mut Ctx) {
        let now = ctx.now();
        if self.tx.is_none() {
            return;
        }
        while let Some(o) = self.tx.as_mut().and_then(|s| s.poll_transmit(now)) {
            let p = match (o.kind, o.item) {
                (OutKind::Retransmission { .. }, Some(mut p)) => {
                    // LinkGuardian's priority queue: the engine's control lane (module docs).
                    p.net.hseq = o.seq.0;
                    p.net.flags |= NET_HSEQ | NET_RETX | NET_CONTROL;
                    stats.retransmissions += 1;
                    p
                }
                _ => {
                    stats.dummies += 1;
                    stats.dummy_bytes += u64::from(sizes.dummy);
                    Packet {
                        flow: u32::MAX,
                        seq: u64::from(link.0),
                        size: sizes.dummy,
                        dst: u32::MAX,
                        sent_at: now,
                        net: NetFields { flags: NET_CONTROL | NET_HSEQ, hseq: o.seq.0, ..Default::default() },
                        ..Default::default()
                    }
                }
            };
            self.occupy_priority(now, p.size);
            ctx.send_on(link, p);
        }
        while let Some(e) = self.tx.as_mut().and_then(LgSender::poll_event) {
            stats.on_event(e);
        }
    }
}

/// The links this node sends on.
#[derive(Debug)]
struct Egress {
    /// Rate, delay and kind of every link.
    links: Arc<Vec<LgLinkParams>>,
    ports: BTreeMap<u32, Port>,
    sizes: Sizes,
}

impl Egress {
    /// The port of `link`, created on first use; `None` for a link missing from the table.
    fn port(&mut self, link: LinkId) -> Option<&mut Port> {
        let l = self.links.get(link.0 as usize)?;
        let (rate, up) = (l.rate, l.up);
        Some(self.ports.entry(link.0).or_insert_with(|| Port::new(rate, up)))
    }

    /// Puts a control packet this hook made on `link`, keeping the link's virtual transmitter up to
    /// date.
    fn put(&mut self, link: LinkId, p: Packet, ctx: &mut Ctx) {
        if let Some(port) = self.port(link) {
            port.occupy_priority(ctx.now(), p.size);
        }
        ctx.send_on(link, p);
    }
}

/// ACK fields in a control packet's `ack`: leading_ack | first_lost << 16 | hole_size << 32 | flags
/// << 48, flags bit 0: loss notification; bit 1: per-packet ACK of the seq in the first_lost field
/// (shared links; the two never come together).
fn encode_ack(a: &LgAck) -> u64 {
    let (first, n, flags) = match (a.loss, a.received) {
        (Some((f, n)), _) => (f.0, n, 1u64),
        (None, Some(r)) => (r.0, 0, 2),
        (None, None) => (0, 0, 0),
    };
    u64::from(a.leading_ack.0) | (u64::from(first) << 16) | (u64::from(n) << 32) | (flags << 48)
}

fn decode_ack(x: u64) -> LgAck {
    let first = Seq16((x >> 16) as u16);
    let loss = ((x >> 48) & 1 == 1).then_some((first, (x >> 32) as u16));
    let received = (loss.is_none() && (x >> 49) & 1 == 1).then_some(first);
    LgAck { leading_ack: Seq16(x as u16), loss, received }
}

/// Hands on what the receiver of `link` released and sends its ACKs back on `back`.
fn drain_receiver(
    r: &mut LgReceiver<Packet>,
    link: LinkId,
    back: Option<LinkId>,
    out: &mut Egress,
    stats: &mut LinkGuardianStats,
    ctx: &mut Ctx,
) {
    while let Some(q) = r.poll_deliver() {
        ctx.resume(q);
    }
    while let Some(a) = r.poll_ack() {
        let Some(back) = back else { continue };
        let p = Packet {
            flow: u32::MAX,
            seq: u64::from(link.0),
            ack: encode_ack(&a),
            size: out.sizes.ack,
            dst: u32::MAX,
            sent_at: ctx.now(),
            net: NetFields { flags: NET_CONTROL, ..Default::default() },
            ..Default::default()
        };
        stats.acks_sent += 1;
        stats.ack_bytes += u64::from(out.sizes.ack);
        stats.notifications_sent += u64::from(a.loss.is_some());
        out.put(back, p, ctx);
    }
}

/// Full-size packet, bytes (IPv6 MTU on Ethernet): the serialisation allowance in a link's RTT.
const MTU_BYTES: u64 = 1500;

/// Token tag of the egress idle check (the protocol timer's, for sender and receiver timeouts, is 0).
const IDLE_TIMER: u64 = 1 << 63;

/// The LinkGuardian hook of one node.
#[derive(Debug)]
pub struct LinkGuardianHook {
    opts: LinkGuardianOptions,
    /// Reverse direction of every link (ACKs go back on it).
    reverse: Arc<Vec<Option<LinkId>>>,
    out: Egress,
    receivers: BTreeMap<u32, LgReceiver<Packet>>,
    /// Fired early (its deadline moved later), it runs the timeouts harmlessly and is set again.
    protocol_timer: DeadlineTimer,
    idle_timer: DeadlineTimer,
    /// Counters.
    pub stats: LinkGuardianStats,
}

impl LinkGuardianHook {
    /// A hook with validated options; `reverse[l]` is the link back along link `l`, `links[l]` its
    /// parameters (see [`LgLinkParams::table`]).
    pub fn new(
        opts: LinkGuardianOptions,
        reverse: Arc<Vec<Option<LinkId>>>,
        links: Arc<Vec<LgLinkParams>>,
    ) -> Result<Self, LgConfigError> {
        // Per-link configurations differ from this one only in values `for_link` keeps valid.
        let probe =
            LgConfig { fixed_timeout: opts.shared_links_fixed_timeout, ..LgConfig::for_link(Bps(1), Duration(1)) };
        probe.validate()?;
        Ok(LinkGuardianHook {
            opts,
            reverse,
            out: Egress {
                links,
                ports: BTreeMap::new(),
                sizes: Sizes { seq: seq_bytes(), ack: ack_bytes(), dummy: dummy_bytes() },
            },
            receivers: BTreeMap::new(),
            protocol_timer: DeadlineTimer::new(0),
            idle_timer: DeadlineTimer::new(IDLE_TIMER),
            stats: LinkGuardianStats::default(),
        })
    }

    fn protected(&self, p: &Packet) -> bool {
        self.opts.process_all || p.net.tc == TC_DELAY_SENSITIVE
    }

    /// The configuration of `link`'s sender and receiver; `None` for a link missing from the table or
    /// not guarded at both ends.
    fn config(&self, link: LinkId) -> Option<LgConfig> {
        let l = self.out.links.get(link.0 as usize).filter(|l| l.guarded)?;
        // The feedback loop also serialises the data packet and its ACK: size timers for the latency
        // of a full-size packet, or the 1-RTT guard and fallback trains fire just before the ACK.
        let ser = l.rate.transmission_time(Bytes(MTU_BYTES)).unwrap_or(Duration::ZERO);
        let mut c = LgConfig::for_link(l.rate, l.delay + ser);
        c.ordered = self.opts.ordered;
        if l.shared {
            c.fixed_timeout = self.opts.shared_links_fixed_timeout;
        }
        Some(c)
    }

    fn back(&self, link: LinkId) -> Option<LinkId> {
        self.reverse.get(link.0 as usize).copied().flatten()
    }

    /// Arms the protocol timer for the earliest sender or receiver deadline (timeouts that are not due
    /// yet are no-ops in the state machines, so an early expiry is harmless).
    fn arm(&mut self, ctx: &mut Ctx) {
        let tx = self.out.ports.values().filter_map(|p| p.tx.as_ref().and_then(LgSender::poll_timeout)).min();
        let rx = self.receivers.values().filter_map(LgReceiver::poll_timeout).min();
        self.protocol_timer.set(tx.into_iter().chain(rx).min(), ctx);
    }

    /// Arms an egress idle check for the earliest pending drain.
    fn arm_idle(&mut self, ctx: &mut Ctx) {
        let want = self.out.ports.values().filter(|p| p.idle_pending).map(|p| p.busy_until).min();
        self.idle_timer.set(want, ctx);
    }

    /// Tells the senders whose link drained that the egress is idle (dummy trains follow).
    fn idle_check(&mut self, ctx: &mut Ctx) {
        self.stats.idle_checks += 1;
        let now = ctx.now();
        let sizes = self.out.sizes;
        for (&l, port) in &mut self.out.ports {
            if port.idle_pending && port.busy_until <= now {
                port.idle_pending = false;
                if let Some(s) = port.tx.as_mut() {
                    s.on_idle(now);
                }
                port.pump(LinkId(l), sizes, &mut self.stats, ctx);
            }
        }
        self.arm_idle(ctx);
        self.arm(ctx);
    }

    /// Runs the due sender and receiver timeouts.
    fn protocol_timeout(&mut self, ctx: &mut Ctx) {
        self.stats.timer_runs += 1;
        let now = ctx.now();
        let sizes = self.out.sizes;
        for (&l, port) in &mut self.out.ports {
            if let Some(s) = port.tx.as_mut() {
                s.handle_timeout(now);
                port.pump(LinkId(l), sizes, &mut self.stats, ctx);
            }
        }
        for (&l, r) in &mut self.receivers {
            let skipped = r.stats().skipped;
            r.handle_timeout(now);
            self.stats.holes_skipped += r.stats().skipped - skipped;
            let back = self.reverse.get(l as usize).copied().flatten();
            drain_receiver(r, LinkId(l), back, &mut self.out, &mut self.stats, ctx);
        }
        self.arm(ctx);
    }

    /// A data packet or dummy for the receiver of incoming `link` (created on first use); false if
    /// the link is missing from the table.
    fn receive(&mut self, link: LinkId, what: Result<(Seq16, Packet), Seq16>, ctx: &mut Ctx) -> bool {
        let Some(cfg) = self.config(link) else { return false };
        let back = self.back(link);
        let r = self.receivers.entry(link.0).or_insert_with(|| {
            LgReceiver::new(cfg).expect("invariant: for_link values with options validated in new()")
        });
        let now = ctx.now();
        match what {
            Ok((seq, p)) => {
                let dup = r.stats().duplicates;
                r.on_receive(now, seq, p);
                self.stats.duplicates += r.stats().duplicates - dup;
            }
            Err(next) => r.on_dummy(now, next),
        }
        drain_receiver(r, link, back, &mut self.out, &mut self.stats, ctx);
        self.arm(ctx);
        true
    }

    /// An ACK for the sender on the data link it names.
    fn on_ack(&mut self, p: &Packet, ctx: &mut Ctx) {
        let data_link = LinkId(p.seq as u32);
        let Some(port) = self.out.ports.get_mut(&data_link.0) else { return };
        if port.down_at.is_some_and(|t| p.sent_at <= t) {
            self.stats.stale_acks += 1;
            return;
        }
        let Some(s) = port.tx.as_mut() else { return };
        s.on_ack(ctx.now(), &decode_ack(p.ack));
        port.pump(data_link, self.out.sizes, &mut self.stats, ctx);
        self.arm(ctx);
    }
}

impl Agent for LinkGuardianHook {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if token & IDLE_TIMER != 0 {
            // Early (the drain it was set for moved later with the packets sent since), it only
            // sets itself again: no port has drained before the earliest drain asked for.
            if self.idle_timer.due(token, ctx) {
                self.idle_check(ctx);
            }
        } else if self.protocol_timer.fired(token) {
            self.protocol_timeout(ctx);
        }
    }

    fn on_arrive(&mut self, link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if p.net.flags & (NET_CONTROL | NET_RETX) == NET_CONTROL {
            // Link-local: a dummy (it carries a seq) for our receiver, or an ACK for our sender.
            if p.net.flags & NET_HSEQ != 0 {
                self.receive(link, Err(Seq16(p.net.hseq)), ctx);
            } else {
                self.on_ack(p, ctx);
            }
            return false;
        }
        if p.net.flags & NET_HSEQ == 0 {
            return true;
        }
        // The seq option belongs to the link just crossed: it comes off here (and a retransmission
        // leaves the priority queue's control lane).
        let seq = Seq16(p.net.hseq);
        p.net.flags &= !(NET_HSEQ | NET_RETX | NET_CONTROL);
        p.size = p.size.saturating_sub(self.out.sizes.seq);
        // The receiver takes the packet; what it releases is handed on (in order in ordered mode).
        !self.receive(link, Ok((seq, *p)), ctx)
    }

    fn on_depart(&mut self, link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        let now = ctx.now();
        let protect = self.protected(p);
        let cfg = self.config(link);
        let size = p.size + if protect { self.out.sizes.seq } else { 0 };
        let (Some(cfg), Some(port)) = (cfg, self.out.port(link)) else {
            self.stats.unprotected += 1;
            return true;
        };
        if !protect || !port.up {
            port.occupy(now, p.size);
            self.stats.unprotected += 1;
            return true;
        }
        port.occupy(now, size);
        let s = port.tx.get_or_insert_with(|| {
            LgSender::new(cfg).expect("invariant: for_link values with options validated in new()")
        });
        p.size = size;
        // Its copy and timers start when it leaves the interface (module docs, "Departure").
        let seq = s.on_send(now, now + ctx.egress_wait(), *p, size);
        p.net.hseq = seq.0;
        p.net.flags = (p.net.flags | NET_HSEQ) & !NET_RETX;
        port.idle_pending = true;
        self.stats.protected += 1;
        self.stats.max_buffer_bytes = self.stats.max_buffer_bytes.max(s.buffer_bytes());
        while let Some(e) = s.poll_event() {
            self.stats.on_event(e);
        }
        self.arm_idle(ctx);
        self.arm(ctx);
        true
    }

    fn on_link_state(&mut self, link: LinkId, up: bool, ctx: &mut Ctx) {
        let now = ctx.now();
        // A port also for a link not sent on yet, so a packet routed onto it while down is not stamped.
        if let Some(port) = self.out.port(link) {
            port.up = up;
            if !up {
                // No handover awareness: the buffer is useless on whatever link comes next.
                port.busy_until = now;
                port.idle_pending = false;
                port.down_at = Some(now);
                if let Some(s) = port.tx.as_mut() {
                    s.on_link_change();
                    while let Some(e) = s.poll_event() {
                        self.stats.on_event(e);
                    }
                }
            }
        }
        if !up {
            if let Some(r) = self.receivers.get_mut(&link.0) {
                self.stats.held_discarded += r.reset() as u64;
            }
        }
        self.arm(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_sizes_come_from_the_wire_format() {
        // docs/wire.md: the seq option adds 8 bytes, an ACK packet is 56 bytes, a dummy 48.
        assert_eq!((seq_bytes(), ack_bytes(), dummy_bytes()), (8, 56, 48));
        for a in [
            LgAck { leading_ack: Seq16(65_535), loss: None, received: None },
            LgAck { leading_ack: Seq16(7), loss: Some((Seq16(65_530), 12)), received: None },
            LgAck { leading_ack: Seq16(7), loss: None, received: Some(Seq16(65_000)) },
        ] {
            assert_eq!(decode_ack(encode_ack(&a)), a);
        }
    }

    #[test]
    fn bad_options_are_rejected() {
        let opts = LinkGuardianOptions { shared_links_fixed_timeout: Some(Duration::ZERO), ..Default::default() };
        let e = LinkGuardianHook::new(opts, Arc::new(Vec::new()), Arc::new(Vec::new())).unwrap_err();
        assert_eq!(e, LgConfigError::Zero("fixed_timeout"));
    }
}
