//! The data plane: one thread, pinned to one core, owns every node and link of the scenario. Real
//! hosts are network namespaces, each with a TUN device this thread opened inside it; their packets
//! are read from the TUN, forwarded hop by hop through leoguard-net's link model (serialising queue,
//! FIFO delay line, loss, up/down) at the times the model gives, and written to the destination
//! host's TUN. Events sit in one (time, sequence) heap; the thread sleeps on a timerfd (timer slack
//! lowered) until shortly before the next one and spins the rest of the way, reading the TUNs as it
//! goes. Every drop is counted by cause; every delivery's lateness against its model time is recorded
//! (the emulator's own timing error).

use crate::hist::Histogram;
use crate::net::{EmuNet, MAX_RAMP};
use crate::packet::{self, AddrKey};
use crate::tunio::{HostTun, TunStats};
use leoguard_core::{Duration, Instant};
use leoguard_net::link::{DropReason, Offer};
use leoguard_net::packet::Packet;
use leoguard_net::schemes::wire::WireScheme;
use leoguard_net::topo::Control;
use leoguard_net::LinkId;
use leoguard_os::{Epoll, NetnsGuard, TimerFd};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

/// Reads from one TUN before due events are handled again (a long batch delays them).
pub(crate) const READ_BATCH: usize = 8;

/// Longest a TCP or UDP segment with data waits for more of its flow to coalesce with, ns: a host's
/// queued deliveries are written when the oldest has waited this long, when its host has
/// `tunio::MAX_PENDING` waiting, or at the end of the pass that queued a packet not worth holding (one
/// GRO would not merge, or one with nothing arriving behind it on its last link within the hold).
pub(crate) const WRITE_HOLD_NS: u64 = 20_000;

/// Bytes per buffer slot: an MTU of up to 2000 bytes plus room for options a scheme adds.
pub const SLOT: usize = 2048;

pub use crate::config::{CaptureCfg, EmuConfig, FlowCfg, HostCfg};

/// Why the data plane dropped a packet (every drop has one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// A link's queue was full.
    Queue,
    /// A link's loss model.
    Loss,
    /// A link was down (handover interruption) or went down with the packet on it.
    Down,
    /// A node had no route to the destination (an outage).
    NoRoute,
    /// The destination address is no host of the scenario.
    UnknownDst,
    /// Multicast (IPv6 neighbour discovery, MLD): the emulated links are point-to-point.
    Multicast,
    /// Not a well-formed IPv4/IPv6 packet.
    Malformed,
    /// Larger than a buffer slot.
    TooBig,
    /// Every buffer slot was in use.
    PoolExhausted,
    /// Writing to the destination's TUN failed.
    TunWrite,
    /// A per-hop scheme retransmitted a packet whose bytes were no longer kept (`retain_ms`).
    RetxEvicted,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    TxDone(u32),
    Arrive {
        link: u32,
        slot: u32,
        epoch: u32,
    },
    Controls(u32),
    /// A per-hop scheme's timer on a node.
    Timer {
        node: u32,
        token: u64,
    },
    /// A LEOTP mid node's timer.
    LeotpTimer(u32),
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Meta {
    pub(crate) len: u32,
    /// Model time it entered the network.
    pub(crate) t_in: u64,
    pub(crate) dst_node: u32,
    /// Order of entry within its flow and direction (reordering check at delivery).
    pub(crate) entry: u64,
    /// Flow index + 1 for the data direction, + 1 + 2^31 for the reverse; 0 none.
    pub(crate) flow: u32,
}

pub(crate) const REVERSE: u32 = 1 << 31;

/// Per-flow counters (the data direction and its reverse).
#[derive(Clone, Debug, Default)]
pub struct FlowStats {
    /// Data-direction packets that entered the emulated network.
    pub sent: u64,
    /// Data-direction packets delivered to the receiver.
    pub delivered: u64,
    /// Data-direction bytes delivered.
    pub delivered_bytes: u64,
    /// Reverse-direction packets (ACKs, replies) that entered.
    pub rev_sent: u64,
    /// Reverse-direction packets delivered.
    pub rev_delivered: u64,
    /// One-way delay of delivered data packets, ns (TUN read to TUN write).
    pub owd: Histogram,
    /// Data packets delivered after a packet of the flow that entered later (the network reordered).
    pub reordered: u64,
    /// Highest entry order delivered so far (data, reverse).
    pub(crate) last_delivered: [Option<u64>; 2],
    /// One-way delay of delivered reverse packets, ns.
    pub rev_owd: Histogram,
}

