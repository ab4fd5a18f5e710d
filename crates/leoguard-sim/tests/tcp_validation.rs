//! Issue 3's TCP validation on the simulator: NewReno vs the Mathis formula, utilisation on a clean
//! chain, and BBR vs CUBIC under 1 % random loss (the behaviour REFERENCE.md reports for Linux).

use leoguard_core::{Bps, Duration, Instant};
use leoguard_proto::cc;
use leoguard_proto::tcp::{TcpConfig, TcpReceiver, TcpSender};
use leoguard_sim::engine::{NodeId, QueueLimit};
use leoguard_sim::loss::Bernoulli;
use leoguard_sim::sim::chain;
use leoguard_sim::tcp_agent::{TcpSink, TcpSource};

struct Run {
    goodput_bps: f64,
    mean_srtt_s: f64,
    retransmissions: u64,
    realised_loss: f64,
}

/// One bulk flow over a 9-hop chain of 100 Mbit/s, 2 ms links; Bernoulli loss `p` on the first
/// data-direction link. Goodput is measured after a `warmup`.
fn bulk(cc_name: &str, p: f64, secs: u64, warmup: u64, seed: u64) -> Run {
    let (mut sim, fwd) = chain(9, Bps::mbps(100), Duration::from_millis(2), QueueLimit::Bytes(1_500_000), seed);
    if p > 0.0 {
        sim.link_mut(fwd[0]).set_loss(Box::new(Bernoulli::new(p).expect("p in [0, 1]")));
    }
    let cfg = TcpConfig::default();
    let tx = TcpSender::new(cfg, cc::build(cc_name, u64::from(cfg.mss), 10).expect("registry name"), None);
    sim.attach(NodeId(0), Box::new(TcpSource::new(1, NodeId(9), tx, Duration::from_millis(100))));
    sim.attach(NodeId(9), Box::new(TcpSink::new(1, NodeId(0), TcpReceiver::new(cfg), false)));
    sim.run(Instant(secs * 1_000_000_000));
    let src: &TcpSource = sim.agent(NodeId(0)).and_then(|a| a.as_any().downcast_ref()).expect("source attached");
    let s0 = src.samples.iter().find(|s| s.t >= Instant(warmup * 1_000_000_000)).expect("run longer than warm-up");
    let s1 = src.samples.last().expect("sampled");
    let goodput_bps = (s1.acked - s0.acked) as f64 * 8.0 / (s1.t - s0.t).as_secs_f64();
    let rtts: Vec<f64> = src.samples.iter().filter(|s| s.t >= s0.t).map(|s| s.srtt.as_secs_f64()).collect();
    let st = sim.net.links[fwd[0].0 as usize].stats;
    Run {
        goodput_bps,
        mean_srtt_s: rtts.iter().sum::<f64>() / rtts.len() as f64,
        retransmissions: src.tcp.stats.retransmissions,
        realised_loss: st.drops_loss as f64 / st.offered.max(1) as f64,
    }
}

/// Payload capacity of a 100 Mbit/s link carrying 1448-byte segments in 1500-byte packets.
const PAYLOAD_CAPACITY: f64 = 100e6 * 1448.0 / 1500.0;

#[test]
fn newreno_follows_the_mathis_formula() {
    for (p, secs) in [(0.001, 300), (0.01, 120)] {
        let r = bulk("newreno", p, secs, 10, 42);
        let mathis = 1448.0 * 8.0 / r.mean_srtt_s * (1.5 / p).sqrt();
        let ratio = r.goodput_bps / mathis;
        println!(
            "p={p}: goodput {:.2} Mbit/s, Mathis {:.2} Mbit/s (ratio {ratio:.3}), srtt {:.1} ms, realised loss {:.4}, {} retx",
            r.goodput_bps / 1e6,
            mathis / 1e6,
            r.mean_srtt_s * 1e3,
            r.realised_loss,
            r.retransmissions
        );
        assert!((r.realised_loss - p).abs() < 0.25 * p, "realised loss {}", r.realised_loss);
        assert!((0.7..=1.3).contains(&ratio), "p={p}: goodput/Mathis = {ratio:.3}");
    }
}

#[test]
fn cubic_and_bbr_fill_a_clean_chain() {
    for name in ["cubic", "bbr"] {
        let r = bulk(name, 0.0, 30, 10, 1);
        let util = r.goodput_bps / PAYLOAD_CAPACITY;
        println!("{name}: goodput {:.2} Mbit/s, utilisation {util:.3}", r.goodput_bps / 1e6);
        assert!(util >= 0.9, "{name} utilisation {util:.3}");
        assert!(util <= 1.001, "{name} goodput above the link's payload capacity: accounting error");
    }
}

#[test]
fn under_one_percent_loss_bbr_keeps_its_rate_and_cubic_collapses() {
    let bbr = bulk("bbr", 0.01, 30, 5, 9);
    let cubic = bulk("cubic", 0.01, 30, 5, 9);
    let (ub, uc) = (bbr.goodput_bps / PAYLOAD_CAPACITY, cubic.goodput_bps / PAYLOAD_CAPACITY);
    println!("1% loss: BBR {:.3} of capacity, CUBIC {:.3}", ub, uc);
    assert!(ub >= 0.8, "BBR keeps only {ub:.3}");
    assert!(uc <= 0.3, "CUBIC keeps {uc:.3}, expected far below BBR");
}
