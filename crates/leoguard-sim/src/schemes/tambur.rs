//! Tambur over fixed time slots for TCP flows and web connections (the SATGUARD paper's evaluation
//! applies its Tambur baseline to TCP traffic too, §4): hooks at the two end nodes of each protected
//! flow.
//!
//! * Sender's node ([`Agent::on_depart`]): each data packet of a protected flow that leaves the node
//!   becomes a data symbol of the current slot (slots of `slot` length, default 33.3 ms = one frame
//!   at 30 fps, counted from the flow's first packet). At each slot end the slot is one Tambur frame:
//!   its packets in departure order form `U` then `V`, and the redundancy policy's parity packets
//!   (50 % of the slot's packets while loss was reported within 2 s) go out, as long as the longest
//!   data packet they combine plus a 16-byte FEC header.
//! * Receiver's node ([`Agent::on_arrive`]): data symbols arrive, parity packets are taken out of the
//!   network and fed to the decoder with the layouts their header lists; a recovered packet is
//!   handed on to the TCP receiver at recovery time ([`Ctx::resume`]). A gap in the data symbols is
//!   reported back in a 40-byte feedback packet (at most one per slot), which drives the policy.
//!
//! Packets carry no payload: the copy of a data packet the receiver delivers on recovery, and the
//! layouts a parity header lists, come from a table shared by the two hooks, keyed by (flow, TCP
//! sequence number, send time) and by symbol and parity numbers. Parity and feedback packets travel
//! as flows `PARITY_FLOW_BASE + i` / `FEEDBACK_FLOW_BASE + i` for protected flow `i`, so they are not
//! counted as the TCP flow's packets or losses.

use crate::engine::{LinkId, NetFields, NodeId, Packet};
use crate::sim::{Agent, Ctx};
use crate::tcp_agent::FLAG_DATA;
use leoguard_core::{Duration, Instant};
use leoguard_proto::tambur::{Decoder, FrameLayout, RedundancyPolicy, StreamLayout, TamburConfig};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Flow id of protected flow i's parity packets: `PARITY_FLOW_BASE + i`.
pub const PARITY_FLOW_BASE: u32 = 0x4000_0000;
/// Flow id of protected flow i's loss feedback: `FEEDBACK_FLOW_BASE + i`.
pub const FEEDBACK_FLOW_BASE: u32 = 0x5000_0000;
/// Tambur FEC header on parity packets, bytes.
pub const FEC_HEADER: u32 = 16;
/// IPv4 + UDP + a 12-byte report: the feedback packet.
pub const FEEDBACK_BYTES: u32 = 40;

/// The scenario's `[tambur]` section.
#[derive(Clone, Debug, PartialEq)]
pub struct TamburOptions {
    /// Code and policy parameters.
    pub code: TamburConfig,
    /// Slot length (one "frame").
    pub slot: Duration,
    /// Protected flows (indices); None: every TCP flow.
    pub flows: Option<Vec<u32>>,
}

impl Default for TamburOptions {
    fn default() -> Self {
        TamburOptions { code: TamburConfig::default(), slot: Duration::from_nanos(33_333_333), flows: None }
    }
}

use leoguard_net::counters;

counters! {
    /// Counters of the Tambur slot hooks, summed over nodes.
    pub struct TamburStats {
        /// Data packets coded.
        data_packets,
        /// Slots closed (frames coded).
        slots,
        /// Parity packets sent.
        parity_packets,
        /// Parity bytes sent.
        parity_bytes,
        /// Data packets recovered at a receiver.
        recovered,
        /// Data symbols found missing (gaps) at a receiver.
        missing_seen,
        /// Feedback packets sent.
        feedback,
        ;
    }
}

#[derive(Debug, Default)]
struct FlowTable {
    ids: BTreeMap<(u64, u64), u64>,
    packets: BTreeMap<u64, Packet>,
    layouts: BTreeMap<u64, FrameLayout>,
    parity: BTreeMap<u64, u64>,
}

/// What the hooks share (see the module doc).
#[derive(Debug, Default)]
pub struct SlotTable {
    flows: BTreeMap<u32, FlowTable>,
}

/// The shared table.
pub type SharedSlots = Arc<Mutex<SlotTable>>;

fn lock(t: &SharedSlots) -> std::sync::MutexGuard<'_, SlotTable> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug)]
struct TxFlow {
    flow: u32,
    index: u32,
    dst: u32,
    origin: Option<Instant>,
    slot: u64,
    layout: StreamLayout,
    policy: RedundancyPolicy,
    next_id: u64,
    in_slot: Vec<u32>,
    /// Idle: its slots stopped being closed one timer at a time (see [`TamburHook::close_slot`]).
    dormant: bool,
}

