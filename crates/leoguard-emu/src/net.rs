//! The emulated network as the topology code of leoguard-net builds it ([`NetBuilder`]): the same
//! links, loss models, routes, scheduled changes and constellation driver the simulator gets, held
//! for the data plane. Nothing here reads a clock.

use leoguard_core::{stream, Bps, Duration, Instant};
use leoguard_net::loss::LossModel;
use leoguard_net::routes::NextHops;
use leoguard_net::topo::{Control, Driver, NetBuilder};
use leoguard_net::{Link, LinkId, NodeId, QueueLimit, RateSchedule};

/// Routing steps apart by more than this are not interpolated between (a link reused much later).
pub const MAX_RAMP: Duration = Duration(1_000_000_000);

/// The network: links, next hops, and what changes when.
#[derive(Debug)]
pub struct EmuNet {
    /// Nodes (ids 0..nodes).
    pub nodes: usize,
    /// Links; the packet handle is the data plane's buffer slot.
    pub links: Vec<Link<u32>>,
    /// Next hops (leoguard-net's table, shared with the simulator).
    pub routes: NextHops,
    /// Scheduled control batches, in the order they were scheduled (applied by time, then order).
    pub scheduled: Vec<(Instant, Vec<Control>)>,
    /// The topology driver (constellations), first run at `.1`.
    pub driver: Option<(Box<dyn Driver>, Instant)>,
    seed: u64,
}

impl EmuNet {
    /// An empty network of `nodes` nodes; links get random streams from `seed` as in the simulator.
    pub fn new(nodes: usize, seed: u64) -> Self {
        EmuNet { nodes, links: Vec::new(), routes: NextHops::new(nodes), scheduled: Vec::new(), driver: None, seed }
    }

    /// Sets (or with `None` removes) `at`'s next hop towards `dst`.
    pub fn set_route(&mut self, at: NodeId, dst: NodeId, via: Option<LinkId>) {
        self.routes.set(at, dst, via);
    }

    /// The next hop of `at` towards `dst`.
    pub fn next_hop(&self, at: u32, dst: u32) -> Option<LinkId> {
        self.routes.get(NodeId(at), NodeId(dst))
    }

    /// The path a packet from `src` to `dst` takes now (links), if the routes reach it without a loop.
    pub fn path(&self, src: u32, dst: u32) -> Option<Vec<LinkId>> {
        let mut at = src;
        let mut out = Vec::new();
        while at != dst {
            let l = self.next_hop(at, dst)?;
            out.push(l);
            if out.len() > self.links.len() {
                return None;
            }
            at = self.links[l.0 as usize].to.0;
        }
        Some(out)
    }
}

impl NetBuilder for EmuNet {
    fn add_link(&mut self, from: NodeId, to: NodeId, rate: Bps, delay: Duration, limit: QueueLimit) -> LinkId {
        // The same stream label as the simulator's, so a link's loss draws match across engines.
        let label = format!("link/{}-{}/{}", from.0, to.0, self.links.len());
        self.links.push(Link::new(from, to, rate, delay, limit, stream(self.seed, &label)));
        LinkId((self.links.len() - 1) as u32)
    }

    fn set_loss(&mut self, link: LinkId, loss: Box<dyn LossModel>) {
        self.links[link.0 as usize].set_loss(loss);
    }

    fn set_rate_schedule(&mut self, link: LinkId, schedule: RateSchedule) {
        self.links[link.0 as usize].set_rate_schedule(Instant(0), Some(schedule));
    }

    fn set_initial_state(&mut self, link: LinkId, up: bool) {
        self.links[link.0 as usize].up = up;
    }

    fn link_delay(&self, link: LinkId) -> Duration {
        self.links[link.0 as usize].delay
    }

    fn link_count(&self) -> usize {
        self.links.len()
    }

    fn route(&mut self, at: NodeId, dst: NodeId, via: LinkId) {
        self.set_route(at, dst, Some(via));
    }

    fn schedule_controls(&mut self, at: Instant, actions: Vec<Control>) {
        self.scheduled.push((at, actions));
    }

