//! SATGUARD on a simulator node, every technique switchable for ablation:
//!
//! - LL-ReTx (§3.1/§3.5): one [`HopSender`] per outgoing link and one [`HopReceiver`] per incoming
//!   link of the satellite network, FSeq stamped where a packet enters it, HAcks sent back on the
//!   reverse link as link-local control packets (links serve them ahead of data), loss found by HAck
//!   discontinuity on one-to-one links and by timers, retransmission with a new HSeq;
//! - handover-aware buffer migration (§3.2, `migrate.rs`): the old satellite moves its buffer to the
//!   new one ahead of a planned handover; packets for a link down in a handover wait in a network-layer
//!   buffer instead of being lost, and packets reaching the old satellite after the handover are sent
//!   on to the new one;
//! - beam-based loss timers (§3.3): on one-to-many user downlinks gap detection is off and each beam
//!   has its own timeout thd = 2·d(cell centre, satellite)/c, recomputed as the satellite moves (off:
//!   one fixed timer for all users, as 802.11 LL-ReTx does, sized for the longest slant range the
//!   minimum elevation allows, 2·d_max/c plus the same guard);
//! - ground-side order preserving (§3.4): a per-flow FSeq reorder buffer where packets leave the
//!   satellite network; a packet whose gap the buffer had given up on passes late rather than being
//!   dropped (off: packets leave as they come; duplicates are still dropped there);
//! - partial traffic processing (§3.5): only delay-sensitive traffic (Traffic Class EF) is processed.
//!
//! A node's uplink sender stays on the ground across a handover: its pending packets are re-homed onto
//! the new link when it comes up. Without migration a satellite's pending packets are lost when its
//! link goes away (the baseline LL-ReTx failure the paper describes, Fig 8).

mod migrate;
mod net;
mod stats;

pub use migrate::{commit_bytes, encap_bytes, SR_COMMIT, SR_COPY, SR_REDIRECT};
pub use net::SatguardNet;
pub use stats::{HopRow, SatguardStats};

use crate::host::{Agent, Ctx, DeadlineTimer};
use crate::link::LinkId;
use crate::packet::{Packet, NET_CONTROL, NET_FSEQ, NET_HSEQ, NET_MIGRATED, NET_RETX, NET_SR, NET_UNPARKED, NET_VOID};
use leoguard_core::RecentKeys;
use leoguard_core::{Bps, Bytes, Duration, Instant, Seq16};
use leoguard_proto::satguard::hop::{HAck, HopConfig, HopError, HopReceiver, HopSender};
use leoguard_proto::satguard::reorder::{Pushed, ReorderBuffer, ReorderConfig};
use leoguard_wire::{HbhRepr, SatguardHack, IPV6_HEADER_LEN, NEXT_HEADER_NONE};
use migrate::{Inbox, Outgoing};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Wire size of a void: an IPv6 header and a Hop-by-Hop header with the FSeq option, no payload.
const VOID_BYTES: u32 = 48;

/// Traffic Class value that marks delay-sensitive traffic (DSCP EF), as on the wire.
pub use leoguard_wire::TC_DELAY_SENSITIVE;

