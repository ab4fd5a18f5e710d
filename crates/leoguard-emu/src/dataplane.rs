//! The data plane: one thread, pinned to one core, owns every node and link of the scenario. Real
//! hosts are network namespaces, each with a TUN device this thread opened inside it; their packets
//! are read from the TUN, forwarded hop by hop through leoguard-net's link model (serialising queue,
//! FIFO delay line, loss, up/down) at the times the model gives, and written to the destination
//! host's TUN. Events sit in one (time, sequence) heap; the thread sleeps on a timerfd (timer slack
//! lowered) until shortly before the next one and spins the rest of the way, reading the TUNs as it
//! goes. Every drop is counted by cause; every delivery's lateness against its model time is recorded
//! (the emulator's own timing error).

use crate::core::{Core, Ev, Host};
use crate::leotp::LeotpHost;
use crate::net::{EmuNet, MAX_RAMP};
use crate::packet;
use crate::plane::{Meta, NodePlugin, Owner};
use crate::schemes::SchemeHost;
use crate::tunio::HostTun;
use leoguard_core::{Duration, EventQueue, Instant};
use leoguard_net::packet::Packet;
use leoguard_net::schemes::wire::WireScheme;
use leoguard_net::topo::Control;
use leoguard_net::LinkId;
use leoguard_os::{Epoll, NetnsGuard, TimerFd};
use std::collections::{HashMap, VecDeque};
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

/// Events handled in a row between readings of the clock (each costs about as much as an event).
const CLOCK_EVERY: u32 = 8;

pub use crate::config::{CaptureCfg, EmuConfig, FlowCfg, HostCfg};
pub use crate::plane::{Cause, SLOT};
pub use crate::report::{FlowStats, Report};

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

