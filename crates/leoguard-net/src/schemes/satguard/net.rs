//! What every SATGUARD hook knows about the network it runs in, built once per run and shared: the
//! reverse of each link (HAcks go back on it), which links belong to the satellite network (only
//! those are processed), where packets leave it (the ground-side reorder buffer sits there, §3.4),
//! which links are one-to-many user downlinks and their beams (§3.3), and the connectivity cache of
//! planned handovers with the ISL routes buffers migrate over (§3.2).

use crate::link::{Link, LinkId, QueueLimit};
use crate::topo::constellation::{PlannedHandover, TopoInfo};
use leoguard_core::{Bps, Duration, Instant};
use leoguard_orbit::Role;
use std::collections::BTreeMap;

/// The network as SATGUARD's hooks see it.
#[derive(Debug, Default)]
pub struct SatguardNet {
    /// Per link: the link back along it.
    pub reverse: Vec<Option<LinkId>>,
    /// Per link: its capacity.
    pub rate: Vec<Bps>,
    /// Per link: the node it leaves.
    pub from: Vec<u32>,
    /// Per link: the node it reaches.
    pub to: Vec<u32>,
    /// Per link: whether it was up when the run started.
    pub initially_up: Vec<bool>,
    /// Per link: bytes its queue holds at most (packet limits counted at 1500 bytes a packet).
    pub queue_bytes: Vec<u64>,
    /// Per link: part of the satellite network (ISL or ground link), so processed.
    pub network: Vec<bool>,
    /// Per node: packets leave the satellite network here (empty: they leave at their destination).
    pub exit: Vec<bool>,
    /// The constellation's connectivity cache, link roles and beam timeouts (constellation runs).
    pub topo: Option<TopoInfo>,
    /// Per satellite node: indices into `topo.handovers` of the handovers it is the old satellite of.
    pub plans_from: BTreeMap<u32, Vec<usize>>,
}

impl SatguardNet {
    /// A network of plain links (chains, dumbbells, LEO paths): every link is processed and packets
    /// leave the network at their destination.
    pub fn generic<P: Copy>(links: &[Link<P>]) -> Self {
        let mut by_ends = BTreeMap::new();
        for (i, l) in links.iter().enumerate() {
            by_ends.entry((l.from, l.to)).or_insert(LinkId(i as u32));
        }
        SatguardNet {
            reverse: links.iter().map(|l| by_ends.get(&(l.to, l.from)).copied()).collect(),
            rate: links.iter().map(|l| l.rate).collect(),
            from: links.iter().map(|l| l.from.0).collect(),
            to: links.iter().map(|l| l.to.0).collect(),
            initially_up: links.iter().map(|l| l.up).collect(),
            queue_bytes: links
                .iter()
                .map(|l| match l.limit {
                    QueueLimit::Bytes(b) => b,
                    QueueLimit::Packets(n) => u64::from(n) * 1500,
                })
                .collect(),
            network: vec![true; links.len()],
            ..Default::default()
        }
    }

    /// A whole constellation: ISLs and ground links are processed (terrestrial host links are not),
    /// packets leave the satellite network at ground nodes.
    pub fn constellation<P: Copy>(links: &[Link<P>], nodes: usize, info: TopoInfo) -> Self {
        let mut plans_from: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, h) in info.handovers.iter().enumerate() {
            plans_from.entry(h.from.0).or_default().push(i);
        }
        SatguardNet {
            network: info.terrestrial.iter().map(|t| !t).collect(),
            exit: (0..nodes).map(|n| (n as u32) < info.grounds).collect(),
            topo: Some(info),
            plans_from,
            ..Self::generic(links)
        }
    }

    /// Whether a packet arriving at `node` for `dst` leaves the satellite network here.
    pub fn is_exit(&self, node: u32, dst: u32) -> bool {
        if self.exit.is_empty() {
            node == dst
        } else {
            self.exit.get(node as usize).copied().unwrap_or(false)
        }
    }

    /// Whether `link` is processed.
    pub fn is_network(&self, link: LinkId) -> bool {
        self.network.get(link.0 as usize).copied().unwrap_or(false)
    }

    /// For a one-to-many user downlink (satellite to user terminal): (terminal, beam tag).
    pub fn user_downlink(&self, link: LinkId) -> Option<(u32, u16)> {
        let t = self.topo.as_ref()?;
        let g = (*t.downlink_ground.get(link.0 as usize)?)?;
        (t.roles.get(g as usize) == Some(&Role::Terminal)).then(|| (g, t.beam_tags[g as usize]))
    }

    /// SATGUARD §3.3 thd = 2·d(cell centre, satellite)/c for the terminal `ground` served by
    /// satellite node `sat_node` at `t`.
    pub fn beam_timeout(&self, ground: u32, sat_node: u32, t: Instant) -> Option<Duration> {
        let topo = self.topo.as_ref()?;
        topo.beam_timeout(ground, sat_node.checked_sub(topo.first_sat)?, t)
    }

    /// A planned handover by index.
    pub fn plan(&self, i: usize) -> Option<&PlannedHandover> {
        self.topo.as_ref()?.handovers.get(i)
    }

    /// Whether `node` is a ground node of a constellation (the sender of an uplink stays in place).
    pub fn is_ground(&self, node: u32) -> bool {
        self.topo.as_ref().is_some_and(|t| node < t.grounds)
    }
}
