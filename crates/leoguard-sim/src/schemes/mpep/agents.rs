//! The agents that host a [`Chain`] on the simulator's nodes (proxies, the source and the sink), the
//! chain's installation, its layout on a constellation (which nodes proxy a flow) and the migrations
//! planned from the connectivity cache, and the scheme's totals after a run.

use super::*;

/// The agent on one node of a chain: hands the node's packets and timers to the chain.
#[derive(Debug)]
pub struct ProxyAgent {
    chain: SharedChain,
    node: NodeId,
}

impl Agent for ProxyAgent {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        let c = lock(&self.chain);
        for (m, mig) in c.migrations.iter().enumerate() {
            if mig.from == self.node {
                ctx.timer(mig.t, TOKEN_MIG_START | m as u64);
            }
        }
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        lock(&self.chain).on_packet(self.node, p, ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        lock(&self.chain).on_timer(self.node, token, ctx);
    }
}

/// The source of a split flow: a [`TcpSource`] whose peer is the first proxy (followed when it
/// migrates; paused while it does, and rebuilt in slow start after).
#[derive(Debug)]
pub struct MpepSource {
    /// The sender.
    pub src: TcpSource,
    chain: SharedChain,
}

impl MpepSource {
    fn sync(&mut self) {
        let c = lock(&self.chain);
        self.src.paused = c.hops[0].paused;
        self.src.dst = c.hops[1].node;
    }
}

impl Agent for MpepSource {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        self.sync();
        self.src.start(ctx);
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        self.sync();
        self.src.on_packet(p, ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if token & TOKEN_SCHEMES == TOKEN_UP_RESUME {
            let (at, cc) = {
                let mut c = lock(&self.chain);
                c.hops[0].paused = false;
                c.restarts += 1;
                (c.downstream_rcv_nxt(0), c.fresh_cc())
            };
            self.sync();
            self.src.tcp.restart(cc, at);
            self.src.pump(ctx);
            return;
        }
        self.sync();
        self.src.on_timer(token, ctx);
    }
}

/// The receiver of a split flow: a [`TcpSink`] acknowledging to the last proxy wherever it is.
#[derive(Debug)]
pub struct MpepSink {
    /// The receiver.
    pub sink: TcpSink,
    chain: SharedChain,
}

impl Agent for MpepSink {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        self.sink.start(ctx);
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        let n = {
            let c = lock(&self.chain);
            c.hops[c.hops.len() - 2].node
        };
        self.sink.peer = n;
        self.sink.on_packet(p, ctx);
        lock(&self.chain).sink_rcv_nxt = self.sink.tcp.rcv_nxt();
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        self.sink.on_timer(token, ctx);
    }
}

/// Hosts a chain in `sim`: the source and sink wrappers at hop 0 and the last hop (bound to the
/// first and last segment's flow ids) and a proxy agent on every node its proxies occupy. Returns
/// the (source, sink) agents.
pub fn install_chain(
    sim: &mut Sim,
    chain: Chain,
    mut src: TcpSource,
    mut sink: TcpSink,
) -> (AgentId, AgentId, SharedChain) {
    let n = chain.hops.len();
    let (src_node, dst_node) = (chain.hops[0].node, chain.hops[n - 1].node);
    src.flow = chain.seg_flows[0];
    src.dst = chain.hops[1].node;
    src.header = chain.header;
    sink.flow = chain.seg_flows[n - 2];
    sink.peer = chain.hops[n - 2].node;
    let nodes = chain.proxy_nodes();
    let (seg_flows, tc) = (chain.seg_flows.clone(), src.tc);
    let shared = Arc::new(Mutex::new(chain));
    lock(&shared).tc = tc;
    let s = sim.attach_flow(src_node, seg_flows[0], Box::new(MpepSource { src, chain: Arc::clone(&shared) }));
    let d = sim.attach_flow(dst_node, seg_flows[n - 2], Box::new(MpepSink { sink, chain: Arc::clone(&shared) }));
    let mut agents = BTreeMap::new();
    for node in nodes {
        let a = ProxyAgent { chain: Arc::clone(&shared), node };
        // Data of segment k arrives at hop k + 1, ACKs of segment k at hop k: every proxy node
        // takes the segments that may reach a proxy (all but the source's ACKs and the sink's data).
        let id = sim.attach_flow(node, seg_flows[0], Box::new(a));
        for &f in &seg_flows[1..] {
            sim.bind_flow(id, node, f);
        }
        agents.insert(node, id);
    }
    {
        let mut c = lock(&shared);
        c.agents = agents;
        c.source_agent = Some(s);
    }
    (s, d, shared)
}

