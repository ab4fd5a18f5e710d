//! A scenario as data (nodes, links, flows, scheduled link events) and one function that runs it and
//! returns the results as columns: per-flow summaries, per-flow time series, per-packet records and
//! per-link counters (their types and their collection: `scenario/results.rs`). The Python front builds
//! this from TOML; tests build it directly.

use crate::constellation::ConstellationTopo;
use crate::engine::NodeId;
use crate::sim::{AgentId, CbrSource, Sim, Sink};
use crate::tcp_agent::{TcpSink, TcpSource};
use leoguard_core::{Bps, Duration, Instant};
use leoguard_net::topo::Topology;
use leoguard_proto::cc;
use leoguard_proto::tcp::{TcpConfig, TcpReceiver, TcpSender};

pub mod derived;
mod leotp;
mod results;
pub use leotp::{placed_mid_nodes, refuse_other_schemes, LeotpSpec};
use results::{agent, collect};
pub use results::{
    AppDelayRow, DropRow, FlowResult, InterruptionRow, LinkRow, LinkSeriesRow, PacketRow, RunResult, SeriesRow,
    StartcpRow,
};

pub use leoguard_net::topo::{LinkEvent, LinkSpec, RouteEvent};

/// What a flow sends.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowKind {
    /// TCP with a congestion controller; `bytes` None = bulk for the whole run.
    Tcp {
        /// Registry name of the controller.
        cc: String,
        /// Bytes to transfer (flow completion time is reported), or unlimited.
        bytes: Option<u64>,
        /// An application-limited stream instead: the application writes one MSS at this rate
        /// (its application-perceived delay counts from the write); `None`: as fast as TCP allows.
        rate: Option<Bps>,
    },
    /// Constant-bit-rate UDP.
    Cbr {
        /// Sending rate.
        rate: Bps,
        /// Packet size, bytes.
        size: u32,
    },
    /// A browser loading corpus pages one after another (web/mod.rs; docs/web.md).
    Web {
        /// Registry name of the controller of every connection (both directions).
        cc: String,
        /// HTTP version.
        http: crate::web::Http,
        /// Seed of the page corpus.
        corpus_seed: u64,
        /// Corpus page indices, loaded in this order.
        pages: Vec<u32>,
        /// Pause between a load's end and the next load's start.
        think: Duration,
    },
    /// A WebRTC video call (RTP over UDP with NACK/PLI, optional Tambur FEC; see `webrtc`).
    Webrtc(crate::webrtc::WebrtcConfig),
    /// A LEOTP transfer (docs/leotp.md): the producer runs at `src`, the consumer at `dst`, mid
    /// nodes between them as the scenario's `leotp` section places them.
    Leotp {
        /// Bytes to transfer (flow completion time is reported), or as many as the run allows.
        bytes: Option<u64>,
    },
}

/// A flow between two nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// Sender node.
    pub src: u32,
    /// Receiver node.
    pub dst: u32,
    /// What it sends.
    pub kind: FlowKind,
    /// When it starts.
    pub start: Instant,
    /// IPv6 Traffic Class of its packets (SATGUARD protects delay-sensitive ones).
    pub tc: u8,
}

