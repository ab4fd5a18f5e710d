//! StarTCP's parts alone, on scripted time: configuration, detection, KDE prediction, the Sending
//! Controller, the lead policies and the weights file.

use super::kde::{densest_phase, next_at_phase};
use super::*;
use leoguard_core::{stream, Bps, Duration, Instant, RngStream};

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn at_ms(x: u64) -> Instant {
    Instant::ZERO + ms(x)
}

fn err(cfg: StartcpConfig) -> String {
    cfg.validate().expect_err("invalid").to_string()
}

// ---------------------------------------------------------------------------------------------
// Configuration

#[test]
fn the_default_configuration_is_valid_and_follows_the_paper() {
    let c = StartcpConfig::default();
    assert_eq!(c.validate(), Ok(()));
    assert_eq!((c.period, c.gap_threshold, c.probe_interval), (Duration::from_secs(15), ms(11), ms(1)));
    assert_eq!(c.base_cc, "bbr");
}

#[test]
fn impossible_configurations_give_field_named_errors() {
    let d = StartcpConfig::default();
    let cases: Vec<(StartcpConfig, &str)> = vec![
        (
            StartcpConfig { period: Duration::ZERO, ..d },
            "invalid startcp.period = 0.000ms: must be within 100 ms and 1 h",
        ),
        (StartcpConfig { period: Duration::from_secs(7200), ..d }, "invalid startcp.period = 7200000.000ms"),
        (StartcpConfig { gap_threshold: Duration::ZERO, ..d }, "invalid startcp.gap_threshold = 0.000ms"),
        (StartcpConfig { kde_bandwidth: Duration::ZERO, ..d }, "invalid startcp.kde_bandwidth = 0.000ms: must be > 0"),
        (StartcpConfig { kde_bandwidth: Duration::from_secs(5), ..d }, "invalid startcp.kde_bandwidth"),
        (StartcpConfig { min_events: 0, ..d }, "invalid startcp.min_events = 0"),
        (StartcpConfig { min_events: 40, ..d }, "invalid startcp.min_events = 40: must be within 1 and max_events"),
        (StartcpConfig { max_events: 0, ..d }, "invalid startcp.max_events = 0"),
        (
            StartcpConfig { probe_interval: Duration::ZERO, ..d },
            "invalid startcp.probe_interval = 0.000ms: must be > 0",
        ),
        (
            StartcpConfig { probe_interval: ms(11), ..d },
            "invalid startcp.probe_interval = 11.000ms: must be > 0 and below gap_threshold",
        ),
        (
            StartcpConfig { max_lead: Duration::from_secs(8), ..d },
            "invalid startcp.max_lead = 8000.000ms: must be at most half the period",
        ),
        (StartcpConfig { resume_timeout: Duration::ZERO, ..d }, "invalid startcp.resume_timeout = 0.000ms"),
        (StartcpConfig { lead_rttvar_gain: f64::NAN, ..d }, "invalid startcp.lead_rttvar_gain = NaN"),
        (StartcpConfig { lead_rttvar_gain: -1.0, ..d }, "invalid startcp.lead_rttvar_gain = -1"),
        (StartcpConfig { lead_margin: Duration::from_secs(2), ..d }, "invalid startcp.lead_margin"),
        (StartcpConfig { state_interval: Duration::ZERO, ..d }, "invalid startcp.state_interval"),
        (StartcpConfig { state_intervals: 0, ..d }, "invalid startcp.state_intervals = 0"),
        (StartcpConfig { base_cc: "startcp", ..d }, "invalid startcp.base_cc = startcp"),
        (StartcpConfig { base_cc: "vegas", ..d }, "invalid startcp.base_cc = vegas"),
    ];
    for (cfg, want) in cases {
        let got = err(cfg);
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
    // The constructors refuse them too.
    assert!(HandoverManager::new(StartcpConfig { period: Duration::ZERO, ..d }).is_err());
    assert!(SendingController::new(StartcpConfig { probe_interval: Duration::ZERO, ..d }).is_err());
}

#[test]
fn setting_fields_by_name_rejects_negative_and_non_finite_values() {
    let mut c = StartcpConfig::default();
    assert_eq!(c.set("max_lead", -0.1).unwrap_err().to_string(), "invalid startcp.max_lead = -0.1: must be >= 0");
    assert_eq!(
        c.set("period", f64::INFINITY).unwrap_err().to_string(),
        "invalid startcp.period = inf: must be a finite number"
    );
    assert_eq!(
        c.set("min_events", 2.5).unwrap_err().to_string(),
        "invalid startcp.min_events = 2.5: must be a whole number"
    );
    assert!(c.set("perod", 1.0).unwrap_err().to_string().starts_with("unknown field startcp.perod (known: period, "));
    c.set("period", 2.0).unwrap();
    c.set("probe_interval", 0.002).unwrap();
    c.set("min_events", 3.0).unwrap();
    assert_eq!((c.period, c.probe_interval, c.min_events), (Duration::from_secs(2), ms(2), 3));
    c.set("period", 0.0).unwrap();
    assert!(err(c).starts_with("invalid startcp.period = 0.000ms"));
    let mut c = StartcpConfig::default();
    c.set_base_cc("cubic").unwrap();
    assert_eq!(c.base_cc, "cubic");
    assert!(c.set_base_cc("startcp").unwrap_err().to_string().starts_with("invalid startcp.base_cc = startcp"));
}

#[test]
fn the_registry_builds_startcp_over_bbr_or_the_configured_base() {
    let cc = crate::cc::build("startcp", 1448, 10).unwrap();
    assert_eq!((cc.name(), cc.state()), ("startcp", "startup"));
    assert!(cc.pacing_rate().is_some(), "BBR underneath paces");
    let cubic = build_cc(&StartcpConfig { base_cc: "cubic", ..StartcpConfig::default() }, 1448, 10).unwrap();
    assert_eq!(cubic.name(), "startcp");
    assert_eq!(cubic.pacing_rate(), None, "CUBIC underneath does not pace");
}

// ---------------------------------------------------------------------------------------------
// Interruption detection

/// Arrivals every `step` from `from` to `to` (exclusive).
fn steady(m: &mut HandoverManager, from: Instant, to: Instant, step: Duration, kind: ArrivalKind) -> Instant {
    let mut t = from;
    while t < to {
        m.on_arrival(t, kind);
        t += step;
    }
    t
}

#[test]
fn a_gap_above_expected_plus_threshold_is_an_interruption_and_one_at_it_is_not() {
    for (gap, interrupted) in [(ms(12), false), (ms(12) + Duration(1), true)] {
        let mut m = HandoverManager::new(StartcpConfig::default()).unwrap();
        steady(&mut m, Instant::ZERO, at_ms(100), ms(1), ArrivalKind::Data);
        assert_eq!(m.expected_interarrival(), Some(ms(1)));
        // Last arrival at 99 ms; 1 ms expected + 11 ms threshold = 12 ms is still normal, one
        // nanosecond more is an interruption starting at the last arrival before the gap.
        m.on_arrival(at_ms(99) + gap, ArrivalKind::Data);
        let want =
            if interrupted { vec![Interruption { start: at_ms(99), duration: gap, stalled: false }] } else { vec![] };
        assert_eq!(m.interruptions(), &want[..]);
    }
}

#[test]
fn normal_jitter_bursts_and_slow_packets_are_no_interruption() {
    // 30 s of a flow at ~1000 packets/s with +-4 ms jitter on every packet, bursts of up to 4
    // packets at one instant and, every few seconds, a packet 8 ms late: never above 11 ms + expected.
    let mut rng: RngStream = stream(7, "startcp/jitter");
    let mut times = Vec::new();
    for k in 0..30_000u64 {
        let jitter = rng.uniform_range(-4.0, 4.0);
        let slow = if k % 3000 == 1500 { 8.0 } else { 0.0 };
        let t = (k as f64 + jitter + slow).max(0.0);
        for _ in 0..(1 + rng.next_u64() % 4) {
            times.push(Instant::from_secs_f64(t / 1e3));
        }
    }
    times.sort();
    let mut m = HandoverManager::new(StartcpConfig::default()).unwrap();
    for t in times {
        m.on_arrival(t, ArrivalKind::Data);
    }
    assert!(m.interruptions().is_empty(), "{:?}", &m.interruptions()[..m.interruptions().len().min(3)]);
    assert!(m.expected_interarrival().is_some_and(|e| e < ms(2)));
}

#[test]
fn an_interruption_of_a_probing_sender_raises_a_notice_until_data_returns() {
    let mut m = HandoverManager::new(StartcpConfig::default()).unwrap();
    let t = steady(&mut m, Instant::ZERO, at_ms(500), Duration::from_micros(300), ArrivalKind::Data);
    // The sender stalls: probes every 1 ms right after the data, then the link drops for 80 ms.
    let t = steady(&mut m, t, t + ms(20), ms(1), ArrivalKind::Probe);
    let last_probe = Instant(t.as_nanos() - ms(1).as_nanos());
    assert!(m.interruptions().is_empty() && !m.recovery_pending());
    let back = last_probe + ms(80);
    assert!(m.on_arrival(back, ArrivalKind::Probe), "the first probe after the interruption owes an ACK");
    assert_eq!(m.interruptions(), &[Interruption { start: last_probe, duration: ms(80), stalled: true }]);
    let sig = m.poll_signal(back).expect("a notice to send");
    assert!(sig.recovered);
    assert_eq!(m.poll_signal(back), None, "sent once by poll, then repeated on probes");
    // The notice is repeated on every further probe (it may have been lost) ...
    assert!(m.on_arrival(back + ms(1), ArrivalKind::Probe));
    assert!(m.signal(back + ms(1)).recovered);
    // ... until data shows the sender resumed.
    assert!(!m.on_arrival(back + ms(2), ArrivalKind::Data));
    assert!(!m.signal(back + ms(2)).recovered);
    assert_eq!(m.notices(), 1);
}

#[test]
fn an_idle_sender_that_starts_probing_raises_no_notice() {
    let mut m = HandoverManager::new(StartcpConfig::default()).unwrap();
    let t = steady(&mut m, Instant::ZERO, at_ms(200), ms(1), ArrivalKind::Data);
    // Idle for 3 s, then a stall begins: data, gap, probe. A gap it is; a recovery it is not.
    assert!(!m.on_arrival(t + Duration::from_secs(3), ArrivalKind::Probe));
    assert_eq!(m.interruptions().len(), 1);
    assert!(!m.interruptions()[0].stalled && !m.recovery_pending());
    assert_eq!(m.poll_signal(t + Duration::from_secs(3)), None);
}

// ---------------------------------------------------------------------------------------------
// KDE prediction

const T: Duration = Duration::from_secs(15);

#[test]
fn a_gap_right_after_an_interruption_shares_its_vote_and_the_longer_gap_gets_it() {
    // Handovers at 15, 30, 45 s (100 ms each), each followed 150 ms after its end by a 90 ms gap (a
    // sender blocked on a window of lost segments): the phase stays the handovers', and the
    // aftermath gaps, which would tie with them, are still recorded.
    let mut outages = Vec::new();
    for k in 1..=3u64 {
        let h = Instant::ZERO + Duration::from_secs(15 * k);
        outages.push((h, ms(100)));
        outages.push((h + ms(250), ms(90)));
    }
    let m = drive(StartcpConfig::default(), &outages, 47);
    assert_eq!(m.interruptions().len(), 6, "{:?}", m.interruptions());
    let phase = m.base_phase().expect("a phase after three handovers");
    assert!(phase_err(phase, Duration::ZERO) < ms(3), "{phase:?}");
    assert_eq!(m.peak().map(|p| p.support), Some(3));
    // A shorter gap first (a 30 ms hiccup 500 ms before each handover): the handover, longer, takes
    // the episode's vote.
    let mut early = Vec::new();
    for k in 1..=3u64 {
        let h = Instant::ZERO + Duration::from_secs(15 * k);
        early.push((Instant(h.as_nanos() - 500_000_000), ms(30)));
        early.push((h, ms(100)));
    }
    let m = drive(StartcpConfig::default(), &early, 47);
    assert!(phase_err(m.base_phase().expect("a phase"), Duration::ZERO) < ms(3));
    assert_eq!(m.peak().map(|p| p.support), Some(3));
    // Just past AFTERMATH, the second gap is a handover candidate again.
    let mut late = Vec::new();
    for k in 1..=3u64 {
        let h = Instant::ZERO + Duration::from_secs(15 * k);
        late.push((h, ms(100)));
        late.push((h + ms(100) + AFTERMATH + ms(10), ms(90)));
    }
    let m = drive(StartcpConfig::default(), &late, 47);
    assert_eq!(m.peak().map(|p| p.support), Some(3));
    assert_eq!(m.interruptions().len(), 6);
}

/// Circular distance between two phases modulo `T`.
fn phase_err(a: Duration, b: Duration) -> Duration {
    let d = a.as_nanos().abs_diff(b.as_nanos()) % T.as_nanos();
    Duration(d.min(T.as_nanos() - d))
}

/// Drives a manager with arrivals every 2 ms for `secs` seconds, silent during `outages`
/// (start, length); returns it.
fn drive(cfg: StartcpConfig, outages: &[(Instant, Duration)], secs: u64) -> HandoverManager {
    let mut m = HandoverManager::new(cfg).unwrap();
    let mut sorted = outages.to_vec();
    sorted.sort();
    let mut k = 0;
    let mut t = Instant::ZERO;
    let end = Instant::ZERO + Duration::from_secs(secs);
    while t < end {
        if let Some(&(s, len)) = sorted.get(k) {
            if t >= s {
                t = t.max(s + len);
                k += 1;
                continue;
            }
        }
        m.on_arrival(t, ArrivalKind::Data);
        t += ms(2);
    }
    m
}

/// Handover outages at `phase` every `T` for `n` periods, with start jitter of up to `noise_ms`
/// either way, skipping periods where `skip(k)`.
fn handovers(
    phase: Duration,
    n: u64,
    noise_ms: f64,
    skip: &dyn Fn(u64) -> bool,
    rng: &mut RngStream,
) -> Vec<(Instant, Duration)> {
    (0..n)
        .filter(|&k| !skip(k))
        .map(|k| {
            let jitter = rng.uniform_range(-noise_ms, noise_ms);
            let start = (k * T.as_nanos() + phase.as_nanos()) as f64 + jitter * 1e6;
            let len = ms(30 + rng.next_u64() % 170); // Fig 1b: 30-200 ms
            (Instant(start.max(0.0) as u64), len)
        })
        .collect()
}

#[test]
fn clean_periodic_interruptions_predict_the_next_handover_after_min_events() {
    let phase = Duration::from_millis(3200);
    let mut rng = stream(1, "startcp/clean");
    let outages = handovers(phase, 6, 0.0, &|_| false, &mut rng);
    // One handover seen: not yet a prediction (min_events = 2).
    let m = drive(StartcpConfig::default(), &outages[..1], 16);
    assert_eq!(m.interruptions().len(), 1);
    assert_eq!(m.predict(at_ms(16_000)), None);
    // Two: the phase, to the arrival grid (the start is the last arrival before the gap, <= 2 ms early).
    let m = drive(StartcpConfig::default(), &outages[..2], 31);
    let b = m.base_phase().expect("converged after min_events");
    assert!(phase_err(b, phase) <= ms(2), "{b:?}");
    let next = m.predict(at_ms(31_000)).unwrap();
    assert_eq!(next, Instant(2 * T.as_nanos()) + b, "the first phase instant after now");
    let m = drive(StartcpConfig::default(), &outages, 95);
    assert_eq!(m.interruptions().len(), 6);
    assert!(phase_err(m.base_phase().unwrap(), phase) <= ms(2));
    assert_eq!(m.predict(at_ms(95_000)), Some(Instant(7 * T.as_nanos()) + m.base_phase().unwrap()));
}

#[test]
fn noisy_missed_and_spurious_interruptions_still_find_the_phase() {
    let phase = Duration::from_millis(9_871);
    let mut rng = stream(2, "startcp/noisy");
    // 20 periods, +-20 ms jitter, every third handover missed, plus 10 spurious outages anywhere.
    let mut outages = handovers(phase, 20, 20.0, &|k| k % 3 == 1, &mut rng);
    for _ in 0..10 {
        let at = rng.uniform_range(0.0, 300.0);
        outages.push((Instant::from_secs_f64(at), ms(15 + rng.next_u64() % 100)));
    }
    let m = drive(StartcpConfig::default(), &outages, 305);
    assert!(m.interruptions().len() >= 18, "{}", m.interruptions().len());
    let b = m.base_phase().unwrap();
    assert!(phase_err(b, phase) <= ms(12), "phase {b:?} vs {phase:?}");
}

#[test]
fn unknown_phases_are_found_on_either_side_of_the_period_boundary() {
    for (i, phase_ms) in [5u64, 7_500, 14_990, 12_000].into_iter().enumerate() {
        let phase = ms(phase_ms);
        let mut rng = stream(10 + i as u64, "startcp/phase");
        let outages = handovers(phase, 8, 20.0, &|_| false, &mut rng);
        let m = drive(StartcpConfig::default(), &outages, 125);
        let b = m.base_phase().unwrap();
        assert!(phase_err(b, phase) <= ms(15), "phase {b:?} vs {phase:?}");
    }
}

#[test]
fn the_kde_peak_is_the_mode_between_samples_not_the_nearest_sample() {
    // Residues at 0, 10 and 20 ms: the density peaks at 10 ms; at the samples alone it would too,
    // so shift one: 0, 10, 24 ms peaks between 10 and 24, not on a sample.
    let p = densest_phase(&[at_ms(15_000), at_ms(30_010), at_ms(45_020)], T, ms(30)).unwrap();
    assert!(phase_err(p.phase, ms(10)) < Duration::from_micros(1), "{:?}", p.phase);
    assert_eq!(p.support, 3);
    let p = densest_phase(&[at_ms(15_000), at_ms(30_010), at_ms(45_024)], T, ms(30)).unwrap();
    assert!(p.phase > ms(10) && p.phase < ms(14), "{:?}", p.phase);
    // Across the boundary: -10 ms and +10 ms around 0 (two periods) peak at 0, not at 7.5 s.
    let p = densest_phase(&[at_ms(14_990), at_ms(30_010)], T, ms(30)).unwrap();
    assert!(phase_err(p.phase, Duration::ZERO) < Duration::from_micros(1), "{:?}", p.phase);
    assert_eq!(p.support, 2);
    assert_eq!(densest_phase(&[], T, ms(30)), None);
    assert_eq!(next_at_phase(at_ms(100), ms(100), T), at_ms(15_100), "strictly after now");
    assert_eq!(next_at_phase(at_ms(99), ms(100), T), at_ms(100));
}

#[test]
fn a_burst_of_gaps_in_one_period_casts_one_vote() {
    // Slow start's gaps one RTT (60 ms) apart: four of them in one period; two real handovers at 7.5 s.
    let burst = [at_ms(1_000), at_ms(1_060), at_ms(1_120), at_ms(1_180)];
    let real = [at_ms(22_500), at_ms(37_500)];
    let events: Vec<Instant> = burst.iter().chain(&real).copied().collect();
    let p = densest_phase(&events, T, ms(30)).unwrap();
    assert!(phase_err(p.phase, ms(7_500)) < Duration::from_micros(1), "{:?}", p.phase);
    assert_eq!(p.support, 2);
    let p = densest_phase(&burst, T, ms(30)).unwrap();
    assert_eq!(p.support, 1, "one period, one vote");
    assert!(p.density <= 1.0);
}

#[test]
fn min_events_counts_only_events_near_the_peak() {
    // Three interruptions at unrelated phases: no prediction however many there are.
    let cfg = StartcpConfig::default();
    let outages = [(at_ms(1_000), ms(50)), (at_ms(20_000), ms(50)), (at_ms(37_000), ms(50))];
    let m = drive(cfg, &outages, 40);
    assert_eq!(m.interruptions().len(), 3);
    assert_eq!(m.base_phase(), None);
    assert!(m.peak().is_some_and(|p| p.support == 1));
}

// ---------------------------------------------------------------------------------------------
// Sending Controller

fn snap(min_rtt_ms: u64) -> SenderSnapshot {
    SenderSnapshot { in_flight: 0, srtt: ms(min_rtt_ms), rttvar: ms(5), min_rtt: Some(ms(min_rtt_ms)) }
}

fn fixed(lead_ms: u64) -> SendingController {
    SendingController::with_policy(StartcpConfig::default(), Box::new(FixedLead(ms(lead_ms)))).unwrap()
}

#[test]
fn the_stall_begins_at_the_lead_probes_every_millisecond_and_resumes_on_the_notice() {
    let mut c = fixed(50);
    // ACK at 1 s says "handover 9.05 s after I sent this"; OWD = 40 ms / 2: handover at 10.03 s.
    let sig = Signal { next_handover: Some(ms(9_050)), recovered: false };
    assert_eq!(c.on_signal(at_ms(1_000), sig, &snap(40)), Transition::None);
    assert_eq!(c.next_handover(), Some(at_ms(10_030)));
    assert_eq!((c.stall_at(), c.poll_timeout()), (Some(at_ms(9_980)), Some(at_ms(9_980))));
    assert_eq!(c.update(at_ms(9_979)), Transition::None);
    assert!(!c.poll_probe(at_ms(9_979)));
    assert_eq!(c.update(at_ms(9_980)), Transition::Stalled);
    let mut probes = Vec::new();
    let mut t = at_ms(9_980);
    while t < at_ms(10_110) {
        c.update(t);
        if c.poll_probe(t) {
            probes.push(t);
        }
        assert!(c.poll_timeout().is_some_and(|d| d > t));
        t += Duration::from_micros(250);
    }
    assert_eq!(probes.len(), 130);
    assert!(probes.windows(2).all(|w| w[1] - w[0] == ms(1)), "a 1 ms cadence");
    assert_eq!(c.on_recovery_notice(at_ms(10_110)), Transition::Resumed(ResumeReason::Notice));
    assert!(!c.is_stalled() && !c.poll_probe(at_ms(10_111)));
    let r = c.records()[0];
    assert_eq!(
        r,
        HandoverRecord {
            predicted: at_ms(10_030),
            stall_start: at_ms(9_980),
            stall_end: Some(at_ms(10_110)),
            probes: 130,
            reason: Some(ResumeReason::Notice),
            lead: ms(50),
            state: r.state,
        }
    );
    assert_eq!(c.last_stall(), Some((at_ms(9_980), at_ms(10_110))));
    // The receiver, seeing the handover late, predicts the same one again: no second stall.
    c.on_prediction(at_ms(10_120), at_ms(10_125), &snap(40));
    assert_eq!(c.stall_at(), None);
    // The next period's is taken.
    c.on_prediction(at_ms(10_200), at_ms(25_030), &snap(40));
    assert_eq!(c.stall_at(), Some(at_ms(24_980)));
}

#[test]
fn without_a_notice_the_stall_ends_at_the_resume_timeout() {
    let mut c = fixed(50);
    c.on_prediction(at_ms(0), at_ms(1_000), &snap(40));
    assert_eq!(c.update(at_ms(950)), Transition::Stalled);
    assert!(c.poll_probe(at_ms(950)));
    // Resume 300 ms after the predicted handover.
    assert_eq!(c.poll_timeout(), Some(at_ms(951)));
    assert_eq!(c.update(at_ms(1_299)), Transition::None);
    assert_eq!(c.update(at_ms(1_300)), Transition::Resumed(ResumeReason::Timeout));
    assert_eq!(c.records()[0].reason, Some(ResumeReason::Timeout));
    assert_eq!(c.records()[0].probes, 1, "only polled once");
    assert_eq!(c.poll_timeout(), None);
    // A notice outside a stall changes nothing.
    assert_eq!(c.on_recovery_notice(at_ms(1_400)), Transition::None);
}

#[test]
fn a_handover_long_past_is_skipped_and_leads_are_clamped() {
    let mut c = fixed(5_000);
    c.on_prediction(at_ms(0), at_ms(10_000), &snap(40));
    assert_eq!(c.stall_at(), Some(at_ms(9_000)), "lead clamped to max_lead = 1 s");
    // Not polled until well after the handover and its resume timeout: no stall at all.
    assert_eq!(c.update(at_ms(10_400)), Transition::None);
    assert!(c.records().is_empty() && !c.is_stalled());
}

#[test]
fn the_heuristic_lead_is_the_drain_time_plus_the_margins() {
    let cfg = StartcpConfig { lead_rttvar_gain: 2.0, lead_margin: ms(3), ..StartcpConfig::default() };
    let mut h = HeuristicLead::new(&cfg);
    let s = LeadState {
        mean_rtt: ms(60),
        rtt_var_ms2: 4.0,
        ack_rate: Bps::mbps(30),
        owd: ms(25),
        time_to_handover: ms(900),
        in_flight: 500_000,
        delivery_rate: Some(Bps::mbps(40)),
        srtt: ms(60),
        rttvar: ms(5),
    };
    // 500 kB at 40 Mbit/s = 100 ms, + 2 x 5 ms + 3 ms.
    assert_eq!(h.lead(&s), ms(113));
    // Without a rate sample the ACK rate drains it: 500 kB at 30 Mbit/s = 133.33 ms.
    let d = h.lead(&LeadState { delivery_rate: None, ..s });
    assert_eq!(d, Duration(133_333_333) + ms(13));
    // Knowing nothing: max_lead.
    let none = LeadState { delivery_rate: None, ack_rate: Bps(0), srtt: Duration::ZERO, ..s };
    assert_eq!(h.lead(&none), cfg.max_lead);
    assert_eq!(s.features(), [60.0, 4.0, 30.0, 25.0, 900.0]);
    // Few bytes in flight (BBR's ProbeRTT: 4 packets drain in 1.2 ms): what is sent later than one
    // OWD before the handover is still on the path, so the lead is at least the OWD.
    assert_eq!(h.lead(&LeadState { in_flight: 4 * 1500, ..s }), ms(25 + 13));
}

#[test]
fn the_state_tracker_keeps_the_last_n_intervals() {
    let mut st = StateTracker::new(ms(100), 3);
    st.on_rtt(at_ms(10), ms(50));
    st.on_rtt(at_ms(150), ms(70));
    st.on_delivered(at_ms(150), 150_000, Some(Bps::mbps(20)));
    st.on_delivered(at_ms(250), 150_000, Some(Bps::mbps(10)));
    assert_eq!(st.rtt_stats(), Some((60.0, 100.0)));
    assert_eq!(st.ack_rate(), Bps::mbps(8), "300 kB over 300 ms");
    assert_eq!(st.max_delivery_rate(), Some(Bps::mbps(20)));
    // 400 ms on, the first interval (0-100 ms) has left the window, 100-200 ms is the oldest.
    st.on_delivered(at_ms(350), 0, None);
    assert_eq!(st.rtt_stats(), Some((70.0, 0.0)));
    st.on_delivered(at_ms(450), 0, None);
    assert_eq!(st.rtt_stats(), None);
    assert_eq!(st.max_delivery_rate(), Some(Bps::mbps(10)));
}

// ---------------------------------------------------------------------------------------------
// Learnt policy and its weights file

/// A 5-32-16-1 tanh/relu/linear actor with weights drawn from `seed` (not trained: a test file).
fn test_policy(seed: u64) -> MlpPolicy {
    let mut rng = stream(seed, "startcp/mlp");
    let mut layer = |n_in: usize, n_out: usize, activation: Activation| MlpLayer {
        w: (0..n_out).map(|_| (0..n_in).map(|_| rng.uniform_range(-0.5, 0.5)).collect()).collect(),
        b: (0..n_out).map(|_| rng.uniform_range(-0.1, 0.1)).collect(),
        activation,
    };
    let mut layers =
        vec![layer(5, 32, Activation::Tanh), layer(32, 16, Activation::Relu), layer(16, 1, Activation::Linear)];
    layers[2].b[0] = 1.5; // leads around 150 ms, so the clamps are not all the test sees
    MlpPolicy::new([60.0, 20.0, 30.0, 25.0, 7500.0], [30.0, 50.0, 20.0, 15.0, 4500.0], layers, 100.0, 400.0).unwrap()
}

/// The forward pass written out independently of `MlpPolicy::lead_ms`.
fn reference_ms(p: &MlpPolicy, x: [f64; 5], mean: [f64; 5], scale: [f64; 5]) -> f64 {
    let mut v: Vec<f64> = (0..5).map(|i| (x[i] - mean[i]) / scale[i]).collect();
    for l in p.layers() {
        let mut out = Vec::new();
        for (r, row) in l.w.iter().enumerate() {
            let mut z = l.b[r];
            for c in 0..row.len() {
                z += row[c] * v[c];
            }
            out.push(match l.activation {
                Activation::Tanh => z.tanh(),
                Activation::Relu => z.max(0.0),
                Activation::Linear => z,
            });
        }
        v = out;
    }
    (v[0] * 100.0).clamp(0.0, 400.0)
}

#[test]
fn a_weights_file_round_trips_and_evaluates_as_written() {
    let mut p = test_policy(3);
    let text = p.to_json();
    assert!(text.contains("\"format\": \"leoguard-startcp-policy\""));
    let dir = std::env::temp_dir().join(format!("leoguard-startcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("policy.json");
    std::fs::write(&path, &text).unwrap();
    let mut q = MlpPolicy::load(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(q, p, "bit-exact weights after a round trip");
    let (mean, scale) = ([60.0, 20.0, 30.0, 25.0, 7500.0], [30.0, 50.0, 20.0, 15.0, 4500.0]);
    let mut rng = stream(4, "startcp/mlp-inputs");
    let (mut nonzero, mut below_max) = (0, 0);
    for _ in 0..200 {
        let x = [
            rng.uniform_range(20.0, 200.0),
            rng.uniform_range(0.0, 400.0),
            rng.uniform_range(0.0, 100.0),
            rng.uniform_range(10.0, 100.0),
            rng.uniform_range(0.0, 15_000.0),
        ];
        let want = reference_ms(&p, x, mean, scale);
        let got = q.lead_ms(&x);
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        assert!((0.0..=400.0).contains(&got));
        nonzero += usize::from(got > 0.0);
        below_max += usize::from(got < 400.0);
        assert_eq!(p.lead_ms(&x), got);
    }
    assert!(nonzero > 10 && below_max > 10, "the test network is not trivially clamped: {nonzero}, {below_max}");
    // Through the trait: milliseconds to Duration.
    let s = LeadState {
        mean_rtt: ms(60),
        rtt_var_ms2: 20.0,
        ack_rate: Bps::mbps(30),
        owd: ms(25),
        time_to_handover: ms(7500),
        in_flight: 0,
        delivery_rate: None,
        srtt: ms(60),
        rttvar: ms(5),
    };
    let want = Duration::from_secs_f64(reference_ms(&p, s.features(), mean, scale) / 1e3);
    assert_eq!(q.lead(&s), want);
    assert_eq!(q.name(), "mlp");
}

#[test]
fn missing_file_and_broken_json_are_clear_errors() {
    let e = MlpPolicy::load(std::path::Path::new("/nonexistent/policy.json")).unwrap_err().to_string();
    assert!(e.starts_with("cannot read policy file /nonexistent/policy.json:"), "{e}");
    let text = test_policy(5).to_json();
    let e = MlpPolicy::from_json(&text[..text.len() / 2]).unwrap_err().to_string();
    assert!(e.starts_with("policy file is not valid JSON: EOF while parsing"), "{e}");
    let e = MlpPolicy::from_json("{\"format\": 1e999}").unwrap_err().to_string();
    assert!(e.starts_with("policy file is not valid JSON: number out of range"), "{e}");
    let e = MlpPolicy::from_json("[1, 2]").unwrap_err().to_string();
    assert_eq!(e, "policy field (top level): must be a JSON object");
}

#[test]
fn defective_weights_files_name_the_field() {
    let good: serde_json::Value = serde_json::from_str(&test_policy(6).to_json()).unwrap();
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|v| v["format"] = "other".into()),
            "policy field format: \"other\" is not \"leoguard-startcp-policy\"",
        ),
        (Box::new(|v| v["version"] = 2.into()), "policy field version: 2 is not 1"),
        (Box::new(|v| drop(v.as_object_mut().unwrap().remove("layers"))), "policy field layers: missing"),
        (Box::new(|v| v["extra"] = 1.into()), "policy field extra: unknown field"),
        (Box::new(|v| v["inputs"][0] = "rtt".into()), "policy field inputs: [\"rtt\", "),
        (
            Box::new(|v| v["inputs"].as_array_mut().unwrap().swap(0, 1)),
            "policy field inputs: [\"rtt_var_ms2\", \"mean_rtt_ms\"",
        ),
        (
            Box::new(|v| v["input_mean"].as_array_mut().unwrap().truncate(4)),
            "policy field input_mean: 4 numbers, expected 5",
        ),
        (Box::new(|v| v["input_scale"][2] = 0.0.into()), "policy field input_scale[2]: 0 must be > 0"),
        (Box::new(|v| v["input_scale"][1] = "x".into()), "policy field input_scale[1]: a string is not a number"),
        (
            Box::new(|v| v["layers"][0]["w"][3].as_array_mut().unwrap().push(1.0.into())),
            "policy field layers[0].w[3]: 6 numbers, expected 5 (the 5 inputs)",
        ),
        (
            Box::new(|v| v["layers"][1]["w"][7].as_array_mut().unwrap().pop().map(drop).unwrap_or(())),
            "policy field layers[1].w[7]: 31 numbers, expected 32 (layer 0's 32 outputs)",
        ),
        (
            Box::new(|v| v["layers"][1]["b"].as_array_mut().unwrap().push(0.0.into())),
            "policy field layers[1].b: 17 numbers, expected 16",
        ),
        (
            Box::new(|v| v["layers"][2]["w"][0][4] = serde_json::Value::Null),
            "policy field layers[2].w[0][4]: null is not a number",
        ),
        (
            Box::new(|v| v["layers"][0]["activation"] = "sigmoid".into()),
            "policy field layers[0].activation: \"sigmoid\" is not",
        ),
        (Box::new(|v| v["layers"][0]["bias"] = 1.into()), "policy field layers[0].bias: unknown field"),
        (
            Box::new(|v| drop(v["layers"].as_array_mut().unwrap().pop())),
            "policy field layers[1].w: 16 outputs, the last layer needs 1",
        ),
        (Box::new(|v| v["layers"] = serde_json::json!([])), "policy field layers: 0 layers, need 1 to 16"),
        (Box::new(|v| v["output"]["scale_ms"] = (-1.0).into()), "policy field output.scale_ms: -1 must be > 0"),
        (Box::new(|v| v["output"]["max_lead_ms"] = (-5.0).into()), "policy field output.max_lead_ms: -5 must be >= 0"),
        (
            Box::new(|v| drop(v["output"].as_object_mut().unwrap().remove("scale_ms"))),
            "policy field output.scale_ms: missing",
        ),
    ];
    for (edit, want) in cases {
        let mut v = good.clone();
        edit(&mut v);
        let e = MlpPolicy::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} should start with {want:?}");
    }
    assert!(MlpPolicy::from_json(&good.to_string()).is_ok());
    // NaN cannot be written in JSON, but a policy built in code is checked the same way.
    let mut layers = test_policy(6).layers().to_vec();
    layers[0].w[0][0] = f64::NAN;
    let e = MlpPolicy::new([0.0; 5], [1.0; 5], layers, 100.0, 400.0).unwrap_err().to_string();
    assert_eq!(e, "policy field layers[0].w[0][0]: NaN is not a finite number");
    let e = MlpPolicy::new([f64::INFINITY, 0.0, 0.0, 0.0, 0.0], [1.0; 5], test_policy(6).layers().to_vec(), 1.0, 1.0)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "policy field input_mean[0]: inf is not a finite number");
}

