//! LinkGuardian hooks on simulated chains: random loss, tail loss, a link outage, untouched traffic.

use crate::engine::LinkId;
use crate::schemes::linkguardian::*;

use crate::engine::{NodeId, QueueLimit};
use crate::loss::{DropList, LossSpec};
use crate::sim::{chain, AgentId, CbrSource, Sim, Sink};
use leoguard_core::{Bps, Duration, Instant};
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;

const HOPS: usize = 3;

/// The link back along each link of `sim`.
fn reverse_links(sim: &Sim) -> Vec<Option<LinkId>> {
    let ends: BTreeMap<(NodeId, NodeId), LinkId> =
        sim.net.links.iter().enumerate().map(|(i, l)| ((l.from, l.to), LinkId(i as u32))).collect();
    sim.net.links.iter().map(|l| ends.get(&(l.to, l.from)).copied()).collect()
}

/// A `HOPS`-hop chain of 100 Mbit/s, 5 ms links, CBR from node 0 to the last node (1000 B every
/// `interval_us`), LinkGuardian on every node when `opts` is given.
struct Setup {
    sim: Sim,
    fwd: Vec<LinkId>,
    hooks: Vec<AgentId>,
    sink: AgentId,
}

fn setup(seed: u64, tc: u8, count: u64, interval_us: u64, opts: Option<LinkGuardianOptions>) -> Setup {
    let (mut sim, fwd) = chain(HOPS, Bps::mbps(100), Duration::from_millis(5), QueueLimit::Packets(1000), seed);
    sim.attach(
        NodeId(0),
        Box::new(CbrSource {
            flow: 0,
            dst: NodeId(HOPS as u32),
            size: 1000,
            interval: Duration::from_micros(interval_us),
            count,
            sent: 0,
            start: Instant::ZERO,
            tc,
        }),
    );
    let sink = sim.attach(NodeId(HOPS as u32), Box::<Sink>::default());
    let mut hooks = Vec::new();
    if let Some(o) = opts {
        let reverse = Arc::new(reverse_links(&sim));
        let links = Arc::new(LgLinkParams::table(&sim.net.links));
        for n in 0..=HOPS {
            let h = LinkGuardianHook::new(o, Arc::clone(&reverse), Arc::clone(&links)).unwrap();
            hooks.push(sim.attach_hook(NodeId(n as u32), Box::new(h)));
        }
    }
    Setup { sim, fwd, hooks, sink }
}

impl Setup {
    fn lossy(mut self, p: f64) -> Self {
        for l in 0..self.sim.net.links.len() {
            self.sim.link_mut(LinkId(l as u32)).set_loss(LossSpec::Bernoulli { p }.build().unwrap());
        }
        self
    }

    fn run(mut self, secs: u64) -> Self {
        self.sim.run(Instant(secs * 1_000_000_000));
        self
    }

    fn received(&self) -> Vec<u64> {
        let s = self.sim.agent_by_id(self.sink).and_then(|a| a.as_any().downcast_ref::<Sink>()).unwrap();
        s.received.iter().map(|r| r.0).collect()
    }

    fn hook(&self, i: usize) -> &LinkGuardianHook {
        self.sim.agent_by_id(self.hooks[i]).and_then(|a| a.as_any().downcast_ref()).unwrap()
    }

    fn stats(&self) -> LinkGuardianStats {
        let mut t = LinkGuardianStats::default();
        for i in 0..self.hooks.len() {
            t += self.hook(i).stats;
        }
        t
    }
}

fn lost(got: &[u64], count: u64) -> u64 {
    count - got.iter().copied().collect::<BTreeSet<_>>().len() as u64
}

fn assert_once(got: &[u64]) {
    let unique: BTreeSet<u64> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "a packet was delivered twice");
}

#[test]
fn random_loss_is_recovered_hop_by_hop_and_nothing_is_delivered_twice() {
    const N: u64 = 5_000;
    // 3 % loss on every link, both ways (data, copies, dummies and ACKs alike).
    let bare = setup(11, TC_DELAY_SENSITIVE, N, 1000, None).lossy(0.03).run(7);
    let unprotected = lost(&bare.received(), N);
    assert!(unprotected > 300, "about 8.7 % of {N} lost without protection, got {unprotected}");
    for ordered in [true, false] {
        let opts = LinkGuardianOptions { ordered, ..Default::default() };
        let g = setup(11, TC_DELAY_SENSITIVE, N, 1000, Some(opts)).lossy(0.03).run(7);
        let got = g.received();
        assert_once(&got);
        if ordered {
            assert!(got.windows(2).all(|w| w[0] < w[1]), "ordered mode on every hop delivers in order");
        }
        let l = lost(&got, N);
        let st = g.stats();
        assert!(l * 20 <= unprotected, "ordered={ordered}: {l} lost vs {unprotected} unprotected, {st:?}");
        assert!(st.protected >= N * HOPS as u64 * 9 / 10);
        // Every loss costs a round of two copies; dummies follow idle gaps; one ACK per arrival.
        assert!(st.retransmissions >= 2 * 300 && st.retransmissions % 2 == 0, "{st:?}");
        assert!(st.recovered >= 300 && st.dummies > 0 && st.duplicates > 0, "{st:?}");
        assert!(st.acks_sent >= st.protected * 9 / 10 && st.ack_bytes == st.acks_sent * 56);
        assert_eq!(st.given_up(), 0, "{st:?}");
    }
}

