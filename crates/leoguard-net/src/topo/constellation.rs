//! A whole constellation as a simulator topology: every satellite is a node, every ISL a pair of
//! links, every ground node (user terminal or ground station) attaches to one satellite at a time by
//! its policy (Starlink's 15 s global schedule, or nearest), and hosts (servers, PoPs) hang off ground
//! nodes by terrestrial links. Many flows between any ground nodes and hosts share the network.
//!
//! Time-varying parts, as the run goes (a [`Driver`], so nothing per step is held in memory):
//! - at every routing step, ISL and ground-link propagation delays follow the orbits (packets in
//!   flight keep their delay), ISLs that the latitude cut or the grazing rule removes go down, and the
//!   next hops towards every flow end are recomputed by shortest propagation delay over the ISL
//!   graph from the satellite serving that end (route changes take effect at step boundaries);
//! - at each handover (exact time from the attachment schedule) the old ground link goes down (what it
//!   queued or carried is lost) and the new one comes up after the drawn interruption.
//!
//! Node numbering: ground nodes `0..G`, hosts `G..G+H`, satellite `s` is node `G + H + s`.

use super::access::GroundAccess;
use super::{Control, NetBuilder};
use crate::link::{LinkId, NodeId, QueueLimit};
use crate::loss::{LossError, LossSpec};
use leoguard_core::{Bps, Duration, Instant};
use leoguard_orbit::attach::Slot;
use leoguard_orbit::geo::{distance, light_delay_s, Vec3};
use leoguard_orbit::routing::{Dijkstra, SnapshotGraph};
use leoguard_orbit::timeline::{attachment_schedule, path_timeline};
use leoguard_orbit::{Constellation, GroundNode, OrbitError, Role, TimelineOptions};
use std::collections::BTreeMap;
use std::sync::Arc;

mod driver;
use driver::ConstellationDriver;

/// A host (server, PoP) behind a ground node.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSpec {
    /// Name.
    pub name: String,
    /// Index of the ground node it hangs off.
    pub ground: u32,
    /// Capacity of its terrestrial link.
    pub rate: Bps,
    /// One-way delay of its terrestrial link.
    pub delay: Duration,
}

/// One planned handover of a ground node, in simulator terms: a row of the connectivity cache that
/// SATGUARD's buffer migration consults (§3.2: the operator's global scheduler pre-computes which
/// satellite serves which ground node when, and satellites cache it).
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedHandover {
    /// When the old ground link goes down.
    pub t: Instant,
    /// The ground node.
    pub ground: NodeId,
    /// The satellite serving it until `t`.
    pub from: NodeId,
    /// The satellite serving it after `t` (once the interruption is over).
    pub to: NodeId,
    /// The old downlink (`from` -> ground).
    pub old_down: LinkId,
    /// The new downlink (`to` -> ground).
    pub new_down: LinkId,
    /// ISLs from `from` to `to` on the shortest path at `t` (empty if none was found).
    pub route: Vec<LinkId>,
}

/// What the topology tells in-network schemes about itself after [`ConstellationTopo::install`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopoInfo {
    /// Handovers with both an old and a new satellite, in time order.
    pub handovers: Vec<PlannedHandover>,
    /// All handovers the schedule has (including attachments from or to no satellite).
    pub handover_count: usize,
    /// Ground nodes are `0..grounds`; hosts follow; satellites start at `first_sat`.
    pub grounds: u32,
    /// First satellite node.
    pub first_sat: u32,
    /// Per ground node: its role.
    pub roles: Vec<Role>,
    /// Per ground node: a beam tag (user terminals: 1 + the index of its H3 cell among the terminals'
    /// distinct cells; others 0, a one-to-one link).
    pub beam_tags: Vec<u16>,
    /// Per link: the ground node at its far end when it is a satellite-to-ground link.
    pub downlink_ground: Vec<Option<u32>>,
    /// Per link: whether it is a terrestrial host link (outside the satellite network).
    pub terrestrial: Vec<bool>,
    /// SATGUARD §3.3 beam timeouts thd = 2·d(cell centre, satellite)/c of each terminal for its
    /// serving satellite, sampled every `step`: (ground, satellite) -> (first step index, samples).
    pub beam_timeouts: BTreeMap<(u32, u32), (usize, Vec<Duration>)>,
    /// Sampling interval of `beam_timeouts` (the routing step).
    pub step: Duration,
    /// Per link: a propagation delay to size per-hop timers and buffers by before the run moves the
    /// satellites (ISLs: their length at t = 0; ground links: the longest slant range the minimum
    /// elevation allows).
    pub delay_hint: Vec<Duration>,
    /// One-way delay of the longest ground link (slant range at the minimum elevation).
    pub max_gsl_delay: Duration,
    /// Per ground node: the satellite serving it at t = 0, if any.
    pub first_serving: Vec<Option<NodeId>>,
}