/// The hops of a flow from `src` to `dst` on a constellation (see the module documentation).
pub fn chain_hops(
    topo: &ConstellationTopo,
    info: &TopoInfo,
    opts: &MpepOptions,
    src: u32,
    dst: u32,
) -> Result<Vec<(HopRole, NodeId)>, MpepError> {
    let (Some(gs), Some(gd)) = (topo.ground_of(src), topo.ground_of(dst)) else {
        return Ok(vec![(HopRole::Source, NodeId(src)), (HopRole::Receiver, NodeId(dst))]);
    };
    let mut hops = vec![(HopRole::Source, NodeId(src))];
    if gs != gd {
        if src != gs {
            hops.push((HopRole::GroundProxy, NodeId(gs)));
        }
        for g in [gs, gd] {
            if opts.gateway_satellites || info.roles[g as usize] == Role::Terminal {
                let sat = info.first_serving.get(g as usize).copied().flatten().ok_or(MpepError::NoSatellite(g))?;
                hops.push((HopRole::SatelliteProxy { ground: g }, sat));
            }
        }
        if dst != gd {
            hops.push((HopRole::GroundProxy, NodeId(gd)));
        }
    }
    hops.push((HopRole::Receiver, NodeId(dst)));
    Ok(hops)
}

/// The ground nodes whose ingress satellites host proxies for flows between `ends` (routes towards
/// their serving satellites are needed).
pub fn proxied_grounds(topo: &ConstellationTopo, opts: &MpepOptions, ends: &[(u32, u32)]) -> Vec<u32> {
    let mut v = Vec::new();
    for &(src, dst) in ends {
        if let (Some(gs), Some(gd)) = (topo.ground_of(src), topo.ground_of(dst)) {
            if gs != gd {
                v.extend(
                    [gs, gd]
                        .into_iter()
                        .filter(|&g| opts.gateway_satellites || topo.grounds[g as usize].role == Role::Terminal),
                );
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The migrations of a chain's satellite proxies: each planned handover of their ground node, with
/// the propagation over the ISL route at the handover (the satellites' positions then; a handover
/// with no ISL route takes the straight line between the two satellites, a lower bound).
pub fn plan_migrations(
    topo: &ConstellationTopo,
    info: &TopoInfo,
    sim: &Sim,
    hops: &[(HopRole, NodeId)],
) -> Result<Vec<Migration>, crate::constellation::TopoError> {
    let mut out = Vec::new();
    let mut pos = Vec::new();
    let first = info.first_sat;
    for h in &info.handovers {
        for (k, &(role, _)) in hops.iter().enumerate() {
            if role != (HopRole::SatelliteProxy { ground: h.ground.0 }) {
                continue;
            }
            topo.constellation.positions_into(h.t.as_nanos() as f64 / 1e9, &mut pos)?;
            let sat = |n: NodeId| pos[(n.0 - first) as usize];
            let propagation = if h.route.is_empty() {
                Duration::from_secs_f64(light_delay_s(distance(sat(h.from), sat(h.to))))
            } else {
                let mut d = Duration::ZERO;
                for &l in &h.route {
                    let link = &sim.net.links[l.0 as usize];
                    d = d + Duration::from_secs_f64(light_delay_s(distance(sat(link.from), sat(link.to))));
                }
                d
            };
            out.push(Migration { t: h.t, hop: k, from: h.from, to: h.to, propagation, isl_rate: topo.isl_rate });
        }
    }
    Ok(out)
}

/// The source wrapped by M-PEP or a plain one.
pub fn source_of(a: &dyn Agent) -> Option<&TcpSource> {
    let any = a.as_any();
    any.downcast_ref::<TcpSource>().or_else(|| any.downcast_ref::<MpepSource>().map(|m| &m.src))
}

/// The sink wrapped by M-PEP or a plain one.
pub fn sink_of(a: &dyn Agent) -> Option<&TcpSink> {
    let any = a.as_any();
    any.downcast_ref::<TcpSink>().or_else(|| any.downcast_ref::<MpepSink>().map(|m| &m.sink))
}

/// Sums the counters and collects the migration records of `chains`.
pub fn totals(sim: &Sim, chains: &[(SharedChain, AgentId)]) -> (MpepStats, Vec<MigrationRecord>) {
    let mut s = MpepStats::default();
    let mut records = Vec::new();
    for (c, src) in chains {
        let retx = sim.agent_by_id(*src).and_then(source_of).map_or(0, |x| x.tcp.stats.retransmissions);
        let c = lock(c);
        c.add_stats(&mut s, retx);
        if c.counted {
            records.extend_from_slice(&c.records);
        }
    }
    finish_stats(&mut s);
    records.sort_by_key(|r| (r.t, r.flow));
    (s, records)
}

/// When the receiver's acknowledgement of a split flow's last byte reached its peer.
pub fn completed_at(c: &SharedChain) -> Option<Instant> {
    lock(c).completed_at
}
