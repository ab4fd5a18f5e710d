//! Issue 3 scenario (a): one TCP flow over a 9-hop chain of 100 Mbit/s, 2 ms links for 5 simulated
//! seconds. Prints packet-hops per second and the slowdown; asserts nothing (STYLE.md rule 14).

use leoguard_core::{Bps, Duration, Instant};
use leoguard_proto::cc;
use leoguard_proto::tcp::{TcpConfig, TcpReceiver, TcpSender};
use leoguard_sim::engine::{NodeId, QueueLimit};
use leoguard_sim::sim::chain;
use leoguard_sim::tcp_agent::{TcpSink, TcpSource};

fn main() {
    for name in ["newreno", "cubic", "bbr"] {
        let (mut sim, _) = chain(9, Bps::mbps(100), Duration::from_millis(2), QueueLimit::Bytes(2_000_000), 1);
        let cfg = TcpConfig::default();
        let tx = TcpSender::new(cfg, cc::build(name, u64::from(cfg.mss), 10).expect("registry name"), None);
        sim.attach(NodeId(0), Box::new(TcpSource::new(1, NodeId(9), tx, Duration::ZERO)));
        sim.attach(NodeId(9), Box::new(TcpSink::new(1, NodeId(0), TcpReceiver::new(cfg), false)));
        let t0 = std::time::Instant::now();
        sim.run(Instant(5_000_000_000));
        let wall = t0.elapsed().as_secs_f64();
        let hops: u64 = sim.net.links.iter().map(|l| l.stats.delivered).sum();
        let goodput =
            sim.agent(NodeId(9)).and_then(|a| a.as_any().downcast_ref::<TcpSink>()).map_or(0, |s| s.tcp.delivered);
        println!(
            "{{\"cc\": \"{name}\", \"packet_hops\": {hops}, \"wall_s\": {wall:.4}, \"sim_s\": 5.0, \"packet_hops_per_s\": {:.0}, \"slowdown\": {:.5}, \"goodput_mbps\": {:.2}}}",
            hops as f64 / wall,
            wall / 5.0,
            goodput as f64 * 8.0 / 5.0 / 1e6
        );
    }
}