/// A whole scenario.
#[derive(Clone, Debug, Default)]
pub struct Scenario {
    /// Number of nodes (ids 0..nodes).
    pub nodes: u32,
    /// Links.
    pub links: Vec<LinkSpec>,
    /// Flows.
    pub flows: Vec<FlowSpec>,
    /// Scheduled link state changes.
    pub events: Vec<LinkEvent>,
    /// Scheduled route changes (after the initial shortest-hop routes).
    pub routes: Vec<RouteEvent>,
    /// Simulated time.
    pub duration: Duration,
    /// Run seed.
    pub seed: u64,
    /// Sampling interval of the per-flow time series.
    pub sample_every: Duration,
    /// A LEO path from the constellation engine instead of `links` (ground ends are nodes 0 and 1).
    pub leo: Option<crate::leo::LeoPath>,
    /// A whole constellation instead of `links`.
    pub constellation: Option<ConstellationTopo>,
    /// Sampling interval of the per-link series (zero: none).
    pub link_sample_every: Duration,
    /// Loss-recovery mechanisms of the bulk and fixed-size TCP flows (and their M-PEP chains); web
    /// connections use Linux's defaults.
    pub tcp_recovery: leoguard_proto::tcp::Recovery,
    /// TCP flows record the application-perceived delay of every `app_delay_every`-th segment
    /// (`RunResult.app_delay`; 0: none).
    pub app_delay_every: u64,
    /// SATGUARD on every node.
    pub satguard: Option<crate::schemes::satguard::SatguardOptions>,
    /// LinkGuardian on every node (the SATGUARD paper's "LinkGuard" baseline).
    pub linkguardian: Option<crate::schemes::linkguardian::LinkGuardianOptions>,
    /// M-PEP split-TCP proxies on TCP flows (the SATGUARD paper's "M-PEP" baseline; constellations only).
    pub mpep: Option<crate::schemes::mpep::MpepOptions>,
    /// Tambur over time slots at the ends of TCP flows (the SATGUARD paper's Tambur baseline).
    pub tambur: Option<crate::schemes::tambur::TamburOptions>,
    /// The liquid data FEC tunnel between the ends of TCP flows (docs/liquid.md).
    pub liquid: Option<crate::schemes::liquid::LiquidOptions>,
    /// A packet capture at some nodes (the result's `capture` is then a pcap file).
    pub capture: Option<crate::capture::CaptureSpec>,
    /// StarTCP's configuration and lead policy for the TCP flows whose `cc` is `startcp`.
    pub startcp: StartcpSpec,
    /// LEOTP's configuration and mid-node placement for the `leotp` flows.
    pub leotp: LeotpSpec,
}

/// StarTCP on the scenario's `startcp` flows (docs/startcp.md): leoguard-proto's description, which
/// `leoguard-transport` builds its sender from too.
pub use leoguard_proto::startcp::{StartcpPolicy, StartcpSpec};

/// A scenario that cannot run; the message names the field (the same error type as a topology's, so
/// both engines reject a scenario with the same words).
pub use leoguard_net::topo::TopologyError as ScenarioError;

fn invalid(field: String, value: impl ToString, reason: &str) -> ScenarioError {
    ScenarioError::Invalid { field, value: value.to_string(), reason: reason.to_string() }
}