impl TopoInfo {
    /// The beam timeout of terminal `ground` served by satellite `sat` at `t` (the sample of the
    /// routing step containing `t`), if known.
    pub fn beam_timeout(&self, ground: u32, sat: u32, t: Instant) -> Option<Duration> {
        let (first, v) = self.beam_timeouts.get(&(ground, sat))?;
        let k = (t.as_nanos() / self.step.as_nanos().max(1)) as usize;
        v.get(k.checked_sub(*first)?.min(v.len().saturating_sub(1))).copied()
    }
}

/// The constellation topology.
#[derive(Clone, Debug)]
pub struct ConstellationTopo {
    /// The constellation.
    pub constellation: Arc<Constellation>,
    /// Ground nodes (nodes `0..G`).
    pub grounds: Vec<GroundNode>,
    /// Hosts (nodes `G..G+H`).
    pub hosts: Vec<HostSpec>,
    /// Routing step, attachment policy, interruption model, minimum elevation, seed (its duration is
    /// the run's).
    pub options: TimelineOptions,
    /// Capacity of each ground-satellite link direction (the uplink's, when `gsl_down_rate` is set).
    pub gsl_rate: Bps,
    /// Capacity of each satellite-to-ground direction, if not `gsl_rate`.
    pub gsl_down_rate: Option<Bps>,
    /// GSL capacity over each satellite pass (LEOTP's Starlink experiment), if not constant.
    pub gsl_pass: Option<GslPass>,
    /// Capacity of each ISL direction.
    pub isl_rate: Bps,
    /// Queue limit of every link direction.
    pub queue: QueueLimit,
    /// Loss on ground-satellite links (each direction its own instance).
    pub gsl_loss: LossSpec,
    /// Loss on ISLs.
    pub isl_loss: LossSpec,
    /// Measured access links of ground terminals, by ground node (missing or `None`: none).
    pub access: Vec<Option<GroundAccess>>,
}

/// A ground-satellite link's capacity over a pass (the time one satellite serves a ground node
/// without a handover): a parabola from `edge_fraction` of the nominal rate at the pass's ends to the
/// full rate mid-pass, held for `step` at a time and evaluated at the middle of each step, plus
/// `alternate` on even steps and minus it on odd ones (steps are counted from t = 0 of the run, so
/// the sign alternates each step whichever pass is on).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GslPass {
    /// Capacity at the pass's start and end as a fraction of the nominal rate, in (0, 1].
    pub edge_fraction: f64,
    /// Added on even steps and subtracted on odd ones; below `edge_fraction` times the smaller GSL
    /// rate.
    pub alternate: Bps,
    /// How long each capacity holds, 1 ms to 1 h.
    pub step: Duration,
}

impl GslPass {
    /// The capacity of a link of nominal rate `rate` during step `k` (time `[k step, (k+1) step)`) of
    /// a pass from `start_s` to `end_s`, seconds.
    pub fn rate(&self, rate: Bps, k: u64, start_s: f64, end_s: f64) -> Bps {
        let step_s = self.step.as_secs_f64();
        let (a, b) = ((k as f64 * step_s).max(start_s), ((k + 1) as f64 * step_s).min(end_s));
        let half = ((end_s - start_s) / 2.0).max(f64::MIN_POSITIVE);
        let x = (((a + b) / 2.0 - start_s) / half - 1.0).clamp(-1.0, 1.0);
        let fraction = self.edge_fraction + (1.0 - self.edge_fraction) * (1.0 - x * x);
        let wave = if k % 2 == 0 { self.alternate.0 as f64 } else { -(self.alternate.0 as f64) };
        Bps((rate.0 as f64 * fraction + wave).round().max(1.0) as u64)
    }
}