/// The hosts' TUN devices after a run: they exist while this lives.
pub struct Devices(#[allow(dead_code)] Vec<Host>);

/// The data plane, opened and ready to run: the network and its packets, and what plugs into nodes.
pub struct DataPlane {
    pub(crate) core: Core,
    /// The per-hop scheme's hooks and the masters of retransmittable packets.
    pub(crate) schemes: SchemeHost,
    /// The LEOTP mid nodes, by node.
    pub(crate) leotp: LeotpHost,
}

impl DataPlane {
    /// Opens a TUN device in every host's namespace and prepares the network; `hooks` are the per-hop
    /// scheme's hooks by node (leoguard-net's `build_hooks`), whose fields travel in `scheme`'s
    /// Hop-by-Hop options; `leotp` the LEOTP mid nodes (a node runs a hook or a mid node, not both).
    pub fn open(
        net: EmuNet,
        cfg: EmuConfig,
        hooks: leoguard_net::schemes::NodeHooks,
        scheme: WireScheme,
        leotp: LeotpHost,
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
        let mut core = Core {
            net,
            hosts,
            host_of,
            addr_node,
            flows: cfg.flows.clone(),
            bufs,
            meta: vec![Meta::default(); pool],
            pkts: vec![Packet::default(); pool],
            free: (0..pool as u32).rev().collect(),
            events: EventQueue::default(),
            batches: Vec::new(),
            future_delays: vec![VecDeque::new(); n_links],
            lost: Vec::new(),
            report: Report::default(),
            t0: 0,
            extra_flows: HashMap::new(),
            tap: cfg.capture.as_ref().map(|c| crate::capture::Tap::new(c, nodes)),
            next_flush: u64::MAX,
            next_arrival: u64::MAX,
            held: Vec::new(),
            pinned_only: 0,
            out: Vec::new(),
            spare: Vec::new(),
            cfg,
        };
        core.report.flows = vec![FlowStats::default(); core.flows.len()];
        core.report.offload_hosts = core.hosts.iter().filter(|h| h.tun.offload()).count() as u64;
        core.report.uso_hosts = core.hosts.iter().filter(|h| h.tun.udp_gso()).count() as u64;
        core.report.offload_note = offload_note;
        let scheduled = std::mem::take(&mut core.net.scheduled);
        for (at, actions) in scheduled {
            core.add_batch(at.as_nanos(), actions);
        }
        let schemes = SchemeHost::new(hooks, scheme, nodes, core.cfg.retain_ms * 1_000_000);
        let dp = DataPlane { core, schemes, leotp };
        Ok(dp)
    }

    /// The lateness threshold of the configuration, us.
    pub fn late_us(&self) -> u64 {
        self.core.cfg.late_us
    }

    /// Names of the TUN devices by node, in host order.
    pub fn tun_names(&self) -> Vec<(u32, String)> {
        self.core.hosts.iter().map(|h| (h.node, h.name.clone())).collect()
    }

    fn apply(&mut self, a: Control, t: u64) {
        match a {
            Control::Route { at, dst, via } => self.core.net.set_route(at, dst, via),
            Control::Delay { link, delay } => {
                let q = &mut self.core.future_delays[link.0 as usize];
                while q.front().is_some_and(|&(at, _)| at <= t) {
                    q.pop_front();
                }
                let l = &mut self.core.net.links[link.0 as usize];
                let wake = match q.front() {
                    Some(&(t1, d1)) if t1 - t <= MAX_RAMP.as_nanos() => {
                        l.ramp_delay(Instant(t), delay, Instant(t1), d1)
                    }
                    _ => l.set_delay(Instant(t), delay),
                };
                self.core.wake(link, wake);
            }
            Control::Rate { link, rate } => self.core.net.links[link.0 as usize].set_rate(Instant(t), rate),
            Control::State { link, up } => self.set_state(link, up, t),
        }
    }

    fn set_state(&mut self, link: LinkId, up: bool, t: u64) {
        let mut lost = std::mem::take(&mut self.core.lost);
        self.core.net.links[link.0 as usize].set_state(Instant(t), up, &mut lost);
        for s in lost.drain(..) {
            self.core.drop_slot(s, Cause::Down);
        }
        self.core.lost = lost;
        let (from, to) = (self.core.net.links[link.0 as usize].from.0, self.core.net.links[link.0 as usize].to.0);
        for node in [from, to] {
            if self.schemes.runs_at(node) {
                self.schemes.on_link_state(&mut self.core, node, link, up, t);
                self.run_out(t);
            }
        }
    }

    /// Handles every event due by the clock, from `now` (a reading nothing has aged since). The
    /// clock is read again when the next event is not due by the last reading, and after every
    /// CLOCK_EVERY events handled in a row (a loop behind real time handles many): lateness is
    /// recorded for the event handled first after each reading, and deliveries whose hold ran out are
    /// written at each reading. Returns the last reading: every event due by it is handled.
    ///
    /// Packets read from a TUN enter at that reading, after the events due by it: a packet entering
    /// at `t` meets the network as it is at `t`, even when the thread woke late (a link due to go down
    /// 2 ms earlier is already down), and a link sees its times in order.
    pub(crate) fn run_due(&mut self, mut now: u64) -> u64 {
        // Events handled since the last reading (none: the reading is fresh).
        let mut since_read = 0;
        while let Some(Instant(at)) = self.core.events.peek_time() {
            if at > now && since_read == 0 {
                break;
            }
            if at > now || since_read >= CLOCK_EVERY {
                now = self.core.clock_model();
                since_read = 0;
                if at > now {
                    break;
                }
                if now >= self.core.next_flush {
                    self.core.flush_due(now, false);
                }
            }
            if since_read == 0 {
                self.core.report.event_lateness.record(now.saturating_sub(at));
            }
            let Some((Instant(at), ev)) = self.core.events.pop() else { break };
            self.core.prefetch_next();
            self.handle(at, ev);
            since_read += 1;
        }
        now
    }

    fn handle(&mut self, at: u64, ev: Ev) {
        match ev {
            Ev::Arrive { link: l, token, .. } => {
                let link = &mut self.core.net.links[l as usize];
                let a = link.wake(Instant(at), token);
                let to = link.to.0;
                self.core.wake(LinkId(l), a.wake);
                let Some(slot) = a.pkt else { return };
                self.core.report.packet_hops += 1;
                // A delivery holds for coalescing only if more is about to arrive over its last link.
                self.core.next_arrival = a.wake.map_or(u64::MAX, |w| w.at.as_nanos());
                self.arrive_at(to, LinkId(l), slot, at);
                self.core.next_arrival = u64::MAX;
            }
            Ev::Timer { owner: Owner::Scheme, node, token } => {
                self.schemes.on_timer(&mut self.core, node, token, at);
                self.run_out(at);
            }
            Ev::Timer { owner: Owner::Leotp, node, token } => {
                self.leotp.on_timer(&mut self.core, node, token, at);
                self.run_out(at);
            }
            Ev::Controls(i) => {
                // How late a batch of scheduled changes (link state, rate, delay, routes) takes effect.
                let now = self.core.clock_model();
                self.core.report.control_lateness.record(now.saturating_sub(at));
                let actions = self.core.batches[i as usize].take().unwrap_or_default();
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
        let driver = self.core.net.driver.take().map(|(mut d, first)| {
            std::thread::spawn(move || {
                let mut t = first;
                loop {
                    let mut out = Vec::new();
                    let next = d.step_all(t, &mut out);
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
        if let Some(cpu) = self.core.cfg.cpu {
            leoguard_os::pin_to_cpu(cpu).map_err(os(format!("pinning to CPU {cpu}")))?;
        }
        leoguard_os::set_timer_slack_ns(1).map_err(os("timer slack"))?;
        self.core.report.priority_set = leoguard_os::set_nice(self.core.cfg.nice).is_ok();
        self.core.t0 = t0_ns;
        let cpu0 = leoguard_os::cpu_seconds();
        let cpus0 = crate::report::cpu_times();
        let timer = TimerFd::new().map_err(os("timerfd"))?;
        let mut ep = Epoll::new(self.core.hosts.len() + 1).map_err(os("epoll"))?;
        let timer_token = u64::MAX;
        ep.add(timer.as_raw_fd(), timer_token).map_err(os("epoll"))?;
        for (i, h) in self.core.hosts.iter().enumerate() {
            ep.add(h.tun.as_raw_fd(), i as u64).map_err(os("epoll"))?;
        }
        let end = duration.as_nanos();
        let spin = self.core.cfg.spin_us * 1000;
        let mut ready = Vec::new();
        let mut driver_open = driver.is_some();
        // The first routing step must be in place before any host sends.
        if driver_open {
            if let Ok((t, actions, err)) = rx.recv() {
                self.core.report.driver_error = err;
                self.core.add_batch(t, actions);
            }
        }
        loop {
            if driver_open {
                loop {
                    match rx.try_recv() {
                        Ok((t, actions, err)) => {
                            if err.is_some() {
                                self.core.report.driver_error = err;
                            }
                            self.core.add_batch(t, actions);
                        }
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => {
                            driver_open = false;
                            break;
                        }
                    }
                }
            }
            let mut now = self.core.clock_model();
            if now >= end || stop.load(Ordering::Relaxed) {
                break;
            }
            let work0 = now;
            now = self.run_due(now);
            // The pass is over: what waits for no more of its flow is written now, coalesced per host.
            self.core.flush_due(now, false);
            now = self.core.clock_model();
            self.core.report.busy_ns += now - work0;
            let next = self.core.events.peek_time().map_or(end, |t| t.0.min(end)).min(self.core.next_flush);
            let wait_ms = if next > now + spin {
                timer.arm_at(self.core.t0 + next - spin).map_err(os("timerfd"))?;
                -1
            } else {
                0
            };
            ep.wait(wait_ms, &mut ready).map_err(os("epoll_wait"))?;
            let work0 = self.core.clock_model();
            for &tok in &ready {
                if tok == timer_token {
                    timer.clear();
                } else {
                    self.read_host(tok as usize);
                }
            }
            if ready.iter().any(|&t| t != timer_token) {
                self.core.report.busy_ns += self.core.clock_model() - work0;
            }
        }
        self.core.flush_due(self.core.clock_model(), true);
        drop(rx);
        if let Some(h) = driver {
            let _ = h.join();
        }
        for h in &self.core.hosts {
            self.core.report.tun += h.tun.stats;
        }
        self.core.report.elapsed_ns = self.core.clock_model().min(end);
        self.core.report.scheme_host = self.schemes.stats;
        self.core.report.in_flight = (self.core.cfg.pool_packets - self.core.free.len()) as u64 - self.core.pinned_only;
        self.core.report.scheme_counters = self.schemes.counters();
        self.core.report.leotp_host = self.leotp.stats;
        self.core.report.leotp = self.leotp.totals();
        self.core.report.cpu_s = leoguard_os::cpu_seconds() - cpu0;
        self.core.report.cpu_busy_share = crate::report::busy_shares(&cpus0, &crate::report::cpu_times());
        if let (Some(tap), Some(c)) = (self.core.tap.as_ref(), self.core.cfg.capture.as_ref()) {
            self.core.report.capture = Some(tap.write(&c.path).map_err(os(format!("writing the capture {}", c.path)))?);
        }
        // The links' counters include every serialisation started by the end (their transmitters
        // are brought up to it: a serialisation's end is not an event).
        let stop = Instant(self.core.report.elapsed_ns);
        self.core.report.links = self
            .core
            .net
            .links
            .iter_mut()
            .map(|l| {
                l.advance(stop);
                let m = l.loss_model();
                let lossy = m.and_then(|m| m.lossy_seconds(Instant(end)));
                (l.from.0, l.to.0, l.stats, m.map_or("none", |m| m.name()), lossy)
            })
            .collect();
        let devices = Devices(std::mem::take(&mut self.core.hosts));
        Ok((self.core.report, devices))
    }
}