impl Scenario {
    /// The network part of the scenario (what the emulator builds too).
    pub fn topology(&self) -> Topology<'_> {
        Topology {
            nodes: self.nodes,
            links: &self.links,
            events: &self.events,
            routes: &self.routes,
            leo: self.leo.as_ref(),
            constellation: self.constellation.as_ref(),
        }
    }

    /// Checks every field; errors name it.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        self.topology().validate()?;
        if self.satguard.is_some() && self.linkguardian.is_some() {
            return Err(invalid("linkguardian".into(), "on", "runs instead of satguard, not with it"));
        }
        if let Some(m) = &self.mpep {
            if self.satguard.is_some() || self.linkguardian.is_some() || self.tambur.is_some() {
                return Err(invalid(
                    "mpep".into(),
                    "on",
                    "runs instead of satguard, linkguardian and tambur, not with them",
                ));
            }
            if self.constellation.is_none() {
                return Err(invalid(
                    "mpep".into(),
                    "on",
                    &crate::schemes::mpep::MpepError::NoConstellation.to_string(),
                ));
            }
            m.validate().map_err(|e| invalid("mpep".into(), "", &e.to_string()))?;
        }
        if let Some(t) = &self.tambur {
            crate::schemes::tambur::validate(self, t)?;
        }
        if let Some(l) = &self.liquid {
            crate::schemes::liquid::validate(self, l)?;
        }
        if self.duration == Duration::ZERO {
            return Err(invalid("duration_s".into(), 0, "must be > 0"));
        }
        leotp::validate(self)?;
        for (i, f) in self.flows.iter().enumerate() {
            if f.src >= self.nodes || f.dst >= self.nodes || f.src == f.dst {
                return Err(invalid(
                    format!("flows[{i}]"),
                    format!("{} -> {}", f.src, f.dst),
                    "src and dst must be two different existing nodes",
                ));
            }
            match &f.kind {
                FlowKind::Tcp { cc: name, bytes, rate } => {
                    if let Some(r) = rate {
                        if r.0 == 0 || r.0 > 100_000_000_000 {
                            return Err(invalid(format!("flows[{i}].rate_bps"), r.0, "must be in (0, 100 Gbit/s]"));
                        }
                        if bytes.is_some() {
                            return Err(invalid(
                                format!("flows[{i}].bytes"),
                                bytes.unwrap_or(0),
                                "a rate-limited TCP stream has no size (give rate or bytes, not both)",
                            ));
                        }
                    }
                    if cc::build(name, 1448, 10).is_err() {
                        return Err(invalid(
                            format!("flows[{i}].cc"),
                            name,
                            &format!("unknown congestion control (known: {})", cc::ALGORITHMS.join(", ")),
                        ));
                    }
                    if *bytes == Some(0) {
                        return Err(invalid(format!("flows[{i}].bytes"), 0, "must be > 0"));
                    }
                }
                FlowKind::Web { cc, pages, .. } => crate::web::setup::validate(i, cc, pages)?,
                FlowKind::Webrtc(cfg) => {
                    cfg.validate()
                        .map_err(|(field, value, reason)| invalid(format!("flows[{i}].{field}"), value, reason))?;
                }
                FlowKind::Leotp { .. } => {}
                FlowKind::Cbr { rate, size } => {
                    if rate.0 == 0 || rate.0 > 100_000_000_000 {
                        return Err(invalid(format!("flows[{i}].rate_bps"), rate.0, "must be in (0, 100 Gbit/s]"));
                    }
                    if !(28..=65_535).contains(size) {
                        return Err(invalid(format!("flows[{i}].size"), size, "must be in [28, 65535] bytes"));
                    }
                }
            }
        }
        if let Some(c) = &self.capture {
            if c.nodes.is_empty() {
                return Err(invalid("capture.nodes".into(), "[]", "must name at least one node"));
            }
            if let Some((i, n)) = c.nodes.iter().enumerate().find(|(_, &n)| n >= self.nodes) {
                return Err(invalid(format!("capture.nodes[{i}]"), n, "is not a node"));
            }
            if c.max_packets == 0 {
                return Err(invalid("capture.max_packets".into(), 0, "must be > 0"));
            }
            if !(1..=crate::capture::MAX_SNAPLEN).contains(&c.snaplen) {
                return Err(invalid("capture.snaplen".into(), c.snaplen, "must be in [1, 65535] bytes"));
            }
        }
        Ok(())
    }
}

/// SaTCP's cross-layer handover reports for a flow whose path ends at ground nodes `ends`: every
/// planned handover of those nodes is reported `REPORT_LEAD` ahead, off by a prediction error drawn
/// uniformly within `REPORT_ERROR` (REFERENCE.md: "handover report ~0.5 s ahead with prediction
/// error"). Controllers other than SaTCP ignore them.
fn handover_reports(
    info: &crate::constellation::TopoInfo,
    ends: &[Option<u32>],
    rng: &mut leoguard_core::RngStream,
) -> Vec<Instant> {
    reports_of(info.handovers.iter().filter(|h| ends.contains(&Some(h.ground.0))).map(|h| h.t), rng)
}

/// The same reports for a `leo-path` topology: its one path joins its two ends, so every handover
/// interruption of either end is on it.
fn leo_handover_reports(leo: &crate::leo::LeoPath, rng: &mut leoguard_core::RngStream) -> Vec<Instant> {
    reports_of(leo.interruptions.iter().map(|h| h.t), rng)
}

fn reports_of(handovers: impl Iterator<Item = Instant>, rng: &mut leoguard_core::RngStream) -> Vec<Instant> {
    const REPORT_LEAD: f64 = 0.5;
    const REPORT_ERROR: f64 = 0.1;
    let mut out: Vec<Instant> = handovers
        .map(|t| {
            let t = t.as_nanos() as f64 / 1e9 - REPORT_LEAD + rng.uniform_range(-REPORT_ERROR, REPORT_ERROR);
            Instant((t.max(0.0) * 1e9) as u64)
        })
        .collect();
    out.sort_unstable();
    out
}