/// The instant `s` seconds into the run (times before the run's start are its start).
fn at_s(s: f64) -> Instant {
    Instant((s.max(0.0) * 1e9).round() as u64)
}

/// Problems with a constellation topology.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TopoError {
    /// The orbit engine refused the inputs.
    #[error("topology: {0}")]
    Orbit(String),
    /// A field is invalid.
    #[error("invalid topology.{field}: {reason}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A loss model is invalid.
    #[error("topology.{field}: {source}")]
    Loss {
        /// gsl_loss or isl_loss.
        field: &'static str,
        /// The model's error.
        source: LossError,
    },
}

impl From<OrbitError> for TopoError {
    fn from(e: OrbitError) -> Self {
        TopoError::Orbit(e.to_string())
    }
}

impl ConstellationTopo {
    /// Number of simulator nodes.
    pub fn node_count(&self) -> usize {
        self.grounds.len() + self.hosts.len() + self.constellation.len()
    }

    /// The ground node a node stands on: itself for a ground node, its ground for a host, none for a
    /// satellite.
    pub fn ground_of(&self, node: u32) -> Option<u32> {
        let g = self.grounds.len() as u32;
        if node < g {
            Some(node)
        } else {
            self.hosts.get((node - g) as usize).map(|h| h.ground)
        }
    }

    /// The simulator node of satellite `s`.
    pub fn sat_node(&self, s: u32) -> NodeId {
        NodeId((self.grounds.len() + self.hosts.len()) as u32 + s)
    }