#[test]
fn a_lost_tail_is_found_by_dummies() {
    // One hop. Case 1: a single packet, dropped: the link never gets busy, the virtual transmitter
    // still says when it would have drained. Case 2: the last of a back-to-back burst of 10.
    for (count, drop) in [(1u64, 0u64), (10, 9)] {
        let (mut sim, fwd) = chain(1, Bps::mbps(100), Duration::from_millis(5), QueueLimit::Packets(100), 1);
        sim.link_mut(fwd[0]).set_loss(Box::new(DropList::new(vec![drop]).unwrap()));
        sim.attach(
            NodeId(0),
            Box::new(CbrSource {
                flow: 0,
                dst: NodeId(1),
                size: 1000,
                interval: Duration::from_micros(10),
                count,
                sent: 0,
                start: Instant::ZERO,
                tc: TC_DELAY_SENSITIVE,
            }),
        );
        let sink = sim.attach(NodeId(1), Box::<Sink>::default());
        let reverse = Arc::new(reverse_links(&sim));
        let links = Arc::new(LgLinkParams::table(&sim.net.links));
        let mut hooks = Vec::new();
        for n in 0..2 {
            let h = LinkGuardianHook::new(LinkGuardianOptions::default(), Arc::clone(&reverse), Arc::clone(&links));
            hooks.push(sim.attach_hook(NodeId(n), Box::new(h.unwrap())));
        }
        sim.run(Instant(1_000_000_000));
        let got: Vec<u64> = sim
            .agent_by_id(sink)
            .and_then(|a| a.as_any().downcast_ref::<Sink>())
            .unwrap()
            .received
            .iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(got, (0..count).collect::<Vec<_>>(), "count {count}");
        let st = sim.agent_by_id(hooks[0]).and_then(|a| a.as_any().downcast_ref::<LinkGuardianHook>()).unwrap().stats;
        assert_eq!((st.protected, st.retransmissions, st.recovered), (count, 2, 1), "{st:?}");
        assert!(st.dummies >= 2 && st.idle_checks > 0, "{st:?}");
        assert_eq!(st.given_up(), 0);
    }
}

#[test]
fn a_link_outage_loses_what_linkguardian_buffered() {
    // The middle link is down from 100 ms to 200 ms; no random loss. 1000 B at 100 Mbit/s take
    // 80.64 us with the option, so a packet sent at t crosses the middle link in
    // (t + 5.08 ms, t + 10.16 ms]: at 100 ms packets 90..=94 are on it and lost with it, and
    // LinkGuardian, which buffered them, discards its copies instead of sending them when the link
    // returns. Packets reaching node 1 before 200 ms (sent before 194.92 ms) meet the dead link.
    let mut g = setup(3, TC_DELAY_SENSITIVE, 400, 1000, Some(LinkGuardianOptions::default()));
    let mid = g.fwd[1];
    g.sim.schedule_link_state(Instant(100_000_000), mid, false);
    g.sim.schedule_link_state(Instant(200_000_000), mid, true);
    let g = g.run(2);
    let got = g.received();
    assert_once(&got);
    let missing: Vec<u64> = (0..400).filter(|s| !got.contains(s)).collect();
    assert_eq!(missing, (90..=194).collect::<Vec<_>>());
    let at_mid = g.hook(1).stats;
    // Copies of 85..=94 were unacknowledged at 100 ms (an ACK takes 10.16 ms + 4.5 us to return).
    assert_eq!(at_mid.given_up_link_change, 10, "{at_mid:?}");
    assert_eq!(at_mid.given_up(), 10);
    assert!(at_mid.stale_acks > 0, "ACKs of the old numbering still on the way back are ignored");
    assert_eq!(g.stats().retransmissions, 0, "nothing to recover on clean links");
}