    fn set_driver(&mut self, driver: Box<dyn Driver>, first: Instant) {
        self.driver = Some((driver, first));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leoguard_net::loss::LossSpec;
    use leoguard_net::topo::{LinkSpec, Topology};

    #[test]
    fn a_scenario_link_rate_schedule_reaches_the_emulated_links() {
        // The emulator builds its links with leoguard-net's topology code, as the simulator does: a
        // link's rate schedule takes effect in both directions of the emulated link.
        let wave = RateSchedule { period: Duration::from_secs(2), rates: vec![Bps::mbps(11), Bps::mbps(9)] };
        let link = |a, b, rate_schedule| LinkSpec {
            a,
            b,
            rate: Bps::mbps(20),
            delay: Duration::from_millis(20),
            queue: QueueLimit::Packets(100),
            loss_ab: LossSpec::None,
            loss_ba: LossSpec::None,
            rate_schedule,
        };
        let links = [link(0, 1, None), link(1, 2, Some(wave.clone()))];
        let topo = Topology { nodes: 3, links: &links, events: &[], routes: &[], leo: None, constellation: None };
        let mut net = EmuNet::new(3, 1);
        topo.build(&mut net, &[0, 2], &[]).expect("valid");
        let rates = |t_ms: u64| {
            net.links.iter().map(|l| l.rate_at(Instant(t_ms * 1_000_000)).0 / 1_000_000).collect::<Vec<_>>()
        };
        assert_eq!(rates(500), [20, 20, 11, 11]);
        assert_eq!(rates(1_500), [20, 20, 9, 9]);
        assert_eq!(net.links[2].rate_schedule(), Some(&wave));
        assert_eq!(net.links[2].peak_rate(), Bps::mbps(11));
    }

    #[test]
    fn a_constellation_gsl_pass_profile_reaches_the_emulated_links() {
        // The GSL capacity over a pass is scheduled by leoguard-net's constellation code as `Rate`
        // controls, which the data plane applies to the shared link model as the simulator does.
        use leoguard_net::topo::constellation::{ConstellationTopo, GslPass};
        use leoguard_orbit::{Constellation, GroundNode, InterruptionModel, Policy, Role, TimelineOptions};
        let pass = GslPass { edge_fraction: 0.5, alternate: Bps(500_000), step: Duration::from_secs(1) };
        let topo = ConstellationTopo {
            constellation: std::sync::Arc::new(Constellation::preset("starlink-shell1").unwrap()),
            grounds: vec![
                GroundNode::new("New York", 40.71, -74.01, 0.0, Role::Terminal).unwrap(),
                GroundNode::new("London", 51.51, -0.13, 0.0, Role::Terminal).unwrap(),
            ],
            hosts: vec![],
            options: TimelineOptions {
                duration_s: 40.0,
                step_s: 1.0,
                min_elevation_deg: 25.0,
                policy: Policy::starlink(leoguard_orbit::constellation::DEFAULT_EPOCH_UNIX_S),
                interruption: InterruptionModel::None,
                seed: 1,
            },
            gsl_rate: Bps::mbps(10),
            gsl_down_rate: Some(Bps::mbps(20)),
            gsl_pass: Some(pass),
            isl_rate: Bps::mbps(20),
            queue: QueueLimit::Packets(100),
            gsl_loss: LossSpec::None,
            isl_loss: LossSpec::None,
            access: Vec::new(),
        };
        let mut net = EmuNet::new(topo.node_count(), 1);
        let info = topo.install(&mut net, &[0, 1]).expect("valid");
        let h: Vec<_> = info.handovers.iter().filter(|h| h.ground == NodeId(1)).collect();
        assert!(h.len() >= 2, "London hands over twice in 40 s");
        let (start, end) = (h[0].t, h[1].t);
        let (start_s, end_s) = (start.as_nanos() as f64 / 1e9, end.as_nanos() as f64 / 1e9);
        // London's uplink and downlink on the satellite it takes at the first handover.
        let down = h[0].new_down;
        let up = LinkId(down.0 - 1);
        assert_eq!((net.links[up.0 as usize].from, net.links[up.0 as usize].to), (NodeId(1), h[0].to));
        // Apply the scheduled batches (by time, then order) up to each whole second of the pass.
        let mut batches = net.scheduled.clone();
        batches.sort_by_key(|b| b.0);
        for k in (start_s.ceil() as u64)..(end_s.floor() as u64) {
            for (_, actions) in batches.iter().filter(|b| b.0 <= Instant(k * 1_000_000_000)) {
                for a in actions {
                    if let Control::Rate { link, rate } = *a {
                        net.links[link.0 as usize].set_rate(Instant(k * 1_000_000_000), rate);
                    }
                }
            }
            let at = Instant(k * 1_000_000_000);
            assert_eq!(net.links[up.0 as usize].rate_at(at), pass.rate(Bps::mbps(10), k, start_s, end_s), "{k}");
            assert_eq!(net.links[down.0 as usize].rate_at(at), pass.rate(Bps::mbps(20), k, start_s, end_s), "{k}");
        }
    }
}