/// Runs a scenario to its end.
pub fn run(s: &Scenario) -> Result<RunResult, ScenarioError> {
    let mut r = Running::new(s)?;
    r.advance(r.end());
    Ok(r.collect())
}

/// A scenario being run: advance it in slices (for progress reports) and collect the results at any
/// point (a run stopped early keeps what it has).
#[derive(Debug)]
pub struct Running {
    s: Scenario,
    sim: Sim,
    /// Per flow: (sender agent, receiver agent).
    ends: Vec<(AgentId, AgentId)>,
    end: Instant,
    hooks: Vec<AgentId>,
    /// LEOTP mid nodes.
    leotp_hooks: Vec<AgentId>,
    /// M-PEP chains: (chain, source agent, flow index).
    chains: Vec<(crate::schemes::mpep::SharedChain, AgentId, usize)>,
    /// Scenario flow of each flow id (web connections have ids above the scenario's flows).
    owner: Vec<u32>,
    /// M-PEP's web connection chains and UDP relays.
    mpep_extra: crate::schemes::mpep::web::Extra,
}

impl Running {
    /// Builds the network, flows and schedules of `s`.
    pub fn new(s: &Scenario) -> Result<Running, ScenarioError> {
        s.validate()?;
        let mut sim = Sim::new(s.nodes as usize, s.seed);
        let mut ends: Vec<u32> = Vec::new();
        let mut serving_of = Vec::new();
        if let Some(c) = &s.constellation {
            ends = s.flows.iter().flat_map(|f| [f.src, f.dst]).collect();
            if let Some(m) = &s.mpep {
                // Every flow kind goes through the proxies (TCP and web split, UDP relayed).
                let tcp: Vec<(u32, u32)> = s.flows.iter().map(|f| (f.src, f.dst)).collect();
                // Ground proxies are addressed on their ground nodes.
                ends.extend(tcp.iter().flat_map(|&(a, b)| [c.ground_of(a), c.ground_of(b)]).flatten());
                serving_of = crate::schemes::mpep::proxied_grounds(c, m, &tcp);
            }
        }
        let topo_info = s.topology().build(&mut sim, &ends, &serving_of)?.info;
        sim.sample_links(s.link_sample_every);
        if let Some(c) = &s.capture {
            let at: Vec<NodeId> = c.nodes.iter().map(|&n| NodeId(n)).collect();
            sim.capture_at(&at, c.max_packets);
        }
        let mut hooks = crate::schemes::attach(s, &mut sim, topo_info.as_ref())?;
        let leotp_hooks = leotp::attach_mid_nodes(s, &mut sim)?;
        let cfg = TcpConfig { recovery: s.tcp_recovery, ..TcpConfig::default() };
        let mut ends = Vec::with_capacity(s.flows.len());
        let mut chains = Vec::new();
        let mut owner: Vec<u32> = (0..s.flows.len() as u32).collect();
        let mut mpep_extra = crate::schemes::mpep::web::Extra::default();
        let mpep_at = match (&s.mpep, &s.constellation, &topo_info) {
            (Some(m), Some(c), Some(info)) => Some(crate::schemes::mpep::web::Placement {
                topo: c,
                info,
                opts: m,
                buffer: m.buffer_or_default(c.gsl_rate).max(2 * u64::from(cfg.mss)),
            }),
            _ => None,
        };
        for (i, f) in s.flows.iter().enumerate() {
            let flow = i as u32;
            if let FlowKind::Web { .. } = &f.kind {
                let reports = match (&s.constellation, &topo_info) {
                    (Some(c), Some(info)) => {
                        let ends = [c.ground_of(f.src), c.ground_of(f.dst)];
                        let mut rng = leoguard_core::stream(s.seed, &format!("satcp-reports/{i}"));
                        handover_reports(info, &ends, &mut rng)
                    }
                    _ => Vec::new(),
                };
                ends.push(match &mpep_at {
                    Some(at) => {
                        use crate::schemes::mpep::web::attach_web;
                        attach_web(&mut sim, i, f, &mut owner, at, &mut mpep_extra, reports)?
                    }
                    None => crate::web::setup::attach(&mut sim, i, f, &mut owner, reports),
                });
                continue;
            }
            let (src, dst): (Box<dyn crate::sim::Agent>, Box<dyn crate::sim::Agent>) = match &f.kind {
                FlowKind::Tcp { cc: name, bytes, rate } => {
                    let star = (name == "startcp").then_some(&s.startcp);
                    let bad_star = |e: &dyn ToString| invalid("startcp".into(), name, &e.to_string());
                    let c = match star {
                        Some(st) => {
                            leoguard_proto::startcp::build_cc(&st.config, u64::from(cfg.mss), cfg.init_cwnd_segments)
                                .map_err(|e| bad_star(&e))?
                        }
                        None => cc::build(name, u64::from(cfg.mss), cfg.init_cwnd_segments)
                            .map_err(|_| invalid(format!("flows[{i}].cc"), name, "unknown congestion control"))?,
                    };
                    let limit = if rate.is_some() { Some(0) } else { *bytes };
                    let tx = match star {
                        Some(st) => {
                            TcpSender::with_startcp_policy(cfg, c, limit, st.config, st.policy.build(&st.config))
                                .map_err(|e| bad_star(&e))?
                        }
                        None => TcpSender::new(cfg, c, limit),
                    };
                    let mut src = TcpSource::new(flow, NodeId(f.dst), tx, s.sample_every);
                    if let Some(r) = rate {
                        let every =
                            r.transmission_time(leoguard_core::Bytes(u64::from(cfg.mss))).unwrap_or(Duration::ZERO);
                        src.app_rate = Some((every.max(Duration(1)), cfg.mss));
                    }
                    src.start_at = f.start;
                    src.tc = f.tc;
                    src.delay_every = s.app_delay_every;
                    let mut rng = leoguard_core::stream(s.seed, &format!("satcp-reports/{i}"));
                    if let (Some(c), Some(info)) = (&s.constellation, &topo_info) {
                        let ends = [c.ground_of(f.src), c.ground_of(f.dst)];
                        src.handover_reports = handover_reports(info, &ends, &mut rng);
                    } else if let Some(leo) = &s.leo {
                        src.handover_reports = leo_handover_reports(leo, &mut rng);
                    }
                    let rx = match star {
                        Some(st) => TcpReceiver::with_startcp(cfg, st.config).map_err(|e| bad_star(&e))?,
                        None => TcpReceiver::new(cfg),
                    };
                    let mut sink = TcpSink::new(flow, NodeId(f.src), rx, true);
                    sink.tc = f.tc;
                    sink.track_delivery = s.app_delay_every > 0;
                    if let (Some(m), Some(c), Some(info)) = (&s.mpep, &s.constellation, &topo_info) {
                        use crate::schemes::mpep;
                        let bad = |e: &dyn ToString| invalid(format!("flows[{i}]"), "mpep", &e.to_string());
                        let hops = mpep::chain_hops(c, info, m, f.src, f.dst).map_err(|e| bad(&e))?;
                        if hops.len() > 2 {
                            let buffer = m.buffer_or_default(c.gsl_rate);
                            let chain = mpep::Chain::new(
                                flow,
                                &hops,
                                owner.len() as u32,
                                name,
                                cfg,
                                buffer.max(2 * u64::from(cfg.mss)),
                                m.state_overhead_bytes,
                                *bytes,
                            )
                            .map_err(|e| bad(&e.0))?;
                            // The chain's later segments take the next free flow ids (after the
                            // scenario's flows and any web connections), owned by this flow.
                            owner.extend(std::iter::repeat_n(flow, hops.len() - 2));
                            let mut chain = chain;
                            chain.set_migrations(mpep::plan_migrations(c, info, &sim, &hops)?);
                            let (a, b, shared) = mpep::install_chain(&mut sim, chain, src, sink);
                            ends.push((a, b));
                            chains.push((shared, a, i));
                            continue;
                        }
                    }
                    (Box::new(src), Box::new(sink))
                }
                FlowKind::Cbr { rate, size } => {
                    let interval =
                        rate.transmission_time(leoguard_core::Bytes(u64::from(*size))).unwrap_or(Duration::ZERO);
                    let until = s.duration.as_nanos().saturating_sub(f.start.as_nanos());
                    let count = if interval.as_nanos() == 0 { 0 } else { until / interval.as_nanos() };
                    let src = CbrSource {
                        flow,
                        dst: NodeId(f.dst),
                        size: *size,
                        interval,
                        count,
                        sent: 0,
                        start: f.start,
                        tc: f.tc,
                    };
                    if let Some(at) = &mpep_at {
                        let cap = at.opts.udp_buffer_bytes.unwrap_or(at.buffer);
                        use crate::schemes::mpep::web::attach_udp;
                        attach_udp(&mut sim, flow, f.src, f.dst, at, cap, &mut mpep_extra)?;
                    }
                    (Box::new(src), Box::<Sink>::default())
                }
                FlowKind::Web { .. } => unreachable!("attached above"),
                FlowKind::Leotp { bytes } => leotp::agents(s, i, f, *bytes)?,
                FlowKind::Webrtc(cfg) => {
                    if let Some(at) = &mpep_at {
                        // RTP media and RTCP feedback share the flow id: both are relayed.
                        let cap = at.opts.udp_buffer_bytes.unwrap_or(at.buffer);
                        use crate::schemes::mpep::web::attach_udp;
                        attach_udp(&mut sim, flow, f.src, f.dst, at, cap, &mut mpep_extra)?;
                    }
                    crate::webrtc::agents(flow, f.src, f.dst, *cfg, f.start, f.tc, s.seed)
                }
            };
            ends.push((sim.attach_flow(NodeId(f.src), flow, src), sim.attach_flow(NodeId(f.dst), flow, dst)));
        }
        crate::schemes::mpep::web::install_udp(&mut sim, &mut mpep_extra);
        let end = Instant(s.duration.as_nanos());
        if let Some(opts) = &s.tambur {
            hooks.extend(crate::schemes::tambur::attach(s, opts, &owner, &mut sim));
        }
        Ok(Running { s: s.clone(), sim, ends, end, hooks, leotp_hooks, chains, owner, mpep_extra })
    }