    /// Names of all nodes in node order.
    pub fn node_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.grounds.iter().map(|g| g.name.clone()).collect();
        v.extend(self.hosts.iter().map(|h| h.name.clone()));
        v.extend(self.constellation.satellites().iter().map(|s| s.name.clone()));
        v
    }

    /// Checks the fields.
    pub fn validate(&self) -> Result<(), TopoError> {
        if self.grounds.is_empty() {
            return Err(TopoError::Invalid { field: "ground", reason: "needs at least one ground node".into() });
        }
        if self.options.policy.needs_peer() && self.grounds.len() != 2 {
            return Err(TopoError::Invalid {
                field: "policy",
                reason: format!(
                    "best-path and path-aware attach a pair of places jointly, so they need exactly 2 ground \
                     places (found {}); more places need a per-terminal policy (global-schedule with \
                     highest-elevation or nearest, or nearest)",
                    self.grounds.len()
                ),
            });
        }
        for (field, r) in [("gsl_rate_bps", self.gsl_rate), ("isl_rate_bps", self.isl_rate)] {
            if r.0 == 0 {
                return Err(TopoError::Invalid { field, reason: "must be > 0".into() });
            }
        }
        if self.gsl_down_rate.is_some_and(|r| r.0 == 0) {
            return Err(TopoError::Invalid { field: "gsl_downlink_rate_bps", reason: "must be > 0".into() });
        }
        if let Some(p) = &self.gsl_pass {
            if !(p.edge_fraction > 0.0 && p.edge_fraction <= 1.0) {
                return Err(TopoError::Invalid {
                    field: "gsl_pass.edge_fraction",
                    reason: format!("{} must be in (0, 1]", p.edge_fraction),
                });
            }
            if !(1_000_000..=3_600_000_000_000).contains(&p.step.as_nanos()) {
                return Err(TopoError::Invalid {
                    field: "gsl_pass.step_s",
                    reason: format!("{} must be in [0.001, 3600]", p.step.as_secs_f64()),
                });
            }
            let low = self.gsl_rate.0.min(self.gsl_down_rate.unwrap_or(self.gsl_rate).0) as f64 * p.edge_fraction;
            if p.alternate.0 as f64 >= low {
                return Err(TopoError::Invalid {
                    field: "gsl_pass.alternate_bps",
                    reason: format!(
                        "{} must be below edge_fraction x the smaller GSL rate ({low:.0} bit/s), or a pass's \
                         capacity would reach zero",
                        p.alternate.0
                    ),
                });
            }
        }
        for (i, h) in self.hosts.iter().enumerate() {
            if h.ground as usize >= self.grounds.len() || h.rate.0 == 0 {
                return Err(TopoError::Invalid {
                    field: "hosts",
                    reason: format!("hosts[{i}] ({}) needs an existing ground node and a rate > 0", h.name),
                });
            }
        }
        self.gsl_loss.validate().map_err(|source| TopoError::Loss { field: "gsl_loss", source })?;
        self.isl_loss.validate().map_err(|source| TopoError::Loss { field: "isl_loss", source })?;
        GroundAccess::check_all(&self.access, self.grounds.len(), self.gsl_pass.is_some())
            .map_err(|reason| TopoError::Invalid { field: "access", reason })?;
        self.options.steps()?;
        Ok(())
    }

    /// Builds the links in `sim` (which must have `node_count()` nodes), schedules the handovers and
    /// installs the routing driver for the flow ends `endpoints` (node ids). Returns what in-network
    /// schemes need to know (the connectivity cache as links, link roles, beam timeouts).
    pub fn install(&self, sim: &mut impl NetBuilder, endpoints: &[u32]) -> Result<TopoInfo, TopoError> {
        self.install_with(sim, endpoints, &[])
    }

    /// [`ConstellationTopo::install`], with next hops also towards every satellite that serves one
    /// of the ground nodes `serving_of` during the run (in-network proxies on ingress satellites are
    /// addressed there: M-PEP).
    pub fn install_with(
        &self,
        sim: &mut impl NetBuilder,
        endpoints: &[u32],
        serving_of: &[u32],
    ) -> Result<TopoInfo, TopoError> {
        self.validate()?;
        let c = &self.constellation;
        let (g_count, h_count) = (self.grounds.len(), self.hosts.len());
        let (slots, handovers) = if self.options.policy.needs_peer() {
            // A pair attached jointly (validated: two places): the path timeline's connectivity cache.
            let tl = path_timeline(c, &self.grounds[0], &self.grounds[1], &self.options)?;
            (tl.slots, tl.handovers)
        } else {
            attachment_schedule(c, &self.grounds, &self.options)?
        };
        let loss = |spec: &LossSpec, field: &'static str| -> Result<_, TopoError> {
            Ok(if *spec == LossSpec::None {
                None
            } else {
                Some(spec.build().map_err(|source| TopoError::Loss { field, source })?)
            })
        };
        let mut isl_links = Vec::with_capacity(c.isls().len());
        for l in c.isls() {
            let (a, b) = (self.sat_node(l.a), self.sat_node(l.b));
            let ab = sim.add_link(a, b, self.isl_rate, Duration::ZERO, self.queue);
            let ba = sim.add_link(b, a, self.isl_rate, Duration::ZERO, self.queue);
            for id in [ab, ba] {
                if let Some(m) = loss(&self.isl_loss, "isl_loss")? {
                    sim.set_loss(id, m);
                }
            }
            isl_links.push((ab, ba));
        }
        // Every ground link any slot uses, created once: (uplink, downlink); down unless in use at t = 0.
        let mut gsl: BTreeMap<(u32, u32), (LinkId, LinkId)> = BTreeMap::new();
        let mut per_ground: Vec<Vec<Slot>> = vec![Vec::new(); g_count];
        for s in &slots {
            per_ground[s.node as usize].push(s.clone());
            if let std::collections::btree_map::Entry::Vacant(e) = gsl.entry((s.node, s.sat)) {
                let (g, sat) = (NodeId(s.node), self.sat_node(s.sat));
                let up = sim.add_link(g, sat, self.gsl_rate, Duration::ZERO, self.queue);
                let down = sim.add_link(sat, g, self.gsl_down_rate(), Duration::ZERO, self.queue);
                for id in [up, down] {
                    if let Some(m) = loss(&self.gsl_loss, "gsl_loss")? {
                        sim.set_loss(id, m);
                    }
                    sim.set_initial_state(id, s.start_s <= 0.0);
                }
                e.insert((up, down));
            }
        }
        for v in &mut per_ground {
            v.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        }
        for h in &handovers {
            let g = h.node;
            let mut now = Vec::new();
            if let Some(&(up, down)) = h.from.and_then(|s| gsl.get(&(g, s))) {
                now.extend([Control::State { link: up, up: false }, Control::State { link: down, up: false }]);
            }
            let new = h.to.and_then(|s| gsl.get(&(g, s))).copied();
            if let Some((up, down)) = new {
                now.extend([Control::State { link: up, up: false }, Control::State { link: down, up: false }]);
            }
            // Scheduled first, so that with a zero interruption the link still ends up up.
            sim.schedule_controls(at_s(h.t_s), now);
            if let Some((up, down)) = new {
                let back = vec![Control::State { link: up, up: true }, Control::State { link: down, up: true }];
                sim.schedule_controls(at_s(h.t_s) + Duration::from_secs_f64(h.interruption_s), back);
            }
        }
        if let Some(p) = &self.gsl_pass {
            self.schedule_pass_rates(sim, p, &per_ground, &gsl);
        }
        for (g, a) in self.access.iter().enumerate() {
            if let (Some(a), Some(slots)) = (a, per_ground.get(g)) {
                a.schedule_rates(sim, g as u32, slots, &gsl);
            }
        }
        // Hosts: a terrestrial link pair to their ground node, routed statically.
        let mut host_links = Vec::with_capacity(h_count);
        for (i, h) in self.hosts.iter().enumerate() {
            let node = NodeId((g_count + i) as u32);
            let up = sim.add_link(node, NodeId(h.ground), h.rate, h.delay, self.queue);
            let down = sim.add_link(NodeId(h.ground), node, h.rate, h.delay, self.queue);
            host_links.push((up, down));
        }
        // Destinations: the flow ends, routed at every step, and the satellites that serve the
        // proxied ground nodes, routed lazily (`Driver::lazy_dests`): a proxy is on one of them for
        // a slot or two of a long run, and the others would cost a routing tree per step each.
        let mut dests: Vec<(u32, bool)> = endpoints.iter().map(|&e| (e, false)).collect();
        for &g in serving_of {
            let slots = per_ground.get(g as usize).map_or(&[][..], Vec::as_slice);
            dests.extend(slots.iter().map(|s| (self.sat_node(s.sat).0, true)));
        }
        dests.sort_unstable();
        dests.dedup_by_key(|d| d.0);
        let (dests, lazy): (Vec<u32>, Vec<bool>) = dests.into_iter().unzip();
        let info = self.topo_info(sim, &per_ground, &handovers, &gsl, &isl_links, &host_links)?;
        let driver = ConstellationDriver {
            c: Arc::clone(c),
            grounds: self.grounds.iter().map(GroundNode::ecef).collect(),
            host_ground: self.hosts.iter().map(|h| h.ground).collect(),
            host_links,
            base: (g_count + h_count) as u32,
            step: Duration::from_secs_f64(self.options.step_s),
            steps: self.options.steps()?,
            k: 0,
            graph: SnapshotGraph::new(c),
            dj: Dijkstra::default(),
            pos: Vec::new(),
            per_ground,
            cursor: vec![0; g_count],
            serving: vec![None; g_count],
            isl_links,
            isl_up: vec![true; c.isls().len()],
            isl_delay: vec![Duration(u64::MAX); c.isls().len()],
            access: self.access.clone(),
            gsl,
            dests,
            lazy,
            last: Vec::new(),
            last_pred: Vec::new(),
            column: Vec::new(),
            error: None,
        };
        sim.set_driver(Box::new(driver), Instant::ZERO);
        Ok(info)
    }

    /// The satellite-to-ground capacity.
    pub fn gsl_down_rate(&self) -> Bps {
        self.gsl_down_rate.unwrap_or(self.gsl_rate)
    }

    /// Schedules each GSL's capacity over its passes: a pass is a run of slots of one ground node on
    /// one satellite with no gap between them (a handover to the same satellite is no new pass).
    fn schedule_pass_rates(
        &self,
        sim: &mut impl NetBuilder,
        p: &GslPass,
        per_ground: &[Vec<Slot>],
        gsl: &BTreeMap<(u32, u32), (LinkId, LinkId)>,
    ) {
        let step_ns = p.step.as_nanos().max(1);
        let end_ns = at_s(self.options.duration_s).as_nanos();
        for (g, slots) in per_ground.iter().enumerate() {
            let mut i = 0;
            while i < slots.len() {
                let (sat, start_s) = (slots[i].sat, slots[i].start_s);
                let mut end_s = slots[i].end_s;
                while i + 1 < slots.len() && slots[i + 1].sat == sat && (slots[i + 1].start_s - end_s).abs() < 1e-6 {
                    i += 1;
                    end_s = slots[i].end_s;
                }
                i += 1;
                let Some(&(up, down)) = gsl.get(&(g as u32, sat)) else { continue };
                let first = at_s(start_s).as_nanos();
                let last = at_s(end_s).as_nanos().min(end_ns);
                let mut k = first / step_ns;
                while k * step_ns < last {
                    let at = Instant((k * step_ns).max(first));
                    sim.schedule_controls(
                        at,
                        vec![
                            Control::Rate { link: up, rate: p.rate(self.gsl_rate, k, start_s, end_s) },
                            Control::Rate { link: down, rate: p.rate(self.gsl_down_rate(), k, start_s, end_s) },
                        ],
                    );
                    k += 1;
                }
            }
        }
    }

    /// The connectivity cache as simulator links, link roles and beam timeouts (see [`TopoInfo`]).
    fn topo_info(
        &self,
        sim: &impl NetBuilder,
        per_ground: &[Vec<Slot>],
        handovers: &[leoguard_orbit::attach::Handover],
        gsl: &BTreeMap<(u32, u32), (LinkId, LinkId)>,
        isl_links: &[(LinkId, LinkId)],
        host_links: &[(LinkId, LinkId)],
    ) -> Result<TopoInfo, TopoError> {
        let c = &self.constellation;
        let g_count = self.grounds.len() as u32;
        let first_sat = self.sat_node(0).0;
        let n_links = sim.link_count();
        let mut info = TopoInfo {
            first_serving: per_ground
                .iter()
                .map(|v| v.iter().find(|s| s.start_s <= 0.0 && 0.0 < s.end_s).map(|s| self.sat_node(s.sat)))
                .collect(),
            handover_count: handovers.len(),
            grounds: g_count,
            first_sat,
            roles: self.grounds.iter().map(|g| g.role).collect(),
            downlink_ground: vec![None; n_links],
            terrestrial: vec![false; n_links],
            step: Duration::from_secs_f64(self.options.step_s),
            ..Default::default()
        };
        for (&(g, _), &(_, down)) in gsl {
            info.downlink_ground[down.0 as usize] = Some(g);
        }
        let top = c.shell_altitudes_m()?.into_iter().fold(0.0, f64::max);
        let gsl_m = leoguard_orbit::geo::max_gsl_length_m(top, self.options.min_elevation_deg);
        info.max_gsl_delay = Duration::from_secs_f64(light_delay_s(gsl_m));
        info.delay_hint = (0..n_links).map(|i| sim.link_delay(LinkId(i as u32))).collect();
        for &(up, down) in gsl.values() {
            info.delay_hint[up.0 as usize] = info.max_gsl_delay;
            info.delay_hint[down.0 as usize] = info.max_gsl_delay;
        }
        let mut pos0 = Vec::new();
        c.positions_into(0.0, &mut pos0)?;
        for (l, &(ab, ba)) in c.isls().iter().zip(isl_links) {
            let d = Duration::from_secs_f64(light_delay_s(distance(pos0[l.a as usize], pos0[l.b as usize])));
            info.delay_hint[ab.0 as usize] = d;
            info.delay_hint[ba.0 as usize] = d;
        }
        for &(up, down) in host_links {
            info.terrestrial[up.0 as usize] = true;
            info.terrestrial[down.0 as usize] = true;
        }
        // Beam tags: terminals in the same H3 cell share a beam.
        let grid = leoguard_orbit::beams::CellGrid::new(leoguard_orbit::beams::DEFAULT_RESOLUTION)?;
        let mut cells: Vec<u64> = Vec::new();
        let mut centres: Vec<Option<Vec3>> = Vec::with_capacity(self.grounds.len());
        for g in &self.grounds {
            if g.role != Role::Terminal {
                info.beam_tags.push(0);
                centres.push(None);
                continue;
            }
            let cell = grid.cell_of(g.pos.lat_deg, g.pos.lon_deg)?;
            let k = cells.iter().position(|&x| x == cell).unwrap_or_else(|| {
                cells.push(cell);
                cells.len() - 1
            });
            info.beam_tags.push(u16::try_from(k + 1).unwrap_or(u16::MAX));
            centres.push(Some(leoguard_orbit::beams::CellGrid::center(cell)?.to_ecef()));
        }
        let isl_of = |graph: &SnapshotGraph, v: u32, w: u32| -> Option<LinkId> {
            graph.neighbours(v).iter().find(|x| x.0 == w).map(|&(_, k)| {
                let (ab, ba) = isl_links[k as usize];
                if c.isls()[k as usize].a == v {
                    ab
                } else {
                    ba
                }
            })
        };
        // Migration routes: the shortest ISL path from the old to the new satellite at the handover.
        let mut graph = SnapshotGraph::new(c);
        let mut dj = Dijkstra::default();
        let mut pos = Vec::new();
        let mut path = Vec::new();
        for h in handovers {
            let (Some(from), Some(to)) = (h.from, h.to) else { continue };
            let (Some(&(_, old_down)), Some(&(_, new_down))) = (gsl.get(&(h.node, from)), gsl.get(&(h.node, to)))
            else {
                continue;
            };
            c.positions_into(h.t_s, &mut pos)?;
            graph.update(c, &pos);
            dj.run(&graph, &[(from, 0.0)]);
            let mut route = Vec::new();
            if dj.dist[to as usize].is_finite() {
                dj.path_into(to, &mut path);
                route = path.windows(2).filter_map(|w| isl_of(&graph, w[0], w[1])).collect();
                if route.len() + 1 != path.len() {
                    route.clear();
                }
            }
            info.handovers.push(PlannedHandover {
                t: at_s(h.t_s),
                ground: NodeId(h.node),
                from: self.sat_node(from),
                to: self.sat_node(to),
                old_down,
                new_down,
                route,
            });
        }
        info.handovers.sort_by_key(|h| (h.t, h.ground));
        // Beam timeouts of every terminal's serving satellite at every routing step.
        if centres.iter().any(Option::is_some) {
            let steps = self.options.steps()?;
            for k in 0..steps {
                let t = k as f64 * self.options.step_s;
                let mut have_pos = false;
                for (g, centre) in centres.iter().enumerate() {
                    let Some(centre) = centre else { continue };
                    let Some(slot) = per_ground[g].iter().find(|s| s.start_s <= t + 1e-9 && t < s.end_s) else {
                        continue;
                    };
                    if !have_pos {
                        c.positions_into(t, &mut pos)?;
                        have_pos = true;
                    }
                    let thd = Duration::from_secs_f64(2.0 * light_delay_s(distance(*centre, pos[slot.sat as usize])));
                    let e = info.beam_timeouts.entry((g as u32, slot.sat)).or_insert((k, Vec::new()));
                    // Steps between the first sample and this one (the same satellite serving again
                    // later) repeat the last value.
                    while e.0 + e.1.len() < k {
                        let last = e.1.last().copied().unwrap_or(thd);
                        e.1.push(last);
                    }
                    e.1.push(thd);
                }
            }
        }
        Ok(info)
    }
}