#[test]
fn unmarked_traffic_passes_untouched() {
    const N: u64 = 2_000;
    let bare = setup(5, 0, N, 1000, None).lossy(0.03).run(4);
    let g = setup(5, 0, N, 1000, Some(LinkGuardianOptions::default())).lossy(0.03).run(4);
    assert_eq!(g.received(), bare.received(), "same losses, same deliveries");
    assert!(lost(&g.received(), N) > 100);
    let st = g.stats();
    assert_eq!((st.protected, st.retransmissions, st.dummies, st.acks_sent), (0, 0, 0, 0));
    assert!(st.unprotected >= N * 9 / 10 * HOPS as u64);
    for l in &g.sim.net.links {
        assert_eq!(l.stats.delivered_bytes, l.stats.delivered * 1000, "no header, no control packets");
    }
    // process_all protects the same unmarked traffic.
    let opts = LinkGuardianOptions { process_all: true, ..Default::default() };
    let all = setup(5, 0, N, 1000, Some(opts)).lossy(0.03).run(4);
    assert!(all.stats().protected >= N * HOPS as u64 * 9 / 10);
    assert!(lost(&all.received(), N) * 20 <= lost(&bare.received(), N));
}

#[test]
fn shared_links_use_the_fixed_timer_and_no_dummies() {
    const N: u64 = 3_000;
    let bare = setup(7, TC_DELAY_SENSITIVE, N, 1000, None).lossy(0.03).run(5);
    let opts =
        LinkGuardianOptions { shared_links_fixed_timeout: Some(Duration::from_millis(30)), ..Default::default() };
    let mut g = setup(7, TC_DELAY_SENSITIVE, N, 1000, None).lossy(0.03);
    let mut table = LgLinkParams::table(&g.sim.net.links);
    for l in &mut table {
        l.shared = true;
    }
    let (reverse, links) = (Arc::new(reverse_links(&g.sim)), Arc::new(table));
    for n in 0..=HOPS {
        let h = LinkGuardianHook::new(opts, Arc::clone(&reverse), Arc::clone(&links)).unwrap();
        g.hooks.push(g.sim.attach_hook(NodeId(n as u32), Box::new(h)));
    }
    let g = g.run(5);
    let got = g.received();
    assert_once(&got);
    let st = g.stats();
    assert_eq!(st.dummies, 0, "{st:?}");
    assert!(st.retransmissions > 0 && st.timer_runs > 0);
    assert!(lost(&got, N) * 20 <= lost(&bare.received(), N), "{} vs {}", lost(&got, N), lost(&bare.received(), N));
}

#[test]
fn a_link_that_starts_down_is_not_protected_until_it_comes_up() {
    // The middle link is created down (as a constellation creates ground links not yet in use; the
    // engine reports no state change for it) and comes up at 200 ms. Packets routed onto it before
    // then are lost with it; they must not be stamped, or the receiver waits out the hole they leave
    // (`hole_timeout`, about 80 ms here) before releasing anything sent after the link came up.
    let mut g = setup(17, TC_DELAY_SENSITIVE, 400, 1000, None);
    let mid = g.fwd[1];
    g.sim.link_mut(mid).up = false;
    g.sim.schedule_link_state(Instant(200_000_000), mid, true);
    let (reverse, links) = (Arc::new(reverse_links(&g.sim)), Arc::new(LgLinkParams::table(&g.sim.net.links)));
    for n in 0..=HOPS {
        let h = LinkGuardianHook::new(LinkGuardianOptions::default(), Arc::clone(&reverse), Arc::clone(&links));
        g.hooks.push(g.sim.attach_hook(NodeId(n as u32), Box::new(h.unwrap())));
    }
    let g = g.run(2);
    let st = g.stats();
    assert_eq!((st.given_up(), st.holes_skipped), (0, 0), "{st:?}");
    let s = g.sim.agent_by_id(g.sink).and_then(|a| a.as_any().downcast_ref::<Sink>()).unwrap();
    let late: Vec<u64> = s
        .received
        .iter()
        .filter(|r| r.2.saturating_duration_since(r.1) > Duration::from_millis(20))
        .map(|r| r.0)
        .collect();
    assert!(late.is_empty(), "held behind a hole: {late:?}");
    let missing: Vec<u64> = (0..400).filter(|x| !s.received.iter().any(|r| r.0 == *x)).collect();
    assert_eq!(missing, (0..195).collect::<Vec<_>>(), "lost on the down link only");
}