#[derive(Debug)]
struct RxFlow {
    flow: u32,
    index: u32,
    src: u32,
    decoder: Decoder,
    expected: u64,
    newest: u64,
    last_feedback: Option<Instant>,
    /// A decode is scheduled (`SOLVE_BATCH` after the arrival that asked for it).
    solve_pending: bool,
}

/// Arrivals are decoded in batches at most this long: solving after every packet of a fast TCP flow
/// (thousands per slot) costs a dense solve each; a decoder on a real host batches the same way.
const SOLVE_BATCH: Duration = Duration::from_millis(1);
/// Timer tokens of decodes: this bit plus the receiver's index.
const SOLVE_TOKEN: u64 = 1 << 62;

/// One protected flow's ends: (flow id, index among protected flows, sender node, receiver node).
pub type Protected = (u32, u32, u32, u32);

/// The Tambur hook of one node: sender side of the protected flows leaving it, receiver side of
/// those arriving.
#[derive(Debug)]
pub struct TamburHook {
    opts: TamburOptions,
    node: u32,
    table: SharedSlots,
    tx: Vec<TxFlow>,
    rx: Vec<RxFlow>,
    /// `tx` and `rx` by flow id and by protected-flow index (a web server's node has thousands).
    tx_of_flow: Vec<u32>,
    rx_of_flow: Vec<u32>,
    tx_of_index: Vec<u32>,
    rx_of_index: Vec<u32>,
    /// Counters (the slots of dormant flows are added by [`TamburHook::totals`]).
    pub stats: TamburStats,
}

#[cfg(test)]
thread_local! {
    /// Tests only: whether flows may fall dormant on this thread, and how many wakes there were.
    static DORMANCY: std::cell::Cell<(bool, u64)> = const { std::cell::Cell::new((true, 0)) };
}

#[cfg(test)]
fn may_sleep() -> bool {
    DORMANCY.get().0
}

#[cfg(not(test))]
fn may_sleep() -> bool {
    true
}

/// When slot `k` of a flow whose first packet left at `origin` ends.
fn slot_end(origin: Instant, slot: Duration, k: u64) -> Instant {
    origin + Duration::from_nanos(slot.as_nanos() * (k + 1))
}

/// Entry `key` of an index built by [`index_by`], if any.
fn lookup(index: &[u32], key: u32) -> Option<usize> {
    index.get(key as usize).filter(|&&i| i != u32::MAX).map(|&i| i as usize)
}

/// Position of the first item with each key.
fn index_by<T>(items: &[T], key: impl Fn(&T) -> u32) -> Vec<u32> {
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        let k = key(it) as usize;
        if out.len() <= k {
            out.resize(k + 1, u32::MAX);
        }
        if out[k] == u32::MAX {
            out[k] = i as u32;
        }
    }
    out
}

impl TamburHook {
    /// The hook of `node` for the protected flows `flows`.
    pub fn new(opts: TamburOptions, node: u32, flows: &[Protected], table: SharedSlots) -> Self {
        let tx: Vec<TxFlow> = (flows.iter().filter(|f| f.2 == node))
            .map(|&(flow, index, _, dst)| TxFlow {
                flow,
                index,
                dst,
                origin: None,
                slot: 0,
                layout: StreamLayout::new(opts.code),
                policy: RedundancyPolicy::new(opts.code),
                next_id: 0,
                in_slot: Vec::new(),
                dormant: false,
            })
            .collect();
        let rx: Vec<RxFlow> = (flows.iter().filter(|f| f.3 == node))
            .map(|&(flow, index, src, _)| RxFlow {
                flow,
                index,
                src,
                decoder: Decoder::new(opts.code.tau, None),
                expected: 0,
                newest: 0,
                last_feedback: None,
                solve_pending: false,
            })
            .collect();
        let tx_of_flow = index_by(&tx, |t| t.flow);
        let rx_of_flow = index_by(&rx, |r| r.flow);
        let tx_of_index = index_by(&tx, |t| t.index);
        let rx_of_index = index_by(&rx, |r| r.index);
        TamburHook {
            opts,
            node,
            table,
            tx,
            rx,
            tx_of_flow,
            rx_of_flow,
            tx_of_index,
            rx_of_index,
            stats: TamburStats::default(),
        }
    }

    /// The counters, with the slots the dormant flows have let pass by `now` (the time the run has
    /// reached) counted as closed, as their timers would have closed them.
    pub fn totals(&self, now: Instant) -> TamburStats {
        let mut s = self.stats;
        for t in self.tx.iter().filter(|t| t.dormant) {
            s.slots += self.slot_ends(t, now) - t.slot;
        }
        s
    }