/// Bytes the Hop-by-Hop options header adds to a protected packet: the wire format's header with the
/// HSeq and FSeq options.
/// The void that tells the exit to stop waiting for `p`, which died inside the network (none if `p`
/// has no FSeq yet or no exit reorders).
fn void_for(p: &Packet, opts: &SatguardOptions) -> Option<Packet> {
    if p.net.flags & NET_FSEQ == 0 || opts.reorder.is_none() {
        return None;
    }
    Some(Packet {
        flow: p.flow,
        dst: p.dst,
        seq: p.seq,
        sent_at: p.sent_at,
        size: VOID_BYTES,
        net: crate::packet::NetFields {
            tc: p.net.tc,
            fseq: p.net.fseq,
            flags: NET_CONTROL | NET_VOID | NET_FSEQ,
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The smallest batch of parked packets released at once: one full-size packet.
const MTU_BYTES: u64 = 1500;

fn hbh_bytes() -> u32 {
    super::wire::data_header_bytes(super::wire::WireScheme::Satguard)
}

/// Size of a HAck packet: the IPv6 header plus a Hop-by-Hop header with the HAck option.
fn hack_bytes() -> u32 {
    let mut h = HbhRepr::new(NEXT_HEADER_NONE);
    h.hack = Some(SatguardHack::default());
    (IPV6_HEADER_LEN + h.buffer_len()) as u32
}

/// SATGUARD switches and parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SatguardOptions {
    /// Per-hop sender configuration (`default_timeout`: the backstop timer of one-to-one links and
    /// the one fixed timer of user links without beam timers).
    pub hop: HopConfig,
    /// Process every packet (partial traffic processing off); else only delay-sensitive ones.
    pub process_all: bool,
    /// Duplicate-suppression window of receivers and of the exit without reordering, packets (below
    /// 2^15, so a flow's FSeq cannot come round inside it).
    pub dedup_window: usize,
    /// Handover-aware buffer migration (§3.2).
    pub migration: bool,
    /// Beam-based timers on user downlinks (§3.3).
    pub beam_timers: bool,
    /// Slack added to thd for what 2·d/c leaves out (HAck serialisation, a packet on the reverse
    /// transmitter, a terminal away from its cell centre).
    pub beam_guard: Duration,
    /// The ground-side reorder buffer (§3.4); `None` = off.
    pub reorder: Option<ReorderConfig>,
    /// How long the new satellite waits for a migration's commit once its link is up.
    pub commit_grace: Duration,
}

impl Default for SatguardOptions {
    /// A hop resends a packet for as long as the exit's reorder buffer may hold its gap (the
    /// reorder buffer's `max_hold`); the retry count is only a backstop. A packet resent later would
    /// reach an exit that has stopped waiting for it, and one given up sooner leaves a gap the
    /// end-to-end sender must close (a window cut) although the hop could still have.
    fn default() -> Self {
        let reorder = ReorderConfig::default();
        SatguardOptions {
            hop: HopConfig { max_retries: u8::MAX, retry_budget: Some(reorder.max_hold), ..HopConfig::default() },
            process_all: false,
            dedup_window: 16_384,
            migration: true,
            beam_timers: true,
            beam_guard: Duration::from_micros(500),
            reorder: Some(reorder),
            commit_grace: Duration::from_millis(50),
        }
    }
}

impl SatguardOptions {
    /// Checks every field; errors name it.
    pub fn validate(&self) -> Result<(), HopError> {
        self.hop.validate()?;
        // Keys are (flow, 16-bit FSeq): a window of 2^15 packets or more could hold a flow's FSeq
        // from the previous wrap and take a first copy for a duplicate.
        if self.dedup_window == 0 || self.dedup_window >= 1 << 15 {
            return Err(HopError::Invalid {
                field: "dedup_window",
                value: self.dedup_window.to_string(),
                reason: "must be in [1, 32767] packets (below half the 16-bit FSeq space)",
            });
        }
        if let Some(r) = &self.reorder {
            r.validate().map_err(|e| HopError::Invalid {
                field: "reorder",
                value: format!("{r:?}"),
                reason: reorder_reason(e),
            })?;
        }
        Ok(())
    }
}

fn reorder_reason(e: leoguard_proto::satguard::reorder::ReorderConfigError) -> &'static str {
    use leoguard_proto::satguard::reorder::ReorderConfigError as E;
    match e {
        E::ZeroMinHold => "min_hold must be > 0",
        E::InvertedBounds { .. } => "max_hold must be >= min_hold",
        E::InitialOutOfBounds(_) => "initial_hold must lie in [min_hold, max_hold]",
        E::ZeroCapacity => "max_held_per_flow must be > 0",
        E::BadWindow(_) => "window must be in 1..=32767",
        E::ZeroRestart => "restart_after must be > 0",
    }
}

/// Where packets leave the satellite network: the reorder buffer, or duplicate suppression alone.
#[derive(Debug)]
enum Exit {
    /// `None` items are voids: FSeqs dropped by congestion, released as nothing.
    Reorder(ReorderBuffer<Option<Packet>, u64>),
    Dedup {
        seen: RecentKeys,
    },
}

/// The pace at which parked packets go back out (§3.2's network-layer buffer empties into the
/// interface queue as that queue empties, not into it at once: a handover's backlog released in one
/// burst overflows the queue of the link that came up).
#[derive(Clone, Copy, Debug)]
struct Drain {
    /// Capacity of the link that came up.
    rate: Bps,
    /// Bytes handed to the interface per release: half that link's queue.
    batch: u64,
    /// When the next batch goes: when the interface has sent half of the last one (learnt from the
    /// real wait of the last released packet as it departs, which counts other traffic too).
    next: Instant,
}

/// The SATGUARD hook of one node.
#[derive(Debug)]
pub struct SatguardHook {
    opts: SatguardOptions,
    net: Arc<SatguardNet>,
    node: u32,
    senders: BTreeMap<u32, HopSender<Packet>>,
    receivers: BTreeMap<u32, HopReceiver>,
    fseq: BTreeMap<(u32, u32), Seq16>,
    /// Link states at this node seen change (others are as the topology started them).
    link_state: BTreeMap<u32, bool>,
    /// Packets waiting for a link that is down in a handover (migration on), oldest first.
    parked: VecDeque<Packet>,
    parked_bytes: u64,
    /// Parked packets going back out after a link came up, paced so the interface queue is never
    /// handed more than it holds (none: nothing parked, or no link up yet).
    drain: Option<Drain>,
    /// A ground node's pending uplink packets whose link went down, re-homed when a link comes up.
    orphans: Vec<Packet>,
    exit: Exit,
    /// Since when this exit node has had no satellite link up (a handover interruption): reorder
    /// holds stand still meanwhile.
    exit_paused: Option<Instant>,
    /// Handovers this node is the old satellite of, in time order, and the next one to prepare.
    plans: Vec<usize>,
    next_plan: usize,
    outgoing: BTreeMap<u32, Outgoing>,
    inboxes: BTreeMap<usize, Inbox>,
    /// The node's one timer, at the earliest deadline of its senders, exit, migrations and drain
    /// (moved later, it fires early and re-arms itself: a HAck moves it later once per packet).
    timer: DeadlineTimer,
    hbh_bytes: u32,
    hack_bytes: u32,
    /// Per link of this node: when the last protected packet put on it leaves the interface (its
    /// queue is FIFO), so a retransmission or a migrated packet put behind it starts its loss timer
    /// when it leaves too.
    egress_busy: BTreeMap<u32, Instant>,
    /// Counters.
    pub stats: SatguardStats,
}

/// The interfaces of a node as its hook times what it queues there itself (retransmissions,
/// migrated packets): behind the protected packets already queued, FIFO, at the link's rate.
struct Egress<'a> {
    busy: &'a mut BTreeMap<u32, Instant>,
    rate: &'a [Bps],
}

impl Egress<'_> {
    /// When the last bit of a `bytes` packet put on `link` at `now` leaves the interface.
    fn leaves(&mut self, link: LinkId, now: Instant, bytes: u32) -> Instant {
        let serialise = self
            .rate
            .get(link.0 as usize)
            .and_then(|r| r.transmission_time(Bytes(u64::from(bytes))))
            .unwrap_or(Duration::ZERO);
        let busy = self.busy.entry(link.0).or_insert(now);
        *busy = (*busy).max(now) + serialise;
        *busy
    }
}