#[test]
fn links_to_nodes_without_linkguardian_are_not_protected() {
    // The last node runs no hook (a host behind a ground station). Protecting its link would leave
    // every copy unacknowledged (given up for lack of feedback) behind dummies nobody answers.
    const N: u64 = 2_000;
    for guarded in [true, false] {
        let mut g = setup(13, TC_DELAY_SENSITIVE, N, 1000, None);
        let mut table = LgLinkParams::table(&g.sim.net.links);
        let net_links = &g.sim.net.links;
        for (i, l) in table.iter_mut().enumerate() {
            l.guarded = guarded || ((net_links[i].from.0 as usize) < HOPS && (net_links[i].to.0 as usize) < HOPS);
        }
        let (reverse, links) = (Arc::new(reverse_links(&g.sim)), Arc::new(table));
        for n in 0..HOPS {
            let h = LinkGuardianHook::new(LinkGuardianOptions::default(), Arc::clone(&reverse), Arc::clone(&links));
            g.hooks.push(g.sim.attach_hook(NodeId(n as u32), Box::new(h.unwrap())));
        }
        let g = g.run(3);
        assert_eq!(lost(&g.received(), N), 0, "guarded={guarded}");
        let st = g.stats();
        if guarded {
            assert!(st.given_up_no_feedback > N / 2, "the failure this guards against: {st:?}");
        } else {
            assert_eq!((st.given_up(), st.protected), (0, N * (HOPS as u64 - 1)), "{st:?}");
            let to_host = g.fwd[HOPS - 1];
            let l = &g.sim.net.links[to_host.0 as usize];
            assert_eq!(l.stats.delivered_bytes, N * 1000, "no header, no dummies towards the host");
        }
    }
}

/// Sustained load near line rate (regression: LinkGuardian gave up, probed and acknowledged far
/// more than random loss warrants once links were fast and queues deep).
mod high_rate {
    use super::*;
    use crate::tcp_agent::{TcpSink, TcpSource};
    use leoguard_proto::cc;
    use leoguard_proto::tcp::{TcpConfig, TcpReceiver, TcpSender};

    const HOPS: usize = 3;
    const SECS: u64 = 4;

    struct Run {
        sim: Sim,
        src: AgentId,
        probe: AgentId,
        hooks: Vec<AgentId>,
    }

    /// `HOPS` links of 1 Gbit/s, 3 ms and 4 MB queues with 1.5 % Bernoulli loss both ways; a CUBIC
    /// bulk flow (it fills the first queue) and a 100 Mbit/s CBR stream of 1250 B packets from
    /// node 0 to the last node, all delay-sensitive. `shared`: every link is a user link (fixed
    /// timer, SATGUARD §3.3).
    fn run(lg: bool, shared: bool) -> Run {
        let (mut sim, _) = chain(HOPS, Bps::gbps(1), Duration::from_millis(3), QueueLimit::Bytes(4_000_000), 9);
        for l in 0..sim.net.links.len() {
            sim.link_mut(LinkId(l as u32)).set_loss(LossSpec::Bernoulli { p: 0.015 }.build().unwrap());
        }
        let cfg = TcpConfig::default();
        let tx = TcpSender::new(cfg, cc::build("cubic", u64::from(cfg.mss), cfg.init_cwnd_segments).unwrap(), None);
        let mut src = TcpSource::new(1, NodeId(HOPS as u32), tx, Duration::from_millis(100));
        src.tc = TC_DELAY_SENSITIVE;
        let src = sim.attach_flow(NodeId(0), 1, Box::new(src));
        let mut sink = TcpSink::new(1, NodeId(0), TcpReceiver::new(cfg), false);
        sink.tc = TC_DELAY_SENSITIVE;
        sim.attach_flow(NodeId(HOPS as u32), 1, Box::new(sink));
        let cbr = CbrSource {
            flow: 0,
            dst: NodeId(HOPS as u32),
            size: 1250,
            interval: Duration::from_micros(100),
            count: SECS * 10_000,
            sent: 0,
            start: Instant::ZERO,
            tc: TC_DELAY_SENSITIVE,
        };
        sim.attach_flow(NodeId(0), 0, Box::new(cbr));
        let probe = sim.attach_flow(NodeId(HOPS as u32), 0, Box::<Sink>::default());
        let mut hooks = Vec::new();
        if lg {
            let reverse = Arc::new(reverse_links(&sim));
            let mut table = LgLinkParams::table(&sim.net.links);
            for l in &mut table {
                l.shared = shared;
            }
            let links = Arc::new(table);
            // The farthest user's round trip plus 0.5 ms, as the constellation scenarios size it.
            let opts = LinkGuardianOptions {
                shared_links_fixed_timeout: Some(Duration::from_micros(6_500)),
                ..Default::default()
            };
            for n in 0..=HOPS {
                let h = LinkGuardianHook::new(opts, Arc::clone(&reverse), Arc::clone(&links)).unwrap();
                hooks.push(sim.attach_hook(NodeId(n as u32), Box::new(h)));
            }
        }
        sim.run(Instant(SECS * 1_000_000_000));
        Run { sim, src, probe, hooks }
    }