    /// How many of flow `t`'s slots end at or before `now`.
    fn slot_ends(&self, t: &TxFlow, now: Instant) -> u64 {
        t.origin.map_or(0, |o| now.saturating_duration_since(o).as_nanos() / self.opts.slot.as_nanos())
    }

    /// Closes slot `t.slot` of sender flow `i`: lays it out and sends its parity.
    ///
    /// A flow falls dormant when a slot closes empty and nothing it sent is left in the window (every
    /// layout kept is empty, so no packet or parity of it can be looked up any more): its next empty
    /// slots change nothing but the frame numbers, so no timer closes them one by one (an idle web
    /// connection would tick 30 times a second to the end of the run). Its next departure closes
    /// them at once ([`TamburHook::wake`]) and the timers resume.
    fn close_slot(&mut self, i: usize, ctx: &mut Ctx) {
        let now = ctx.now();
        let t = &mut self.tx[i];
        let n = t.in_slot.len() as u32;
        let l = t.layout.next_layout(n, t.policy.parity_count(now, n));
        debug_assert_eq!(l.first + u64::from(n), t.next_id);
        let mut tab = lock(&self.table);
        let ft = tab.flows.entry(t.flow).or_default();
        let longest = if l.n_parity > 0 {
            let cov = t.layout.covered(l.frame);
            cov.iter().filter_map(|d| ft.packets.get(d)).map(|p| p.size).max().unwrap_or(0)
        } else {
            0
        };
        keep_window(ft, l, self.opts.code.tau);
        let quiet = n == 0
            && may_sleep()
            && ft.packets.is_empty()
            && ft.parity.is_empty()
            && ft.layouts.values().all(|x| x.n == 0);
        drop(tab);
        for k in 0..u64::from(l.n_parity) {
            let p = Packet {
                flow: PARITY_FLOW_BASE + t.index,
                seq: l.parity_first + k,
                size: longest + FEC_HEADER,
                dst: t.dst,
                sent_at: now,
                net: NetFields::default(),
                ..Default::default()
            };
            self.stats.parity_packets += 1;
            self.stats.parity_bytes += u64::from(p.size);
            ctx.send(p);
        }
        self.stats.slots += 1;
        t.in_slot.clear();
        t.slot += 1;
        if quiet {
            t.dormant = true;
        } else if let Some(o) = t.origin {
            ctx.timer(slot_end(o, self.opts.slot, t.slot), i as u64);
        }
    }

    /// A dormant flow sends again at `now`: the empty slots that ended meanwhile (at `now` too: as if
    /// their timer had fired first) are closed at once, leaving the layouts and the table as one
    /// close per slot would, and the slot timer runs again.
    fn wake(&mut self, i: usize, now: Instant, ctx: &mut Ctx) {
        let ends = self.slot_ends(&self.tx[i], now);
        #[cfg(test)]
        DORMANCY.set((DORMANCY.get().0, DORMANCY.get().1 + 1));
        let t = &mut self.tx[i];
        t.dormant = false;
        let m = ends - t.slot;
        // Only the last 2·tau + 2 of them can leave a layout in the table.
        let tail = m.min(2 * u64::from(self.opts.code.tau) + 2);
        t.layout.skip_empty(m - tail);
        let mut tab = lock(&self.table);
        let ft = tab.flows.entry(t.flow).or_default();
        for _ in 0..tail {
            let l = t.layout.next_layout(0, 0);
            keep_window(ft, l, self.opts.code.tau);
        }
        drop(tab);
        self.stats.slots += m;
        t.slot += m;
        if let Some(o) = t.origin {
            ctx.timer(slot_end(o, self.opts.slot, t.slot), i as u64);
        }
    }

    fn on_data_arrive(&mut self, i: usize, p: &Packet, ctx: &mut Ctx) {
        let r = &mut self.rx[i];
        let (id, layout) = {
            let tab = lock(&self.table);
            let Some(ft) = tab.flows.get(&r.flow) else { return };
            let Some(&id) = ft.ids.get(&(p.seq, p.sent_at.as_nanos())) else { return };
            // The slot's layout is known once the slot closed (a data packet's FEC header names its
            // frame; the frame's size comes with the parity or the next slot's packets).
            (id, ft.layouts.values().find(|l| l.data().contains(&id)).copied())
        };
        if let Some(l) = layout {
            r.decoder.add_layout(l);
            r.newest = r.newest.max(l.frame);
        }
        r.decoder.add_data(id, None);
        if id > r.expected {
            let missing = id - r.expected;
            self.stats.missing_seen += missing;
            let now = ctx.now();
            if r.last_feedback.is_none_or(|t| now.saturating_duration_since(t) >= self.opts.slot) {
                r.last_feedback = Some(now);
                self.stats.feedback += 1;
                ctx.send(Packet {
                    flow: FEEDBACK_FLOW_BASE + r.index,
                    seq: missing,
                    size: FEEDBACK_BYTES,
                    dst: r.src,
                    sent_at: now,
                    ..Default::default()
                });
            }
        }
        r.expected = r.expected.max(id + 1);
        self.schedule_solve(i, ctx);
    }