/// What a run measured.
#[derive(Debug, Default)]
pub struct Report {
    /// Model time run, ns.
    pub elapsed_ns: u64,
    /// Packets read from hosts.
    pub entered: u64,
    /// Packets written to hosts.
    pub delivered: u64,
    /// Bytes written to hosts.
    pub delivered_bytes: u64,
    /// Drops by cause.
    pub drops: BTreeMap<Cause, u64>,
    /// Packets still inside the network at the end.
    pub in_flight: u64,
    /// Per flow (by config order).
    pub flows: Vec<FlowStats>,
    /// Lateness of each delivery against its model time, ns.
    pub timing: Histogram,
    /// Lateness of every event handled, ns.
    pub event_lateness: Histogram,
    /// Deliveries later than `late_us`.
    pub late: u64,
    /// Packet-hops (link arrivals).
    pub packet_hops: u64,
    /// CPU seconds the data plane used (it spins, so about the run's length).
    pub cpu_s: f64,
    /// Time spent handling events and reading packets (not waiting or spinning), ns: what the
    /// traffic cost the data plane.
    pub busy_ns: u64,
    /// A topology driver's error, if it stopped early.
    pub driver_error: Option<String>,
    /// Whether the data plane got its nice value.
    pub priority_set: bool,
    /// Per link: (from, to, counters, loss model name, the model's lossy seconds of the run).
    #[allow(clippy::type_complexity)]
    pub links: Vec<(u32, u32, leoguard_net::LinkStats, &'static str, Option<Vec<(u64, f64)>>)>,
    /// What the per-hop scheme host did.
    pub scheme_host: crate::schemes::HostStats,
    /// The capture: (packets written, packets past `max_packets`).
    pub capture: Option<(u64, u64)>,
    /// The per-hop scheme's own counters summed over nodes (SATGUARD's or LinkGuardian's), by name.
    pub scheme_counters: Vec<(&'static str, u64)>,
    /// What the LEOTP mid nodes did to packets.
    pub leotp_host: crate::leotp::LeotpHostStats,
    /// Hosts whose TUN device has segmentation offloads (super-packets read, coalesced writes).
    pub offload_hosts: u64,
    /// Hosts whose device also segments UDP (USO).
    pub uso_hosts: u64,
    /// Why a device asked for offloads has none (the kernel's refusal), if one does not.
    pub offload_note: Option<String>,
    /// Reads and writes on the hosts' devices, summed.
    pub tun: TunStats,
    /// How long each coalesced batch of writes to one host took, ns.
    pub flush_time: Histogram,
    /// Each CPU's busy share over the run (/proc/stat), the data plane's own CPU included.
    pub cpu_busy_share: Vec<f64>,
    /// The LEOTP mid nodes' own counters summed over nodes (`nodes` = 0: none ran).
    pub leotp: leoguard_net::schemes::leotp::LeotpMidTotals,
}

impl Report {
    /// Packets neither delivered, nor dropped with a cause, nor taken by a per-hop scheme, nor still in
    /// flight (counting those the schemes created): must be zero.
    pub fn unexplained(&self) -> i64 {
        let (s, l) = (&self.scheme_host, &self.leotp_host);
        (self.entered + s.generated + l.generated) as i64
            - self.delivered as i64
            - self.drops.values().sum::<u64>() as i64
            - (s.absorbed + l.intercepted) as i64
            - self.in_flight as i64
    }
}

/// Errors opening the data plane.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// A configuration field is invalid.
    #[error("invalid emulator {field} = {value}: {reason}")]
    Invalid {
        /// Field.
        field: String,
        /// Value.
        value: String,
        /// Rule.
        reason: String,
    },
    /// An OS call failed.
    #[error("{what}: {source}")]
    Os {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

fn os(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> EmuError {
    let what = what.into();
    move |source| EmuError::Os { what, source }
}

pub(crate) struct Host {
    pub(crate) node: u32,
    name: String,
    pub(crate) tun: HostTun,
    /// Deliveries queued on `tun` and not yet written: (model time due, the packet's meta).
    pub(crate) pending: Vec<(u64, Meta)>,
    /// When the first of `pending` was queued (model ns).
    pub(crate) hold_since: u64,
    /// A packet GRO would not merge (an ACK, ICMP) is queued: write at the end of this pass.
    pub(crate) urgent: bool,
}

/// The hosts' TUN devices after a run: they exist while this lives.
pub struct Devices(#[allow(dead_code)] Vec<Host>);

/// The data plane, opened and ready to run.
pub struct DataPlane {
    pub(crate) net: EmuNet,
    pub(crate) hosts: Vec<Host>,
    /// host index by node.
    pub(crate) host_of: Vec<Option<usize>>,
    pub(crate) addr_node: HashMap<AddrKey, u32>,
    pub(crate) flows: Vec<FlowCfg>,
    pub(crate) cfg: EmuConfig,
    pub(crate) bufs: Vec<u8>,
    pub(crate) meta: Vec<Meta>,
    /// Per slot: the packet as the per-hop schemes see it (its scheme fields come from the bytes).
    pub(crate) pkts: Vec<Packet>,
    pub(crate) free: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u64, EvKey)>>,
    evs: Vec<Ev>,
    free_ev: Vec<u32>,
    seq: u64,
    batches: Vec<Option<Vec<Control>>>,
    /// Per link: Delay controls known for the future (time, delay), for ramps between steps.
    future_delays: Vec<VecDeque<(u64, Duration)>>,
    lost: Vec<u32>,
    pub(crate) report: Report,
    /// CLOCK_MONOTONIC at model time 0.
    t0: u64,
    /// The per-hop scheme's state: hooks by node, masters of retransmittable packets.
    pub(crate) schemes: crate::schemes::SchemeHost,
    /// The LEOTP mid nodes, by node.
    pub(crate) leotp: crate::leotp::LeotpHost,
    /// Ids of flows the configuration does not name (ping, neighbour chatter), by 5-tuple.
    pub(crate) extra_flows: HashMap<(u32, u32, u8, u16, u16), u32>,
    /// The capture tap, if any.
    pub(crate) tap: Option<crate::capture::Tap>,
    /// When the next host's queued deliveries are due to be written (model ns; MAX: none queued).
    pub(crate) next_flush: u64,
    /// While an arrival is handled: when the next packet on the same link arrives (model ns; MAX: none).
    pub(crate) next_arrival: u64,
}

/// Index of an event in `evs` (the heap orders (time, seq, key); the key is only a tie-free handle).
type EvKey = u32;

impl DataPlane {
    /// Opens a TUN device in every host's namespace and prepares the network; `hooks` are the per-hop
    /// scheme's hooks by node (leoguard-net's `build_hooks`), whose fields travel in `scheme`'s
    /// Hop-by-Hop options; `leotp` the LEOTP mid nodes (a node runs a hook or a mid node, not both).
    pub fn open(
        net: EmuNet,
        cfg: EmuConfig,
        hooks: leoguard_net::schemes::NodeHooks,
        scheme: WireScheme,
        leotp: crate::leotp::LeotpHost,
    ) -> Result<DataPlane, EmuError> {
        let bad = |field: &str, value: String, reason: &str| EmuError::Invalid {
            field: field.into(),
            value,
            reason: reason.into(),
        };
        if cfg.pool_packets == 0 || cfg.pool_packets > 1 << 22 {
            return Err(bad("pool_packets", cfg.pool_packets.to_string(), "must be in [1, 4194304]"));
        }
        let nodes = net.nodes;
        if let Some(&(n, _)) = hooks.iter().find(|(n, _)| leotp.runs_at(*n)) {
            return Err(bad("leotp", format!("node {n}"), "runs a per-hop scheme's hook and a LEOTP mid node"));
        }
        let mut host_of = vec![None; net.nodes];
        let mut addr_node = HashMap::new();
        let mut hosts = Vec::new();
        let mut offload_note = None;
        for (i, h) in cfg.hosts.iter().enumerate() {
            if h.node as usize >= net.nodes || host_of[h.node as usize].is_some() {
                return Err(bad(&format!("hosts[{i}].node"), h.node.to_string(), "must be a distinct scenario node"));
            }
            for a in &h.addrs {
                let key = match a.parse::<std::net::IpAddr>() {
                    Ok(std::net::IpAddr::V6(v)) => u128::from(v),
                    Ok(std::net::IpAddr::V4(v)) => packet::v4_key(v.octets()),
                    Err(_) => return Err(bad(&format!("hosts[{i}].addrs"), a.clone(), "is not an IP address")),
                };
                addr_node.insert(key, h.node);
            }
            let (tun, why_not) = {
                let _in = NetnsGuard::enter(std::path::Path::new(&h.netns)).map_err(os(format!("hosts[{i}].netns")))?;
                HostTun::open(&h.tun, cfg.offload).map_err(os(format!("hosts[{i}]: TUN {} in {}", h.tun, h.netns)))?
            };
            if why_not.is_some() {
                offload_note = why_not;
            }
            host_of[h.node as usize] = Some(hosts.len());
            hosts.push(Host {
                node: h.node,
                name: h.tun.clone(),
                tun,
                pending: Vec::new(),
                hold_since: 0,
                urgent: false,
            });
        }
        let n_links = net.links.len();
        let pool = cfg.pool_packets;
        let mut bufs = vec![0u8; pool * SLOT];
        // Touch every page now, so the first packets do not pay page faults in the timed loop.
        for b in bufs.iter_mut().step_by(4096) {
            *b = 1;
        }
        let mut dp = DataPlane {
            net,
            hosts,
            host_of,
            addr_node,
            flows: cfg.flows.clone(),
            bufs,
            meta: vec![Meta::default(); pool],
            pkts: vec![Packet::default(); pool],
            free: (0..pool as u32).rev().collect(),
            heap: BinaryHeap::new(),
            evs: Vec::new(),
            free_ev: Vec::new(),
            seq: 0,
            batches: Vec::new(),
            future_delays: vec![VecDeque::new(); n_links],
            lost: Vec::new(),
            report: Report::default(),
            t0: 0,
            schemes: crate::schemes::SchemeHost::new(hooks, scheme, nodes, cfg.retain_ms * 1_000_000),
            leotp,
            extra_flows: HashMap::new(),
            tap: cfg.capture.as_ref().map(|c| crate::capture::Tap::new(c, nodes)),
            next_flush: u64::MAX,
            next_arrival: u64::MAX,
            cfg,
        };
        dp.report.flows = vec![FlowStats::default(); dp.flows.len()];
        dp.report.offload_hosts = dp.hosts.iter().filter(|h| h.tun.offload()).count() as u64;
        dp.report.uso_hosts = dp.hosts.iter().filter(|h| h.tun.udp_gso()).count() as u64;
        dp.report.offload_note = offload_note;
        let scheduled = std::mem::take(&mut dp.net.scheduled);
        for (at, actions) in scheduled {
            dp.add_batch(at.as_nanos(), actions);
        }
        Ok(dp)
    }

    /// Records the packet in `slot` if `node` is tapped (its bytes as they are now).
    pub(crate) fn tap_packet(&mut self, node: u32, slot: u32, t: u64) {
        if let Some(tap) = self.tap.as_mut() {
            let off = slot as usize * SLOT;
            tap.record(node, t, &self.bufs[off..off + self.meta[slot as usize].len as usize]);
        }
    }

    /// The lateness threshold of the configuration, us.
    pub fn late_us(&self) -> u64 {
        self.cfg.late_us
    }

    /// Names of the TUN devices by node, in host order.
    pub fn tun_names(&self) -> Vec<(u32, String)> {
        self.hosts.iter().map(|h| (h.node, h.name.clone())).collect()
    }

    pub(crate) fn push(&mut self, at: u64, ev: Ev) {
        let key = match self.free_ev.pop() {
            Some(k) => {
                self.evs[k as usize] = ev;
                k
            }
            None => {
                self.evs.push(ev);
                (self.evs.len() - 1) as u32
            }
        };
        self.heap.push(Reverse((at, self.seq, key)));
        self.seq += 1;
    }

    fn add_batch(&mut self, at: u64, actions: Vec<Control>) {
        for a in &actions {
            if let Control::Delay { link, delay } = *a {
                self.future_delays[link.0 as usize].push_back((at, delay));
            }
        }
        self.batches.push(Some(actions));
        let idx = (self.batches.len() - 1) as u32;
        self.push(at, Ev::Controls(idx));
    }

    pub(crate) fn drop_slot(&mut self, slot: u32, cause: Cause) {
        *self.report.drops.entry(cause).or_insert(0) += 1;
        self.free.push(slot);
    }

    pub(crate) fn count_drop(&mut self, cause: Cause) {
        *self.report.drops.entry(cause).or_insert(0) += 1;
    }

    /// Puts the packet in `slot` on `link` at model time `t`, with its scheme fields written into
    /// its Hop-by-Hop header; the link charges the larger of its real size and the size the scheme
    /// modelled (an encapsulation the bytes do not carry).
    pub(crate) fn put_on(&mut self, link: LinkId, slot: u32, t: u64) {
        let size = self.stamp(slot).max(self.pkts[slot as usize].size);
        let from = self.net.links[link.0 as usize].from.0;
        let offer = self.net.links[link.0 as usize].offer(
            Instant(t),
            slot,
            size,
            self.schemes.prioritised(&self.pkts[slot as usize]),
        );
        // The tap records a departure as the interface sees it, as the simulator's does: sent, lost on
        // the way or not; a packet the queue turned away or a down link refused never left.
        if !matches!(offer, Offer::Dropped(_, DropReason::Queue | DropReason::Down)) {
            self.tap_packet(from, slot, t);
        }
        match offer {
            Offer::Dropped(s, why) => self.drop_slot(
                s,
                match why {
                    DropReason::Queue => Cause::Queue,
                    DropReason::Loss => Cause::Loss,
                    DropReason::Down => Cause::Down,
                },
            ),
            Offer::Transmitting { done } => self.push(done.as_nanos(), Ev::TxDone(link.0)),
            Offer::Queued => {}
        }
    }

    pub(crate) fn clock_model(&self) -> u64 {
        leoguard_os::monotonic_ns().saturating_sub(self.t0)
    }

    fn apply(&mut self, a: Control, t: u64) {
        match a {
            Control::Route { at, dst, via } => self.net.set_route(at, dst, via),
            Control::Delay { link, delay } => {
                let q = &mut self.future_delays[link.0 as usize];
                while q.front().is_some_and(|&(at, _)| at <= t) {
                    q.pop_front();
                }
                let l = &mut self.net.links[link.0 as usize];
                match q.front() {
                    Some(&(t1, d1)) if t1 - t <= MAX_RAMP.as_nanos() => {
                        l.ramp_delay(Instant(t), delay, Instant(t1), d1)
                    }
                    _ => l.set_delay(delay),
                }
            }
            Control::Rate { link, rate } => self.net.links[link.0 as usize].set_rate(rate),
            Control::State { link, up } => self.set_state(link, up, t),
        }
    }

    fn set_state(&mut self, link: LinkId, up: bool, t: u64) {
        let mut lost = std::mem::take(&mut self.lost);
        self.net.links[link.0 as usize].set_state(up, &mut lost);
        for s in lost.drain(..) {
            self.drop_slot(s, Cause::Down);
        }
        self.lost = lost;
        let (from, to) = (self.net.links[link.0 as usize].from.0, self.net.links[link.0 as usize].to.0);
        for node in [from, to] {
            self.with_hook(node, t, |a, c| a.on_link_state(link, up, c));
        }
    }

    /// Brings the packet of the next event's arrival into cache while this event is handled.
    #[inline]
    fn prefetch_next(&self) {
        if let Some(&Reverse((_, _, key))) = self.heap.peek() {
            if let Ev::Arrive { slot, .. } = self.evs[key as usize] {
                let s = slot as usize;
                // The IPv6 header and the Hop-by-Hop options span the first two lines.
                leoguard_os::prefetch(&self.bufs[s * SLOT]);
                leoguard_os::prefetch(&self.bufs[s * SLOT + 64]);
                leoguard_os::prefetch(&self.meta[s]);
                leoguard_os::prefetch(&self.pkts[s]);
            }
        }
    }

    fn handle(&mut self, at: u64, ev: Ev) {
        match ev {
            Ev::TxDone(l) => {
                let link = &mut self.net.links[l as usize];
                let d = link.tx_done(Instant(at));
                if let Some((t, slot)) = d.head_arrival {
                    let epoch = link.epoch();
                    self.push(t.as_nanos(), Ev::Arrive { link: l, slot, epoch });
                }
                if let Some(t) = d.next_done {
                    self.push(t.as_nanos(), Ev::TxDone(l));
                }
            }
            Ev::Arrive { link: l, slot: head, epoch } => {
                let link = &mut self.net.links[l as usize];
                let Some((slot, next)) = link.arrive(epoch) else { return };
                debug_assert_eq!(slot, head, "wire head and event agree");
                let to = link.to.0;
                let epoch = link.epoch();
                if let Some((t, s)) = next {
                    self.push(t.as_nanos(), Ev::Arrive { link: l, slot: s, epoch });
                }
                self.report.packet_hops += 1;
                // A delivery holds for coalescing only if more is about to arrive over its last link.
                self.next_arrival = next.map_or(u64::MAX, |(t, _)| t.as_nanos());
                self.arrive_at(to, LinkId(l), slot, at);
                self.next_arrival = u64::MAX;
            }
            Ev::Timer { node, token } => self.with_hook(node, at, |a, c| a.on_timer(token, c)),
            Ev::LeotpTimer(node) => self.leotp_timer(node, at),
            Ev::Controls(i) => {
                let actions = self.batches[i as usize].take().unwrap_or_default();
                for a in actions {
                    self.apply(a, at);
                }
            }
        }
    }
}

impl DataPlane {
    /// Runs for `duration` of model time from CLOCK_MONOTONIC `t0_ns`, or until `stop`; returns
    /// what it measured.
    /// The second value keeps the hosts' TUN devices alive until the caller drops it (their kernel
    /// counters are read while they exist).
    pub fn run(mut self, t0_ns: u64, duration: Duration, stop: &AtomicBool) -> Result<(Report, Devices), EmuError> {
        // The constellation driver runs on its own thread, a bounded number of steps ahead, so its
        // routing computations never stall the packet loop; it is started before this thread pins
        // itself and takes real-time priority, which it would otherwise inherit.
        let (tx, rx) = mpsc::sync_channel::<(u64, Vec<Control>, Option<String>)>(32);
        let driver = self.net.driver.take().map(|(mut d, first)| {
            std::thread::spawn(move || {
                let mut t = first;
                loop {
                    let mut out = Vec::new();
                    let next = d.step(t, &mut out);
                    if tx.send((t.as_nanos(), out, d.error())).is_err() {
                        return;
                    }
                    match next {
                        Some(n) => t = n,
                        None => return,
                    }
                }
            })
        });
        if let Some(cpu) = self.cfg.cpu {
            leoguard_os::pin_to_cpu(cpu).map_err(os(format!("pinning to CPU {cpu}")))?;
        }
        leoguard_os::set_timer_slack_ns(1).map_err(os("timer slack"))?;
        self.report.priority_set = leoguard_os::set_nice(self.cfg.nice).is_ok();
        self.t0 = t0_ns;
        let cpu0 = leoguard_os::cpu_seconds();
        let cpus0 = crate::report::cpu_times();
        let timer = TimerFd::new().map_err(os("timerfd"))?;
        let mut ep = Epoll::new(self.hosts.len() + 1).map_err(os("epoll"))?;
        let timer_token = u64::MAX;
        ep.add(timer.as_raw_fd(), timer_token).map_err(os("epoll"))?;
        for (i, h) in self.hosts.iter().enumerate() {
            ep.add(h.tun.as_raw_fd(), i as u64).map_err(os("epoll"))?;
        }
        let end = duration.as_nanos();
        let spin = self.cfg.spin_us * 1000;
        let mut ready = Vec::new();
        let mut driver_open = driver.is_some();
        // The first routing step must be in place before any host sends.
        if driver_open {
            if let Ok((t, actions, err)) = rx.recv() {
                self.report.driver_error = err;
                self.add_batch(t, actions);
            }
        }
        loop {
            if driver_open {
                loop {
                    match rx.try_recv() {
                        Ok((t, actions, err)) => {
                            if err.is_some() {
                                self.report.driver_error = err;
                            }
                            self.add_batch(t, actions);
                        }
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => {
                            driver_open = false;
                            break;
                        }
                    }
                }
            }
            let mut now = self.clock_model();
            if now >= end || stop.load(Ordering::Relaxed) {
                break;
            }
            let work0 = now;
            while let Some(&Reverse((at, _, key))) = self.heap.peek() {
                if at > now {
                    break;
                }
                self.heap.pop();
                self.prefetch_next();
                let ev = self.evs[key as usize];
                self.free_ev.push(key);
                self.report.event_lateness.record(now.saturating_sub(at));
                self.handle(at, ev);
                now = self.clock_model();
                if now >= self.next_flush {
                    self.flush_due(now, false);
                }
            }
            // The pass is over: what waits for no more of its flow is written now, coalesced per host.
            self.flush_due(now, false);
            now = self.clock_model();
            self.report.busy_ns += now - work0;
            let next = self.heap.peek().map_or(end, |r| r.0 .0.min(end)).min(self.next_flush);
            let wait_ms = if next > now + spin {
                timer.arm_at(self.t0 + next - spin).map_err(os("timerfd"))?;
                -1
            } else {
                0
            };
            ep.wait(wait_ms, &mut ready).map_err(os("epoll_wait"))?;
            let work0 = self.clock_model();
            for &tok in &ready {
                if tok == timer_token {
                    timer.clear();
                } else {
                    self.read_host(tok as usize);
                }
            }
            if ready.iter().any(|&t| t != timer_token) {
                self.report.busy_ns += self.clock_model() - work0;
            }
        }
        self.flush_due(self.clock_model(), true);
        drop(rx);
        if let Some(h) = driver {
            let _ = h.join();
        }
        for h in &self.hosts {
            self.report.tun += h.tun.stats;
        }
        self.report.elapsed_ns = self.clock_model().min(end);
        self.report.scheme_host = self.schemes.stats;
        self.report.in_flight = (self.cfg.pool_packets - self.free.len()) as u64 - self.schemes.stats.masters_live;
        self.report.scheme_counters = self.schemes.counters();
        self.report.leotp_host = self.leotp.stats;
        self.report.leotp = self.leotp.totals();
        self.report.cpu_s = leoguard_os::cpu_seconds() - cpu0;
        self.report.cpu_busy_share = crate::report::busy_shares(&cpus0, &crate::report::cpu_times());
        if let (Some(tap), Some(c)) = (self.tap.as_ref(), self.cfg.capture.as_ref()) {
            self.report.capture = Some(tap.write(&c.path).map_err(os(format!("writing the capture {}", c.path)))?);
        }
        self.report.links = self
            .net
            .links
            .iter()
            .map(|l| {
                let m = l.loss_model();
                let lossy = m.and_then(|m| m.lossy_seconds(Instant(end)));
                (l.from.0, l.to.0, l.stats, m.map_or("none", |m| m.name()), lossy)
            })
            .collect();
        let devices = Devices(std::mem::take(&mut self.hosts));
        Ok((self.report, devices))
    }
}