    impl Run {
        fn stats(&self) -> LinkGuardianStats {
            let mut t = LinkGuardianStats::default();
            for &h in &self.hooks {
                t += self.sim.agent_by_id(h).and_then(|a| a.as_any().downcast_ref::<LinkGuardianHook>()).unwrap().stats;
            }
            t
        }

        fn tcp(&self) -> &TcpSource {
            self.sim.agent_by_id(self.src).and_then(|a| a.as_any().downcast_ref()).unwrap()
        }

        /// CBR packets that never arrived, of those sent in the first `SECS - 1` seconds.
        fn probe_lost(&self) -> u64 {
            let s = self.sim.agent_by_id(self.probe).and_then(|a| a.as_any().downcast_ref::<Sink>()).unwrap();
            let got: BTreeSet<u64> = s.received.iter().map(|r| r.0).collect();
            (0..(SECS - 1) * 10_000).filter(|x| !got.contains(x)).count() as u64
        }

        /// Packets the links' loss models dropped (data, copies, ACKs, dummies).
        fn link_losses(&self) -> u64 {
            self.sim.net.links.iter().map(|l| l.stats.drops_loss).sum()
        }

        fn queue_drops(&self) -> u64 {
            self.sim.net.links.iter().map(|l| l.stats.drops_queue).sum()
        }
    }

    #[test]
    fn random_loss_at_line_rate_is_recovered_without_give_ups_or_probe_storms() {
        let bare = run(false, false);
        let unprotected = bare.probe_lost();
        assert!(unprotected > 1_000, "about 4.4 % of 30 000 probes lost without protection: {unprotected}");
        let g = run(true, false);
        let (st, losses, tcp) = (g.stats(), g.link_losses(), g.tcp());
        assert!(losses > 10_000, "the links dropped {losses}");
        // Ordinary random loss is recovered link by link: (almost) nothing is given up, not even
        // for a full Tx buffer at sustained line rate, and no receiver waits out a hole.
        assert!(st.given_up() * 1000 <= losses, "{} given up of {losses} losses: {st:?}", st.given_up());
        assert!(st.holes_skipped * 1000 <= losses, "{st:?}");
        assert!(g.probe_lost() * 50 <= unprotected, "{} probes lost vs {unprotected}", g.probe_lost());
        // TCP sees congestion drops only (the bulk flow fills the first 4 MB queue).
        assert!(tcp.tcp.stats.retransmissions <= g.queue_drops() + losses / 1000, "{:?}", tcp.tcp.stats);
        let mbps = tcp.tcp.stats.bytes_acked * 8 / SECS / 1_000_000;
        assert!(mbps >= 250, "CUBIC over protected links: {mbps} Mbit/s");
        // Each loss costs about one round of two copies.
        assert!(st.retransmissions <= 3 * losses, "{st:?}");
        // The links rarely go idle: dummy trains (one per link RTT at most) are a small fraction
        // of the data; a train per egress drain was about one dummy per data packet.
        assert!(st.dummies > 0 && st.dummies * 50 <= st.protected, "{st:?}");
        // One ACK per arrival (data or dummy), not more.
        assert!(st.acks_sent <= st.protected + st.dummies + st.retransmissions, "{st:?}");
        assert!(st.max_buffer_bytes > 0);
    }

    #[test]
    fn shared_links_time_out_only_lost_packets_at_line_rate() {
        let g = run(true, true);
        let (st, losses) = (g.stats(), g.link_losses());
        assert!(losses > 10_000, "the links dropped {losses}");
        assert_eq!((st.dummies, st.notifications_sent), (0, 0), "{st:?}");
        assert!(st.given_up() * 1000 <= losses && st.holes_skipped * 1000 <= losses, "{st:?}");
        // Per-packet ACKs: a round for every lost packet (or lost ACK), twice each. With the
        // cumulative ACK alone every packet received behind a hole timed out too (about one RTT of
        // packets per loss).
        assert!(st.retransmissions <= 3 * losses, "{} copies for {losses} losses: {st:?}", st.retransmissions);
        assert!(st.acks_sent <= st.protected + st.retransmissions, "{st:?}");
        let mbps = g.tcp().tcp.stats.bytes_acked * 8 / SECS / 1_000_000;
        assert!(mbps >= 200, "CUBIC over protected links: {mbps} Mbit/s");
    }
}