/// A packet's end-to-end identity: flow, direction and FSeq (FSeq runs per flow and destination; a
/// flow has two ends, so the low 16 bits of the destination tell them apart).
fn key(p: &Packet) -> u64 {
    (flow_key(p) << 16) | u64::from(p.net.fseq)
}

/// A flow direction: flow and destination (the reorder buffer's flow).
fn flow_key(p: &Packet) -> u64 {
    (u64::from(p.flow) << 16) | u64::from(p.dst & 0xFFFF)
}

impl SatguardHook {
    /// The hook of `node` with validated options.
    pub fn new(opts: SatguardOptions, net: Arc<SatguardNet>, node: u32) -> Result<Self, HopError> {
        opts.validate()?;
        let exit = match opts.reorder {
            Some(cfg) => Exit::Reorder(ReorderBuffer::new(cfg).map_err(|e| HopError::Invalid {
                field: "reorder",
                value: format!("{cfg:?}"),
                reason: reorder_reason(e),
            })?),
            None => Exit::Dedup { seen: RecentKeys::new(opts.dedup_window) },
        };
        let plans = if opts.migration { net.plans_from.get(&node).cloned().unwrap_or_default() } else { Vec::new() };
        Ok(SatguardHook {
            opts,
            net,
            node,
            senders: BTreeMap::new(),
            receivers: BTreeMap::new(),
            fseq: BTreeMap::new(),
            link_state: BTreeMap::new(),
            parked: VecDeque::new(),
            parked_bytes: 0,
            drain: None,
            orphans: Vec::new(),
            exit,
            exit_paused: None,
            plans,
            next_plan: 0,
            outgoing: BTreeMap::new(),
            inboxes: BTreeMap::new(),
            timer: DeadlineTimer::new(0),
            hbh_bytes: hbh_bytes(),
            hack_bytes: hack_bytes(),
            egress_busy: BTreeMap::new(),
            stats: SatguardStats::default(),
        })
    }