    /// The end of the run.
    pub fn end(&self) -> Instant {
        self.end
    }

    /// Simulated time so far.
    pub fn now(&self) -> Instant {
        self.sim.net.now
    }

    /// Runs up to `until` (capped at the end).
    pub fn advance(&mut self, until: Instant) {
        self.sim.run(until.min(self.end));
    }

    /// Whether the run has reached its end.
    pub fn finished(&self) -> bool {
        self.sim.net.now >= self.end
    }

    /// Packet-hops so far.
    pub fn packet_hops(&self) -> u64 {
        self.sim.net.links.iter().map(|l| l.stats.delivered).sum()
    }

    /// The results up to now.
    pub fn collect(&self) -> RunResult {
        let mut r = collect(&self.s, &self.sim, &self.ends, &self.owner, self.sim.net.now);
        if self.s.mpep.is_some() {
            use crate::schemes::mpep;
            // A split flow completes when the receiver's ACK of the last byte reaches its peer.
            for (c, _, i) in &self.chains {
                let f = &self.s.flows[*i];
                // Like its packet counts, a split flow's network loss is its first segment's (drops
                // on later segments are that segment's proxies' business, counted in `mpep`).
                let own = self
                    .sim
                    .drops
                    .iter()
                    .filter(|d| {
                        d.packet.flow == *i as u32
                            && d.packet.flags & crate::tcp_agent::FLAG_ACK == 0
                            && d.packet.net.flags & crate::engine::NET_CONTROL == 0
                    })
                    .count();
                r.flows[*i].network_loss = own as f64 / r.flows[*i].packets_sent.max(1) as f64;
                r.flows[*i].fct_s = mpep::completed_at(c).map(|t| t.saturating_duration_since(f.start).as_secs_f64());
                if let Some(fct) = r.flows[*i].fct_s {
                    r.flows[*i].goodput_bps = r.flows[*i].delivered_bytes as f64 * 8.0 / fct.max(1e-9);
                } else {
                    let active = self.sim.net.now.saturating_duration_since(f.start).as_secs_f64().max(1e-9);
                    r.flows[*i].goodput_bps = r.flows[*i].delivered_bytes as f64 * 8.0 / active;
                }
            }
            let mut list: Vec<_> = self.chains.iter().map(|(c, a, _)| (std::sync::Arc::clone(c), *a)).collect();
            list.extend(self.mpep_extra.chains.iter().map(|(c, a)| (std::sync::Arc::clone(c), *a)));
            let (mut stats, records) = mpep::totals(&self.sim, &list);
            self.mpep_extra.add_udp(&self.sim, &mut stats);
            r.mpep = Some(stats);
            r.mpep_migrations = records;
        }
        if self.s.liquid.is_some() {
            let mut total = crate::schemes::liquid::LiquidStats::default();
            for &h in &self.hooks {
                total += agent::<crate::schemes::liquid::LiquidHook>(&self.sim, h).totals();
            }
            r.liquid = Some(total);
        } else if self.s.tambur.is_some() {
            let mut total = crate::schemes::tambur::TamburStats::default();
            for &h in &self.hooks {
                total += agent::<crate::schemes::tambur::TamburHook>(&self.sim, h).totals(self.sim.net.now);
            }
            r.tambur = Some(total);
        } else if self.s.linkguardian.is_some() {
            let mut total = crate::schemes::linkguardian::LinkGuardianStats::default();
            for &h in &self.hooks {
                total += agent::<crate::schemes::linkguardian::LinkGuardianHook>(&self.sim, h).stats;
            }
            r.linkguardian = Some(total);
        } else if !self.hooks.is_empty() {
            let mut total = crate::schemes::satguard::SatguardStats::default();
            for &h in &self.hooks {
                let hook = agent::<crate::schemes::satguard::SatguardHook>(&self.sim, h);
                total += hook.totals();
                r.hops.extend(hook.hop_rows());
            }
            r.satguard = Some(total);
        }
        if !self.leotp_hooks.is_empty() || self.s.flows.iter().any(|f| matches!(f.kind, FlowKind::Leotp { .. })) {
            r.leotp = Some(leotp::totals(&self.sim, &self.leotp_hooks));
        }
        if let (Some(spec), Some(tap)) = (&self.s.capture, self.sim.capture()) {
            use crate::capture::{to_pcap, FlowEnds, Scheme, Transport};
            let mut flows: Vec<FlowEnds> = (self.s.flows.iter())
                .map(|f| FlowEnds {
                    src: f.src,
                    dst: f.dst,
                    transport: match f.kind {
                        FlowKind::Tcp { .. } | FlowKind::Web { .. } => Transport::Tcp,
                        FlowKind::Cbr { .. } | FlowKind::Webrtc(_) | FlowKind::Leotp { .. } => Transport::Udp,
                    },
                })
                .collect();
            // Web connections: the ends of the scenario flow they belong to (own ports per id).
            let extra: Vec<FlowEnds> = self.owner[flows.len()..].iter().map(|&o| flows[o as usize]).collect();
            flows.extend(extra);
            let scheme = match (&self.s.satguard, &self.s.linkguardian) {
                (Some(_), _) => Scheme::Satguard,
                (None, Some(_)) => Scheme::LinkGuardian,
                (None, None) => Scheme::None,
            };
            let file = to_pcap(tap.records(), &flows, scheme, spec.snaplen);
            r.capture = Some(file.pcap);
            r.capture_missed = tap.missed() + file.unconverted;
        }
        r
    }
}

#[cfg(test)]
mod tests;

/// Tests: two runs that must be one and the same (flows, page loads, every link's counters, the
/// packets recorded).
#[cfg(test)]
pub(crate) fn assert_same_run(a: &RunResult, b: &RunResult) {
    assert_eq!(format!("{:?}", a.flows), format!("{:?}", b.flows));
    assert_eq!(format!("{:?}", a.web), format!("{:?}", b.web));
    let links = |r: &RunResult| format!("{:?}", r.links.iter().map(|l| l.stats).collect::<Vec<_>>());
    assert_eq!(links(a), links(b));
    assert_eq!((a.packet_hops, a.packets.len()), (b.packet_hops, b.packets.len()));
}
