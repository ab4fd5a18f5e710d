//! Columns derived from a run's records for its result tables: one-way delays and their per-flow
//! percentiles, goodput per sampling interval, link utilisation, application delay, frame delays.
//!
//! These were polars expressions on the Python side; computed here, a run's tables can be written
//! without polars. Each follows the expression it replaces operation for operation (the same
//! integer subtraction, conversion to f64, then the same arithmetic in the same order), so the
//! values are the same to the last bit; `python/tests/test_tables.py` checks them against polars.
//! One of polars' ways is kept on purpose: polars 2.1 divides a column of two or more values read
//! from Parquet by a constant as a multiplication by the constant's reciprocal (`x * (1 / 1e6)`,
//! which can be one unit in the last place off the quotient), and a column of one value by true
//! division. Doing the same keeps every table equal to those earlier versions wrote. (polars is not
//! consistent about it: a frame made by concatenation may divide exactly; what is copied is what
//! the old code's frames, read from the engine's Parquet, got.)

/// `x / k` as polars computes it in a column of `rows` values (see above).
pub fn div_as_polars(x: f64, k: f64, rows: usize) -> f64 {
    if rows == 1 {
        x / k
    } else {
        x * (1.0 / k)
    }
}

use super::{AppDelayRow, LinkSeriesRow, PacketRow, SeriesRow};
use crate::webrtc::{percentile, FrameRow};
use std::collections::BTreeMap;

/// Each packet's one-way delay in milliseconds: `(received_ns - sent_ns) as f64 / 1e6`.
pub fn owd_ms(packets: &[PacketRow]) -> Vec<f64> {
    let n = packets.len();
    packets.iter().map(|p| div_as_polars(p.received_ns.wrapping_sub(p.sent_ns) as f64, 1e6, n)).collect()
}

/// Per flow, the 50th and 99th percentiles of `owd` (each packet's, in `packets`' order), linearly
/// interpolated between the two nearest ranks (`webrtc::percentile`, as numpy's and polars'
/// "linear": polars computes `fraction * (upper - lower) + lower`, the same value).
pub fn owd_percentiles(packets: &[PacketRow], owd: &[f64]) -> BTreeMap<u32, (f64, f64)> {
    let mut by_flow: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (p, &d) in packets.iter().zip(owd) {
        by_flow.entry(p.flow).or_default().push(d);
    }
    by_flow
        .into_iter()
        .map(|(flow, mut v)| {
            v.sort_by(f64::total_cmp);
            (flow, (percentile(&v, 50.0), percentile(&v, 99.0)))
        })
        .collect()
}

/// Goodput over each sampling interval from the bytes acknowledged: per flow, the change in
/// acknowledged bytes times 8 over the change in time (s); 0 on a flow's first sample.
pub fn goodput_bps(series: &[SeriesRow]) -> Vec<f64> {
    let n = series.len();
    let mut last: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    series
        .iter()
        .map(|s| {
            let prev = last.insert(s.flow, (s.t_ns, s.acked));
            prev.map_or(0.0, |(t, acked)| {
                let dt = div_as_polars(s.t_ns.wrapping_sub(t) as i64 as f64, 1e9, n);
                s.acked.wrapping_sub(acked) as i64 as f64 * 8.0 / dt
            })
        })
        .collect()
}

/// Each sample's link utilisation: bytes sent times 8 over what the rate carries in one sampling
/// interval of `interval_s` seconds; None (null) without link sampling (`interval_s` 0).
pub fn utilisation(samples: &[LinkSeriesRow], interval_s: f64) -> Vec<Option<f64>> {
    samples
        .iter()
        .map(|l| (interval_s > 0.0).then(|| l.bytes as f64 * 8.0 / (l.rate_bps as f64 * interval_s)))
        .collect()
}

/// Each sampled segment's application delay, ms (None: not delivered by the end).
pub fn app_delay_ms(rows: &[AppDelayRow]) -> Vec<Option<f64>> {
    let n = rows.len();
    rows.iter().map(|r| r.delivered_ns.map(|d| div_as_polars(d as f64 - r.sent_ns as f64, 1e6, n))).collect()
}

/// Nanosecond times in seconds (None stays None), as polars divides a column of them by 1e9.
pub fn seconds(ns: impl ExactSizeIterator<Item = Option<u64>>) -> Vec<Option<f64>> {
    let n = ns.len();
    ns.map(|t| t.map(|t| div_as_polars(t as f64, 1e9, n))).collect()
}