    fn protected(&self, p: &Packet) -> bool {
        self.opts.process_all || p.net.tc == TC_DELAY_SENSITIVE
    }

    fn sender(&mut self, link: LinkId) -> &mut HopSender<Packet> {
        let mut cfg = self.opts.hop;
        // The simulator stamps a packet as it enters the interface queue, so the sender's store holds
        // the queue too: the Tx buffer proper (sent, unacknowledged) plus what waits to be sent.
        cfg.buffer_bytes += self.net.queue_bytes.get(link.0 as usize).copied().unwrap_or(0);
        if self.net.user_downlink(link).is_some() {
            // One-to-many: HAcks of several terminals interleave, a gap says nothing (§3.3).
            cfg.detect_gaps = false;
        }
        self.senders.entry(link.0).or_insert_with(|| HopSender::new(cfg).expect("validated in SatguardHook::new"))
    }

    /// The beam of a packet leaving on `link` at `now`, with its timeout set (§3.3).
    fn beam_for(&mut self, link: LinkId, now: Instant) -> u16 {
        let Some((ground, beam)) = self.net.user_downlink(link) else { return 0 };
        let timeout = if self.opts.beam_timers {
            match self.net.beam_timeout(ground, self.node, now) {
                Some(thd) => thd + self.opts.beam_guard,
                None => self.opts.hop.default_timeout,
            }
        } else {
            // One fixed timer for every user, sized for the farthest one the satellite can serve.
            self.net
                .topo
                .as_ref()
                .map_or(self.opts.hop.default_timeout, |t| t.max_gsl_delay + t.max_gsl_delay + self.opts.beam_guard)
        };
        self.sender(link).set_beam_timeout(beam, timeout);
        beam
    }

    /// Stamps a packet with the next HSeq of `link` and buffers it; `leaves` is when its last bit is
    /// sent (timers start there).
    fn stamp(&mut self, link: LinkId, p: &mut Packet, now: Instant, leaves: Instant) {
        let busy = self.egress_busy.entry(link.0).or_insert(leaves);
        *busy = (*busy).max(leaves);
        let beam = self.beam_for(link, now);
        let copy = *p;
        let h = self.sender(link).on_send(leaves, copy, p.size, beam);
        p.net.hseq = h.0;
        p.net.flags = (p.net.flags | NET_HSEQ) & !NET_RETX;
        self.stats.protected += 1;
    }

