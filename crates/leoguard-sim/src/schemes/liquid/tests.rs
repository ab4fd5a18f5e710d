use super::*;
use crate::engine::QueueLimit;
use crate::loss::LossSpec;
use crate::scenario::{run, FlowKind, FlowSpec, LinkSpec, Scenario, ScenarioError};
use leoguard_core::Bps;

/// 0 -- 1 -- 2: 20 Mbit/s access then 10 Mbit/s, 25 ms one way, with 1 % random loss each way on the
/// middle link; one bulk flow 0 -> 2 for `secs`.
fn lossy(cc: &str, liquid: Option<LiquidOptions>, secs: u64) -> Scenario {
    let link = |a, b, mbps, loss| LinkSpec {
        a,
        b,
        rate: Bps::mbps(mbps),
        delay: Duration::from_micros(12_500),
        queue: QueueLimit::Packets(200),
        loss_ab: LossSpec::Bernoulli { p: loss },
        loss_ba: LossSpec::Bernoulli { p: loss },
        rate_schedule: None,
    };
    Scenario {
        nodes: 3,
        links: vec![link(0, 1, 20, 0.0), link(1, 2, 10, 0.01)],
        flows: vec![FlowSpec {
            src: 0,
            dst: 2,
            kind: FlowKind::Tcp { cc: cc.into(), bytes: None, rate: None },
            start: Instant::ZERO,
            tc: 0,
        }],
        duration: Duration::from_secs(secs),
        seed: 5,
        sample_every: Duration::from_millis(100),
        liquid,
        ..Default::default()
    }
}

#[test]
fn tunnel_shields_cubic_from_random_loss() {
    let plain = run(&lossy("cubic", None, 10)).unwrap();
    let coded = run(&lossy("cubic", Some(LiquidOptions::default()), 10)).unwrap();
    let st = coded.liquid.unwrap();
    let (gp, gc) = (plain.flows[0].goodput_bps, coded.flows[0].goodput_bps);
    // Mathis: 1.22 · 1448 B / (55 ms · sqrt(0.01)) ~ 2.6 Mbit/s without coding; with coding the
    // 10 Mbit/s link less the tunnel's overhead (headers, padding of partial symbols, repair, and
    // the coded ACKs on the way back).
    assert!(gp < 4e6, "plain {gp}");
    // Linux's RACK marks a packet lost once a later one arrived min_rtt/4 earlier; the tunnel releases
    // a recovered packet when its block decodes, often later than that, so CUBIC resends it
    // spuriously (DSACKed; undone only when no new spurious resend lands in the same episode). The
    // gain is therefore less than the older DupThresh model showed (6.5 vs 2.9 Mbit/s): measured
    // 5.7 vs 2.9 (docs/liquid.md).
    assert!(gc > 1.5 * gp && gc > 5e6, "coded {gc} vs plain {gp} ({st:?})");
    let wire = st.datagram_bytes as f64 / st.bytes_in as f64;
    assert!((1.1..2.0).contains(&wire), "wire bytes per byte in: {wire}");
    // Retransmissions of data that was really missing (not DSACKed later) fall by far more than half
    // per packet sent: the tunnel repairs the losses, what TCP still resends was only late.
    let (pp, pc) = (plain.flows[0].packets_sent as f64, coded.flows[0].packets_sent as f64);
    let real = |f: &crate::scenario::FlowResult| f.retransmissions.saturating_sub(f.dsacks) as f64;
    let (rp, rc) = (real(&plain.flows[0]), real(&coded.flows[0]));
    assert!(rc / pc < 0.25 * (rp / pp), "real retransmissions {rp}/{pp} without vs {rc}/{pc} with");
    assert!(st.blocks_recovered > 50 && st.packets_recovered > 50, "{st:?}");
    // Packets leave the tunnel at most once; the few that do not were in blocks lost or still inside
    // the tunnel at the end (at most what entered over its longest entry-to-exit delay).
    assert!(st.packets_out <= st.packets_in);
    let inside = st.packets_in as f64 * st.delay_max_ns as f64 / 10e9;
    assert!(st.blocks_lost == 0 && ((st.packets_in - st.packets_out) as f64) < inside, "{st:?}");
    // Proactive repair is 10 % of each block's symbols, at least one per block.
    assert!(st.repair_symbols >= st.blocks && st.repair_symbols as f64 >= 0.1 * st.source_symbols as f64);
    assert!(st.feedback > 0 && st.delay_max_ns > 0);
    assert!(plain.liquid.is_none());
}

#[test]
fn lossless_tunnel_adds_only_block_delay() {
    let mut s = lossy("bbr", Some(LiquidOptions::default()), 3);
    s.links[1].loss_ab = LossSpec::None;
    s.links[1].loss_ba = LossSpec::None;
    let r = run(&s).unwrap();
    let st = r.liquid.unwrap();
    assert_eq!(st.blocks_recovered, 0);
    assert_eq!(st.blocks_lost, 0);
    assert_eq!(st.extra_repair, 0);
    assert_eq!(r.flows[0].retransmissions, 0);
    // Without loss a packet waits only for its symbol to fill or its block to close: at most the
    // 5 ms block time.
    assert!(st.added_delay_max_ns <= 5_000_000, "{st:?}");
    assert!(st.added_delay_sum_ns > 0);
    // Entry to exit adds the 25 ms path and its queue.
    assert!(st.delay_sum_ns / st.packets_out > 25_000_000);
}

#[test]
fn liquid_runs_alone_and_names_bad_fields() {
    let mut s = lossy("cubic", Some(LiquidOptions::default()), 1);
    s.tambur = Some(Default::default());
    let e = run(&s).unwrap_err();
    assert!(matches!(&e, ScenarioError::Invalid { field, .. } if field.starts_with("liquid")), "{e}");
    s.tambur = None;
    let cfg = LiquidConfig { repair_ratio: -1.0, ..Default::default() };
    s.liquid = Some(LiquidOptions { cfg, flows: None });
    assert!(matches!(run(&s).unwrap_err(), ScenarioError::Invalid { field, .. } if field == "liquid.repair_ratio"));
    s.liquid = Some(LiquidOptions { flows: Some(vec![3]), ..Default::default() });
    assert!(matches!(run(&s).unwrap_err(), ScenarioError::Invalid { field, .. } if field == "liquid.flows[0]"));
    s.liquid = Some(LiquidOptions { flows: Some(vec![]), ..Default::default() });
    assert!(matches!(run(&s).unwrap_err(), ScenarioError::Invalid { field, .. } if field == "liquid.flows"));
}

#[test]
fn tunnels_group_flows_by_end_pair() {
    let mut s = lossy("cubic", None, 1);
    let f = s.flows[0].clone();
    s.flows.push(FlowSpec { src: 2, dst: 0, ..f.clone() });
    s.flows.push(FlowSpec { src: 1, dst: 2, ..f.clone() });
    s.flows.push(FlowSpec { kind: FlowKind::Cbr { rate: Bps::mbps(1), size: 100 }, ..f });
    let t = tunnels(&s, &LiquidOptions::default());
    assert_eq!(
        t,
        vec![Tunnel { index: 0, ends: (0, 2), flows: vec![0, 1] }, Tunnel { index: 1, ends: (1, 2), flows: vec![2] }]
    );
    let only = tunnels(&s, &LiquidOptions { flows: Some(vec![2]), ..Default::default() });
    assert_eq!(only, vec![Tunnel { index: 0, ends: (1, 2), flows: vec![2] }]);
}