    fn on_parity_arrive(&mut self, i: usize, p: &Packet, ctx: &mut Ctx) {
        let r = &mut self.rx[i];
        {
            let tab = lock(&self.table);
            let Some(ft) = tab.flows.get(&r.flow) else { return };
            let Some((_, &f)) = ft.parity.range(..=p.seq).next_back() else { return };
            // The FEC header lists the layouts of the frames the parity covers.
            for (_, l) in ft.layouts.range(f.saturating_sub(u64::from(self.opts.code.tau))..=f) {
                r.decoder.add_layout(*l);
            }
            r.decoder.add_parity(f, p.seq, None);
            r.newest = r.newest.max(f);
        }
        self.schedule_solve(i, ctx);
    }

    fn schedule_solve(&mut self, i: usize, ctx: &mut Ctx) {
        let r = &mut self.rx[i];
        if !r.solve_pending {
            r.solve_pending = true;
            ctx.timer(ctx.now() + SOLVE_BATCH, SOLVE_TOKEN | i as u64);
        }
    }

    fn solve(&mut self, i: usize, ctx: &mut Ctx) {
        let r = &mut self.rx[i];
        r.solve_pending = false;
        let rec = r.decoder.solve();
        r.decoder.expire(r.newest);
        if rec.is_empty() {
            return;
        }
        let tab = lock(&self.table);
        let Some(ft) = tab.flows.get(&r.flow) else { return };
        for id in rec {
            if let Some(p) = ft.packets.get(&id) {
                self.stats.recovered += 1;
                ctx.resume(*p);
            }
        }
    }
}

/// Enters frame `l` in a flow's table and forgets what a window of `2·tau + 1` frames no longer
/// needs: older layouts, their packets (and ids) and their parity.
fn keep_window(ft: &mut FlowTable, l: FrameLayout, tau: u32) {
    ft.layouts.insert(l.frame, l);
    if l.n_parity > 0 {
        ft.parity.insert(l.parity_first, l.frame);
    }
    let keep = l.frame.saturating_sub(2 * u64::from(tau) + 1);
    while ft.layouts.first_key_value().is_some_and(|(&f, _)| f < keep) {
        ft.layouts.pop_first();
    }
    if let Some(&FrameLayout { first, parity_first, .. }) = ft.layouts.values().next() {
        while let Some(e) = ft.packets.first_entry() {
            if *e.key() >= first {
                break;
            }
            let p = e.remove();
            ft.ids.remove(&(p.seq, p.sent_at.as_nanos()));
        }
        while ft.parity.first_key_value().is_some_and(|(&k, _)| k < parity_first) {
            ft.parity.pop_first();
        }
    }
}

impl Agent for TamburHook {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if token & SOLVE_TOKEN != 0 {
            let i = (token & !SOLVE_TOKEN) as usize;
            if i < self.rx.len() {
                self.solve(i, ctx);
            }
            return;
        }
        let i = token as usize;
        if i < self.tx.len() {
            self.close_slot(i, ctx);
        }
    }

    fn on_depart(&mut self, _link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if p.flags & FLAG_DATA == 0 {
            return true;
        }
        let Some(i) = lookup(&self.tx_of_flow, p.flow).filter(|&i| self.tx[i].dst == p.dst) else { return true };
        let now = ctx.now();
        let slot = self.opts.slot;
        if self.tx[i].origin.is_none() {
            self.tx[i].origin = Some(now);
            ctx.timer(now + slot, i as u64);
        } else if self.tx[i].dormant {
            self.wake(i, now, ctx);
        }
        let t = &mut self.tx[i];
        let id = t.next_id;
        t.next_id += 1;
        t.in_slot.push(p.size);
        self.stats.data_packets += 1;
        let mut tab = lock(&self.table);
        let ft = tab.flows.entry(t.flow).or_default();
        ft.ids.insert((p.seq, p.sent_at.as_nanos()), id);
        ft.packets.insert(id, *p);
        true
    }

    fn on_arrive(&mut self, _link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        if p.dst != self.node {
            return true;
        }
        if p.flow >= FEEDBACK_FLOW_BASE {
            let idx = p.flow - FEEDBACK_FLOW_BASE;
            if let Some(i) = lookup(&self.tx_of_index, idx) {
                self.tx[i].policy.on_feedback(ctx.now(), p.seq > 0);
            }
            return false;
        }
        if p.flow >= PARITY_FLOW_BASE {
            let idx = p.flow - PARITY_FLOW_BASE;
            if let Some(i) = lookup(&self.rx_of_index, idx) {
                let q = *p;
                self.on_parity_arrive(i, &q, ctx);
            }
            return false;
        }
        if p.flags & FLAG_DATA != 0 {
            if let Some(i) = lookup(&self.rx_of_flow, p.flow) {
                let q = *p;
                self.on_data_arrive(i, &q, ctx);
            }
        }
        true
    }
}