    /// Sends the due retransmissions of one sender; what it gave up on, the exit is told not to wait
    /// for (a void, as for a congestion drop).
    fn pump(
        s: &mut HopSender<Packet>,
        link: LinkId,
        egress: &mut Egress<'_>,
        opts: &SatguardOptions,
        stats: &mut SatguardStats,
        ctx: &mut Ctx,
    ) {
        let now = ctx.now();
        while let Some(r) = s.poll_retransmit_leaving(|bytes| egress.leaves(link, now, bytes)) {
            let mut p = r.item;
            p.net.hseq = r.hseq.0;
            p.net.flags |= NET_HSEQ | NET_RETX;
            stats.retransmissions += 1;
            ctx.send_on(link, p);
        }
        while let Some(p) = s.poll_lost() {
            stats.given_up += 1;
            if let Some(v) = void_for(&p, opts) {
                stats.voids_sent += 1;
                ctx.send(v);
            }
        }
    }

    fn arm(&mut self, ctx: &mut Ctx) {
        let mut want = self.senders.values().filter_map(HopSender::poll_timeout).min();
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                want = Some(want.map_or(t, |w| w.min(t)));
            }
        };
        if let (Exit::Reorder(r), None) = (&self.exit, self.exit_paused) {
            consider(r.poll_timeout());
        }
        consider(self.next_migration_start());
        consider(self.drain.map(|d| d.next));
        for inbox in self.inboxes.values() {
            consider(inbox.deadline);
        }
        self.timer.set(want, ctx);
    }

    /// Delivers a packet leaving the satellite network here (§3.4): the options header comes off,
    /// then the reorder buffer (or duplicate suppression) decides when it goes on.
    fn exit(&mut self, p: &mut Packet, ctx: &mut Ctx) -> bool {
        p.size = p.size.saturating_sub(self.hbh_bytes);
        p.net.flags &= !(NET_FSEQ | NET_MIGRATED);
        let now = ctx.now();
        match &mut self.exit {
            Exit::Reorder(r) => {
                // A late packet (its gap was given up on) still carries data the endpoint lacks: it
                // passes, out of order, rather than being thrown away after it was recovered.
                let late = match r.push(now, flow_key(p), Seq16(p.net.fseq), Some(*p)) {
                    Pushed::Duplicate => {
                        self.stats.exit_duplicates += 1;
                        false
                    }
                    Pushed::Late => {
                        self.stats.exit_late += 1;
                        true
                    }
                    Pushed::OutOfWindow => {
                        self.stats.exit_out_of_window += 1;
                        true
                    }
                    Pushed::Held => {
                        self.stats.exit_held += 1;
                        false
                    }
                    Pushed::InOrder | Pushed::Restarted => false,
                };
                self.release(ctx);
                late
            }
            Exit::Dedup { seen } => {
                if !seen.insert(key(p)) {
                    self.stats.exit_duplicates += 1;
                    return false;
                }
                true
            }
        }
    }

    /// A ground node (an exit of a constellation) whose satellite links are all down is in a handover
    /// interruption: what its reorder buffer waits for is parked or migrating upstream, so the holds
    /// stand still until a link comes back (SATGUARD is handover-aware end to end).
    fn pause_exit(&mut self, link: LinkId, up: bool, now: Instant) {
        let Exit::Reorder(r) = &mut self.exit else { return };
        if !self.net.is_ground(self.node) || self.net.to.get(link.0 as usize) != Some(&self.node) {
            return;
        }
        if !up && self.exit_paused.is_none() {
            let node = self.node;
            let any_up = self.net.to.iter().enumerate().any(|(l, &to)| {
                to == node && self.net.is_network(LinkId(l as u32)) && {
                    match self.link_state.get(&(l as u32)) {
                        Some(&u) => u,
                        None => self.net.initially_up.get(l).copied().unwrap_or(false),
                    }
                }
            });
            if !any_up {
                self.exit_paused = Some(now);
            }
        } else if up {
            if let Some(since) = self.exit_paused.take() {
                r.shift_deadlines(now.saturating_duration_since(since));
                self.stats.exit_pauses += 1;
            }
        }
    }

    /// A void arrived: at the exit its FSeq is released as nothing; elsewhere it travels on.
    fn on_void(&mut self, p: &Packet, ctx: &mut Ctx) -> bool {
        if !self.net.is_exit(ctx.node().0, p.dst) {
            return true;
        }
        if let Exit::Reorder(r) = &mut self.exit {
            self.stats.exit_voids += 1;
            r.push(ctx.now(), flow_key(p), Seq16(p.net.fseq), None);
            self.release(ctx);
            self.arm(ctx);
        }
        false
    }

    /// Hands on what the reorder buffer released.
    fn release(&mut self, ctx: &mut Ctx) {
        if let Exit::Reorder(r) = &mut self.exit {
            while let Some(x) = r.poll_release() {
                if let Some(p) = x.item {
                    ctx.resume(p);
                }
            }
        }
    }

    /// Holds a packet for a link that is down in a handover (bounded by the Tx buffer size); what
    /// overflows is lost here, so the exit is sent a void for it (as for a congestion drop).
    fn park(&mut self, p: Packet, ctx: &mut Ctx) {
        self.parked_bytes += u64::from(p.size);
        self.parked.push_back(p);
        self.stats.parked += 1;
        while self.parked_bytes > self.opts.hop.buffer_bytes {
            let Some(old) = self.parked.pop_front() else { break };
            self.parked_bytes -= u64::from(old.size);
            self.stats.parked_dropped += 1;
            if let Some(v) = void_for(&old, &self.opts) {
                self.stats.voids_sent += 1;
                ctx.send(v);
            }
        }
    }

    /// Sends parked packets and re-homed orphans on through routing (`link` at this node came up),
    /// paced at that link's rate: the orphans (older) first, then the parked packets in arrival order.
    fn unpark(&mut self, link: LinkId, ctx: &mut Ctx) {
        for mut p in self.orphans.drain(..).rev() {
            p.net.flags &= !(NET_HSEQ | NET_RETX);
            self.stats.rehomed += 1;
            self.parked_bytes += u64::from(p.size);
            self.parked.push_front(p);
        }
        if self.parked.is_empty() {
            return;
        }
        let i = link.0 as usize;
        let rate = self.net.rate.get(i).copied().unwrap_or(Bps(0));
        let queue = self.net.queue_bytes.get(i).copied().unwrap_or(0);
        self.drain = Some(Drain { rate, batch: (queue / 2).max(MTU_BYTES), next: ctx.now() });
        self.drain_step(ctx);
    }

    /// Hands the next batch of parked packets on if it is time.
    fn drain_step(&mut self, ctx: &mut Ctx) {
        let Some(d) = self.drain else { return };
        let now = ctx.now();
        if now < d.next {
            return;
        }
        let mut sent = 0u64;
        while sent < d.batch {
            let Some(mut p) = self.parked.pop_front() else { break };
            self.parked_bytes -= u64::from(p.size);
            sent += u64::from(p.size);
            p.net.flags |= NET_UNPARKED;
            self.stats.unparked += 1;
            ctx.resume(p);
        }
        self.drain = if self.parked.is_empty() {
            None
        } else {
            // Until the departures say otherwise: half the batch's serialisation time from now.
            let half = d.rate.transmission_time(Bytes(sent / 2)).unwrap_or(Duration::ZERO);
            Some(Drain { next: now + half, ..d })
        };
    }

    /// A released packet departs after `wait` (the real queue ahead of it plus itself): the next
    /// batch goes when the interface has sent half a batch less than that.
    fn drained_departs(&mut self, wait: Duration, now: Instant) {
        if let Some(d) = &mut self.drain {
            let half = d.rate.transmission_time(Bytes(d.batch / 2)).unwrap_or(Duration::ZERO);
            // The last released packet's last bit leaves at now + wait; half a batch before that.
            d.next = now + Duration(wait.0.saturating_sub(half.0));
        }
    }

    /// This node's counters, with those its hop senders and reorder buffer keep.
    pub fn totals(&self) -> SatguardStats {
        let mut t = self.stats;
        for s in self.senders.values() {
            t.gap_losses += s.stats.gap_losses;
            t.timer_losses += s.stats.timer_losses;
            t.evicted += s.stats.evicted;
            t.hacks_ignored += s.stats.hacks_out_of_window;
            t.max_buffer_bytes = t.max_buffer_bytes.max(s.stats.max_buffer_bytes);
        }
        if let Exit::Reorder(r) = &self.exit {
            let st = r.stats();
            t.exit_skipped = st.skipped;
            t.exit_recovered = st.recovered;
            t.exit_max_hold_ns = st.max_hold_observed.as_nanos();
        }
        t
    }

    /// One row per hop sender of this node.
    pub fn hop_rows(&self) -> Vec<HopRow> {
        self.senders
            .iter()
            .map(|(&l, s)| HopRow {
                from: self.node,
                to: self.net.to.get(l as usize).copied().unwrap_or(u32::MAX),
                user_link: self.net.user_downlink(LinkId(l)).is_some(),
                sender: s.stats,
            })
            .collect()
    }
}