#[test]
fn a_constant_network_gives_its_bias_as_lead() {
    let layers = vec![
        MlpLayer { w: vec![vec![0.0; 5]; 4], b: vec![0.0; 4], activation: Activation::Tanh },
        MlpLayer { w: vec![vec![0.0; 4]], b: vec![0.8], activation: Activation::Linear },
    ];
    let mut p = MlpPolicy::new([0.0; 5], [1.0; 5], layers.clone(), 100.0, 500.0).unwrap();
    assert_eq!(p.lead_ms(&[1.0, 2.0, 3.0, 4.0, 5.0]), 80.0);
    // Negative outputs clamp to 0, large ones to max_lead_ms.
    let mut neg = layers.clone();
    neg[1].b[0] = -3.0;
    assert_eq!(MlpPolicy::new([0.0; 5], [1.0; 5], neg, 100.0, 500.0).unwrap().lead_ms(&[0.0; 5]), 0.0);
    let mut big = layers;
    big[1].b[0] = 30.0;
    assert_eq!(MlpPolicy::new([0.0; 5], [1.0; 5], big, 100.0, 500.0).unwrap().lead_ms(&[0.0; 5]), 500.0);
}

#[test]
fn a_scripted_policy_decides_once_per_handover_max_lead_before_it_and_records_its_input() {
    // Leads 50 then 80 ms. A prediction 5 s ahead sets no target yet (the decision is max_lead =
    // 1 s before the handover); the first prediction inside that second decides, later ones keep it.
    let cfg = StartcpConfig::default();
    let policy = ScriptedLeads::new(vec![ms(50), ms(80)]).unwrap();
    let mut c = SendingController::with_policy(cfg, Box::new(policy)).unwrap();
    c.on_prediction(at_ms(5_000), at_ms(10_000), &snap(40));
    assert_eq!(c.stall_at(), None);
    c.on_prediction(at_ms(9_100), at_ms(10_000), &snap(40));
    assert_eq!(c.stall_at(), Some(at_ms(9_950)));
    c.on_prediction(at_ms(9_500), at_ms(10_010), &snap(40));
    assert_eq!(c.stall_at(), Some(at_ms(9_950)), "decided once: a later prediction changes nothing");
    assert_eq!(c.update(at_ms(9_950)), Transition::Stalled);
    let r = c.records()[0];
    assert_eq!(r.lead, ms(50));
    assert!((r.state[4] - 900.0).abs() < 1e-6, "time to handover at the decision: {:?}", r.state);
    c.on_recovery_notice(at_ms(10_100));
    c.on_prediction(at_ms(24_200), at_ms(25_000), &snap(40));
    assert_eq!(c.stall_at(), Some(at_ms(24_920)));
    assert!(ScriptedLeads::new(Vec::new()).is_none());
}