/// Each frame's capture-to-render delay and its time in the jitter buffer (complete to render), ms;
/// None where a frame was never rendered (or never complete).
pub fn frame_delays_ms(frames: &[FrameRow]) -> (Vec<Option<f64>>, Vec<Option<f64>>) {
    let n = frames.len();
    let ms =
        |later: Option<u64>, earlier: Option<u64>| Some(div_as_polars(later?.wrapping_sub(earlier?) as f64, 1e6, n));
    frames.iter().map(|f| (ms(f.render_ns, Some(f.capture_ns)), ms(f.render_ns, f.complete_ns))).unzip()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(flow: u32, sent_ns: u64, received_ns: u64) -> PacketRow {
        PacketRow { flow, seq: 0, sent_ns, received_ns, retransmission: false, hops: 1 }
    }

    #[test]
    fn percentiles_interpolate_between_the_nearest_ranks() {
        let one = |owd: &[f64]| {
            let p: Vec<_> = owd.iter().map(|&d| packet(0, 0, (d * 1e6) as u64)).collect();
            owd_percentiles(&p, owd)[&0]
        };
        // Ranks 1.5 and 2.97 of four; a single value is both.
        let (p50, p99) = one(&[8.0, 1.0, 4.0, 2.0]);
        assert_eq!(p50, 3.0);
        assert!((p99 - (4.0 + 4.0 * 0.97)).abs() < 1e-12, "{p99}");
        assert_eq!(one(&[5.0]), (5.0, 5.0));
    }

    #[test]
    fn percentiles_are_per_flow_and_ignore_packet_order() {
        let p = [packet(1, 0, 4_000_000), packet(0, 0, 1_000_000), packet(1, 10, 2_000_010), packet(0, 5, 3_000_005)];
        let owd = owd_ms(&p);
        assert_eq!(owd, [4.0, 1.0, 2.0, 3.0]);
        // 19.44 ms: the reciprocal's product, one unit in the last place below the quotient, in a
        // column of two; alone, the quotient.
        let two = [packet(0, 0, 19_440_000), packet(0, 0, 19_440_000)];
        assert_eq!(owd_ms(&two), [19.439999999999998; 2]);
        assert_eq!(owd_ms(&two[..1]), [19.44]);
        let q = owd_percentiles(&p, &owd);
        assert_eq!(q[&0].0, 2.0);
        assert_eq!(q[&1].0, 3.0);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn goodput_starts_at_zero_and_follows_each_flow() {
        let s =
            |flow, t_ns, acked| SeriesRow { flow, t_ns, cwnd: 0, in_flight: 0, srtt_ns: 0, acked, retransmissions: 0 };
        let rows = [s(0, 0, 0), s(1, 0, 100), s(0, 100_000_000, 1_000), s(1, 200_000_000, 100)];
        assert_eq!(goodput_bps(&rows), [0.0, 0.0, 8_000.0 / 0.1, 0.0]);
    }

    #[test]
    fn utilisation_is_null_without_sampling_and_delays_are_null_when_never_done() {
        let l = LinkSeriesRow {
            t_ns: 0,
            from: 0,
            to: 1,
            bytes: 1250,
            rate_bps: 1_000_000,
            queue_bytes: 0,
            drops: 0,
            up: true,
        };
        assert_eq!(utilisation(&[l], 0.1), [Some(0.1)]);
        assert_eq!(utilisation(&[l], 0.0), [None]);
        let a = [AppDelayRow { flow: 0, seq: 1, sent_ns: 1_000_000, delivered_ns: Some(3_500_000) }];
        assert_eq!(app_delay_ms(&a), [Some(2.5)]);
        assert_eq!(app_delay_ms(&[AppDelayRow { delivered_ns: None, ..a[0] }]), [None]);
        let f = FrameRow {
            flow: 0,
            frame: 0,
            key: true,
            size: 1,
            capture_ns: 1_000_000,
            complete_ns: Some(2_000_000),
            render_ns: Some(5_000_000),
        };
        assert_eq!(frame_delays_ms(&[f]), (vec![Some(4.0)], vec![Some(3.0)]));
        let never = FrameRow { complete_ns: None, render_ns: None, ..f };
        assert_eq!(frame_delays_ms(&[never]), (vec![None], vec![None]));
    }
}