impl Agent for SatguardHook {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        self.arm(ctx);
    }

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if !self.timer.due(token, ctx) {
            return;
        }
        self.stats.timer_runs += 1;
        let now = ctx.now();
        for (&l, s) in &mut self.senders {
            s.handle_timeout(now);
            let mut egress = Egress { busy: &mut self.egress_busy, rate: &self.net.rate };
            Self::pump(s, LinkId(l), &mut egress, &self.opts, &mut self.stats, ctx);
        }
        if let (Exit::Reorder(r), None) = (&mut self.exit, self.exit_paused) {
            r.handle_timeout(now);
        }
        self.release(ctx);
        self.start_migrations(ctx);
        self.inbox_deadlines(ctx);
        self.drain_step(ctx);
        self.arm(ctx);
    }

    fn on_arrive(&mut self, link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if p.net.flags & NET_SR != 0 {
            self.on_source_routed(p, ctx);
            self.arm(ctx);
            return false;
        }
        if p.net.flags & NET_VOID != 0 {
            return self.on_void(p, ctx);
        }
        if p.net.flags & NET_CONTROL != 0 {
            // A HAck for our sender on the data link it names.
            let data_link = LinkId(p.seq as u32);
            if let Some(s) = self.senders.get_mut(&data_link.0) {
                let hack =
                    HAck { start: Seq16(p.ack as u16), end: Seq16((p.ack >> 16) as u16), beam: (p.ack >> 32) as u16 };
                s.on_hack(ctx.now(), &hack);
                let mut egress = Egress { busy: &mut self.egress_busy, rate: &self.net.rate };
                Self::pump(s, data_link, &mut egress, &self.opts, &mut self.stats, ctx);
                self.arm(ctx);
            }
            return false;
        }
        if p.net.flags & NET_HSEQ != 0 {
            let window = self.opts.dedup_window;
            let net = &self.net;
            let r = self
                .receivers
                .entry(link.0)
                .or_insert_with(|| HopReceiver::new(net.user_downlink(link).map_or(0, |(_, b)| b), window));
            let got = r.on_receive(ctx.now(), Seq16(p.net.hseq), key(p), p.net.flags & NET_RETX != 0);
            p.net.flags &= !(NET_HSEQ | NET_RETX);
            if let Some(back) = self.net.reverse.get(link.0 as usize).copied().flatten() {
                let h = got.hack;
                ctx.send_on(
                    back,
                    Packet {
                        flow: p.flow,
                        seq: u64::from(link.0),
                        ack: u64::from(h.start.0) | (u64::from(h.end.0) << 16) | (u64::from(h.beam) << 32),
                        size: self.hack_bytes,
                        dst: u32::MAX,
                        sent_at: ctx.now(),
                        net: crate::packet::NetFields { flags: NET_CONTROL, ..Default::default() },
                        ..Default::default()
                    },
                );
                self.stats.hacks_sent += 1;
                self.stats.hack_bytes += u64::from(self.hack_bytes);
            }
            if got.duplicate {
                self.stats.duplicates += 1;
                return false;
            }
        }
        if p.net.flags & NET_FSEQ != 0 && self.net.is_exit(ctx.node().0, p.dst) {
            let keep = self.exit(p, ctx);
            self.arm(ctx);
            return keep;
        }
        true
    }

    fn on_depart(&mut self, link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if !self.net.is_network(link) || p.net.flags & NET_CONTROL != 0 {
            return true;
        }
        if !self.protected(p) {
            self.stats.unprotected += 1;
            return true;
        }
        if p.net.flags & NET_FSEQ == 0 {
            // Network entry: FSeq per (flow, destination), never changed inside (§3.4).
            let f = self.fseq.entry((p.flow, p.dst)).or_default();
            p.net.fseq = f.0;
            *f = f.next();
            p.net.flags |= NET_FSEQ;
            p.size += self.hbh_bytes;
            self.stats.fseq_stamped += 1;
        }
        let now = ctx.now();
        let unparked = p.net.flags & NET_UNPARKED != 0;
        p.net.flags &= !NET_UNPARKED;
        if self.opts.migration && !self.link_up(link) {
            // The link is down in a handover: send the packet after the satellite that took over, or
            // hold it until a link comes up (§3.2's network-layer buffer).
            if !self.redirect(link, p, ctx) {
                self.park(*p, ctx);
            }
            return false;
        }
        if unparked {
            self.drained_departs(ctx.egress_wait(), now);
        } else if self.drain.is_some() {
            // Parked packets are still going out: this one waits behind them (arrival order).
            self.park(*p, ctx);
            return false;
        }
        self.stamp(link, p, now, now + ctx.egress_wait());
        if self.outgoing.contains_key(&link.0) {
            self.copy_to_new_satellite(link, p, ctx);
        }
        // Per packet: re-arm only if this link's earliest deadline comes before the armed timer (a new
        // packet's deadline lies behind those of its beam; another beam's may be shorter).
        let due = self.senders.get(&link.0).and_then(HopSender::poll_timeout);
        if due.is_some_and(|d| self.timer.want().is_none_or(|w| d < w)) {
            self.arm(ctx);
        }
        true
    }

    fn on_congestion_drop(&mut self, _link: LinkId, p: &Packet, ctx: &mut Ctx) {
        // A packet that already has its FSeq dies in a queue here: LL-ReTx cannot bring it back, so
        // the exit is told not to wait for it (a void, like LEOTP's void packet header). Without this
        // every congestion drop would hold its flow at the exit for the whole reorder hold.
        if let Some(v) = void_for(p, &self.opts) {
            self.stats.voids_sent += 1;
            ctx.send(v);
        }
    }

    fn on_link_state(&mut self, link: LinkId, up: bool, ctx: &mut Ctx) {
        let ours = self.net.from.get(link.0 as usize) == Some(&self.node);
        self.link_state.insert(link.0, up);
        self.pause_exit(link, up, ctx.now());
        if !up && ours {
            // A link going down loses what its interface held.
            self.egress_busy.remove(&link.0);
            // Our own link went away: its pending packets are committed to the new satellite
            // (migration), re-homed (a ground node's uplink) or lost.
            if let Some(s) = self.senders.get_mut(&link.0) {
                let taken: Vec<Packet> = s.take_pending().into_iter().map(|(p, _)| p).collect();
                self.stats.taken_at_link_down += taken.len() as u64;
                if let Some(out) = self.outgoing.remove(&link.0) {
                    self.commit(out, &taken, ctx);
                } else if self.net.is_ground(self.node) || self.net.topo.is_none() {
                    self.orphans.extend(taken);
                } else {
                    self.stats.lost_at_link_down += taken.len() as u64;
                }
            }
        } else if up {
            // Moved packets are older than the ones parked here: they go first.
            self.inbox_link_up(link, ctx);
            self.unpark(link, ctx);
        }
        self.arm(ctx);
    }
}

mod handover;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_sizes_come_from_the_wire_format() {
        // docs/satguard.md and docs/wire.md: HSeq + FSeq options in 16 bytes, a HAck packet 56 bytes.
        assert_eq!(hbh_bytes(), 16);
        assert_eq!(hack_bytes(), 56);
    }
}