/// The protected flows of a scenario: (flow id, index, src, dst) of every TCP flow and of every
/// connection of every web flow (or of those listed). A web connection is protected in its
/// server-to-browser direction, which carries the responses (its flow id comes from `owner`, the
/// scenario flow of each flow id); its requests are a few hundred bytes each.
pub fn protected(s: &crate::scenario::Scenario, opts: &TamburOptions, owner: &[u32]) -> Vec<Protected> {
    use crate::scenario::FlowKind;
    let wanted = |i: usize| opts.flows.as_ref().is_none_or(|l| l.contains(&(i as u32)));
    let mut out: Vec<(u32, u32, u32)> = (s.flows.iter().enumerate())
        .filter(|(i, f)| matches!(f.kind, FlowKind::Tcp { .. }) && wanted(*i))
        .map(|(i, f)| (i as u32, f.src, f.dst))
        .collect();
    for (id, &o) in owner.iter().enumerate().skip(s.flows.len()) {
        if let Some(f) = s.flows.get(o as usize).filter(|f| matches!(f.kind, FlowKind::Web { .. })) {
            if wanted(o as usize) {
                out.push((id as u32, f.dst, f.src));
            }
        }
    }
    out.into_iter().enumerate().map(|(k, (id, src, dst))| (id, k as u32, src, dst)).collect()
}

/// Attaches the hooks at the end nodes of the protected flows (after the flows are hosted: `owner`
/// maps every flow id, web connections included, to its scenario flow).
pub fn attach(
    s: &crate::scenario::Scenario,
    opts: &TamburOptions,
    owner: &[u32],
    sim: &mut crate::sim::Sim,
) -> Vec<crate::sim::AgentId> {
    let flows = protected(s, opts, owner);
    let table = SharedSlots::default();
    let mut nodes: Vec<u32> = flows.iter().flat_map(|f| [f.2, f.3]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    (nodes.into_iter())
        .map(|n| sim.attach_hook(NodeId(n), Box::new(TamburHook::new(opts.clone(), n, &flows, Arc::clone(&table)))))
        .collect()
}

/// Checks the `[tambur]` section against the scenario; errors name the field.
pub fn validate(s: &crate::scenario::Scenario, o: &TamburOptions) -> Result<(), crate::scenario::ScenarioError> {
    use crate::scenario::ScenarioError;
    let bad = |field: &str, value: String, reason: &str| {
        Err(ScenarioError::Invalid { field: format!("tambur.{field}"), value, reason: reason.into() })
    };
    if s.satguard.is_some() || s.linkguardian.is_some() {
        let other = if s.satguard.is_some() { "satguard" } else { "linkguardian" };
        return bad("", "on".into(), &format!("runs instead of {other}, not with it (one scheme at a time)"));
    }
    if let Err(leoguard_proto::tambur::TamburError::Invalid { field, value, reason }) = o.code.validate() {
        return bad(field, value, reason);
    }
    if o.slot < Duration::from_millis(1) || o.slot > Duration::from_secs(1) {
        return bad("slot_ms", o.slot.as_millis_f64().to_string(), "must be in [1, 1000] ms");
    }
    if let Some(l) = &o.flows {
        for (k, &f) in l.iter().enumerate() {
            match s.flows.get(f as usize) {
                Some(spec)
                    if matches!(
                        spec.kind,
                        crate::scenario::FlowKind::Tcp { .. } | crate::scenario::FlowKind::Web { .. }
                    ) => {}
                _ => return bad(&format!("flows[{k}]"), f.to_string(), "is not the index of a TCP or web flow"),
            }
        }
    }
    if s.flows.len() >= PARITY_FLOW_BASE as usize {
        return bad("", s.flows.len().to_string(), "too many flows for the parity flow numbering");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
