//! BBR v1 tests on scripted time.

use super::*;
use std::collections::VecDeque;

const MSS: u64 = 1000;

/// A scripted delivery-rate model with one bottleneck queue, advanced one base RTT at a time: the
/// sender sends at its pacing rate (an unlimited source; cwnd only caps what it reports in
/// flight), the link delivers at most `bottleneck`, the excess queues and delays RTT samples.
struct Script {
    now: Instant,
    total: u64,
    rtt: Duration,
    bottleneck: Bps,
    queue: u64,
}

/// ACKs per round.
const ACKS: u64 = 10;

impl Script {
    fn new(rtt: Duration, bottleneck: Bps) -> Script {
        Script { now: Instant::ZERO, total: 0, rtt, bottleneck, queue: 0 }
    }

    /// One round sending at `send` (None: the pacing rate); returns the delivery rate.
    fn round_at(&mut self, cc: &mut Bbr, send: Option<Bps>, app_limited: bool) -> Bps {
        let send = send.unwrap_or_else(|| cc.pacing_rate().unwrap_or(Bps(0)));
        let sent = send.bytes_in(self.rtt).0;
        let capacity = self.bottleneck.bytes_in(self.rtt).0;
        let out = (self.queue + sent).min(capacity).max(MSS);
        self.queue = (self.queue + sent).saturating_sub(out);
        let rate = Bps(out * 8 * 1_000_000_000 / self.rtt.as_nanos());
        let queue_delay = self.bottleneck.transmission_time(leoguard_core::Bytes(self.queue));
        let rtt_sample = self.rtt + queue_delay.unwrap_or(Duration::ZERO);
        let chunk = out / ACKS;
        let round_start_total = self.total;
        for _ in 0..ACKS {
            self.now += Duration(self.rtt.as_nanos() / ACKS);
            self.total += chunk;
            let in_flight = cc.cwnd().min(sent + self.queue);
            let ack = AckEvent {
                bytes_acked: chunk,
                prior_in_flight: in_flight + chunk,
                in_flight,
                lost_bytes: 0,
                rtt: Some(rtt_sample),
                srtt: rtt_sample,
                min_rtt: self.rtt,
                rate: Some(RateSample {
                    delivered: chunk * ACKS,
                    interval: self.rtt,
                    prior_delivered: round_start_total,
                    total_delivered: self.total,
                    is_app_limited: app_limited,
                }),
                in_recovery: false,
                cwnd_limited: true,
            };
            cc.on_ack(self.now, &ack);
        }
        rate
    }

    fn round(&mut self, cc: &mut Bbr) -> Bps {
        self.round_at(cc, None, false)
    }
}

fn within(a: u64, b: u64, tol: f64) -> bool {
    (a as f64 - b as f64).abs() <= tol * b as f64
}

#[test]
fn max_filter_keeps_the_window_max_and_expires_it() {
    let mut f = MaxFilter::default();
    f.update(10, 1, 100);
    for t in 2..=11 {
        assert_eq!(f.update(10, t, 50), 100, "round {t}");
    }
    // Round 12 is more than 10 rounds after the max: it expires.
    assert_eq!(f.update(10, 12, 50), 50);
}

#[test]
fn startup_grows_by_high_gain_then_drains_into_probe_bw_at_the_bottleneck() {
    let bottleneck = Bps::gbps(1);
    let rtt = Duration::from_millis(20);
    let mut cc = Bbr::new(MSS, 10);
    let mut s = Script::new(rtt, bottleneck);
    assert_eq!(cc.state(), "startup");
    // The first round is the initial window's worth (10 segments per RTT = 4 Mbit/s).
    let mut prev = s.round_at(&mut cc, Some(Bps(10 * MSS * 8 * 50)), false);
    let mut modes = vec![cc.mode()];
    let mut growth_rounds = 0;
    for _ in 0..40 {
        let rate = s.round(&mut cc);
        if rate.0 < bottleneck.0 / 2 && prev.0 > 0 && cc.mode() == Mode::Startup {
            // Unlimited link: each round delivers at last round's pacing rate, which is
            // 2.885 · 0.99 times the rate delivered in the round before.
            let ratio = rate.0 as f64 / prev.0 as f64;
            assert!((ratio - HIGH_GAIN * PACING_MARGIN).abs() < 0.05, "growth {ratio}");
            growth_rounds += 1;
        }
        prev = rate;
        if modes.last() != Some(&cc.mode()) {
            modes.push(cc.mode());
        }
    }
    assert!(growth_rounds >= 3, "only {growth_rounds} growth rounds");
    assert_eq!(modes, vec![Mode::Startup, Mode::Drain, Mode::ProbeBw]);
    assert!(within(cc.bw().0, bottleneck.0, 0.02), "bw {:?}", cc.bw());
    assert_eq!(cc.min_rtt(), Some(Duration::from_millis(20)));
    assert!(cc.ssthresh() < u64::MAX);
    // cwnd = 2 · BDP + quantisation budget (2.5 MB BDP at 1 Gbit/s · 20 ms).
    let bdp = 2_500_000;
    assert!(cc.cwnd() >= 2 * bdp + 3 * MSS && cc.cwnd() <= 2 * bdp + 7 * MSS, "cwnd {}", cc.cwnd());
    // Cruising pacing rate is within the gain cycle of the bottleneck, less the 1 % margin.
    let p = cc.pacing_rate().map_or(0, |p| p.0) as f64 / bottleneck.0 as f64;
    assert!((0.74..=1.24).contains(&p), "pacing/bottleneck {p}");
}

#[test]
fn probe_bw_cycles_through_all_gains_from_a_seeded_phase() {
    let start_phase = |seed: u64| {
        let mut cc = Bbr::with_seed(MSS, 10, seed);
        let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
        while cc.mode() != Mode::ProbeBw {
            s.round(&mut cc);
        }
        let first = cc.cycle_phase();
        let mut seen = [false; 8];
        for _ in 0..40 {
            s.round(&mut cc);
            seen[cc.cycle_phase()] = true;
        }
        assert!(seen.iter().all(|&x| x), "phases {seen:?}");
        first
    };
    let phases: Vec<usize> = (0..16).map(start_phase).collect();
    assert!(phases.iter().all(|&p| p != 1), "never starts in the drain phase: {phases:?}");
    assert!(phases.iter().any(|&p| p != phases[0]), "start phase is random: {phases:?}");
    assert_eq!(start_phase(3), start_phase(3));
}

#[test]
fn probe_rtt_after_ten_seconds_for_two_hundred_ms() {
    let rtt = Duration::from_millis(20);
    let mut cc = Bbr::new(MSS, 10);
    let mut s = Script::new(rtt, Bps::mbps(50));
    while cc.mode() != Mode::ProbeBw {
        s.round(&mut cc);
    }
    // The first sample (first ACK of the first round) is never beaten afterwards.
    let min_rtt_at = Instant(rtt.as_nanos() / ACKS);
    let good_cwnd = cc.cwnd();
    let mut entered = None;
    let mut left = None;
    while left.is_none() && s.now < Instant(Duration::from_secs(12).as_nanos()) {
        let before = cc.mode();
        s.round(&mut cc);
        if before != Mode::ProbeRtt && cc.mode() == Mode::ProbeRtt {
            entered = Some(s.now);
            assert_eq!(cc.cwnd(), CWND_MIN_SEGMENTS * MSS);
        }
        if before == Mode::ProbeRtt && cc.mode() != Mode::ProbeRtt {
            left = Some(s.now);
        }
    }
    let entered = entered.expect("entered PROBE_RTT");
    let left = left.expect("left PROBE_RTT");
    let since_sample = entered.saturating_duration_since(min_rtt_at);
    assert!(since_sample >= MIN_RTT_WINDOW && since_sample <= MIN_RTT_WINDOW + rtt + rtt);
    let dwell = left.saturating_duration_since(entered);
    assert!(dwell >= PROBE_RTT_DURATION && dwell <= PROBE_RTT_DURATION + rtt + rtt + rtt, "dwell {dwell}");
    assert_eq!(cc.mode(), Mode::ProbeBw);
    assert!(cc.cwnd() >= good_cwnd - 4 * MSS, "cwnd restored: {} vs {good_cwnd}", cc.cwnd());
}

#[test]
fn random_loss_does_not_reduce_cwnd_outside_recovery() {
    let mut cc = Bbr::with_seed(MSS, 10, 9);
    let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
    for _ in 0..30 {
        s.round(&mut cc);
    }
    let mut twin = cc.clone();
    let mut s_twin = Script { now: s.now, total: s.total, rtt: s.rtt, bottleneck: s.bottleneck, queue: s.queue };
    for r in 0..50 {
        s_twin.round(&mut twin);
        if r % 5 == 0 {
            // A single random loss: one segment less in flight, one round of recovery.
            let before = cc.cwnd();
            cc.on_congestion_event(s.now, before - MSS);
            assert!(cc.cwnd() >= before - MSS, "no multiplicative cut");
            s.round(&mut cc);
            cc.on_recovery_end(s.now);
            assert!(cc.cwnd() >= before, "restored: {} < {before}", cc.cwnd());
        } else {
            s.round(&mut cc);
        }
        assert_eq!(cc.bw(), twin.bw());
        assert!(cc.cwnd() + 2 * MSS >= twin.cwnd(), "{} vs {}", cc.cwnd(), twin.cwnd());
    }
    assert_eq!(cc.mode(), Mode::ProbeBw);
}

#[test]
fn app_limited_samples_do_not_lower_bw() {
    let run = |app_limited: bool| {
        let mut cc = Bbr::new(MSS, 10);
        let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
        for _ in 0..30 {
            s.round(&mut cc);
        }
        let bw = cc.bw();
        for _ in 0..3 * BW_WINDOW_ROUNDS {
            s.round_at(&mut cc, Some(Bps::mbps(10)), app_limited);
        }
        (bw, cc.bw())
    };
    let (before, after) = run(true);
    assert_eq!(before, after);
    // The same low samples, not app-limited, do age the estimate out (so the test can fail).
    let (before, after) = run(false);
    assert!(after.0 < before.0 / 2, "{before:?} -> {after:?}");
}

#[test]
fn rto_cuts_to_one_segment_and_keeps_the_model() {
    let mut cc = Bbr::new(MSS, 10);
    let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
    for _ in 0..30 {
        s.round(&mut cc);
    }
    let bw = cc.bw();
    let good = cc.cwnd();
    cc.on_rto(s.now, good);
    assert_eq!(cc.cwnd(), MSS);
    assert_eq!(cc.bw(), bw);
    cc.on_recovery_end(s.now);
    assert_eq!(cc.cwnd(), good);
}

/// A packet-level bottleneck: FIFO at `rate`, propagation RTT `prop`, random loss with
/// probability `loss` (detected when the packet's ACK would have arrived, as SACK would), and
/// draft-cheng delivery-rate sampling. Returns goodput over the second half of `secs`.
fn packet_sim(rate: Bps, prop: Duration, loss: f64, secs: u64) -> (f64, Bbr) {
    struct Pkt {
        seq: u64,
        sent: Instant,
        ack_at: Instant,
        delivered: u64,
        delivered_time: Instant,
        first_sent: Instant,
        lost: bool,
    }
    let mut cc = Bbr::with_seed(MSS, 10, 1);
    let mut rng = leoguard_core::stream(1, "test/loss");
    let tx = rate.transmission_time(leoguard_core::Bytes(MSS)).unwrap();
    let end = Instant(Duration::from_secs(secs).as_nanos());
    let half = Instant(end.as_nanos() / 2);
    let (mut now, mut link_free, mut next_send) = (Instant::ZERO, Instant::ZERO, Instant::ZERO);
    let mut pipe: VecDeque<Pkt> = VecDeque::new();
    let (mut in_flight, mut delivered, mut seq) = (0u64, 0u64, 0u64);
    let (mut delivered_time, mut first_sent) = (Instant::ZERO, Instant::ZERO);
    let (mut recovery_point, mut min_rtt, mut srtt) = (None::<u64>, Duration(u64::MAX), Duration::ZERO);
    let mut goodput_bytes = 0u64;
    // Losses found since the last ACK that delivered something: the next one reports them.
    let mut lost_unreported = 0u64;
    while now < end {
        let ack_t = pipe.front().map(|p| p.ack_at);
        let send_t = (in_flight + MSS <= cc.cwnd()).then_some(now.max(next_send));
        match (ack_t, send_t) {
            (Some(a), s) if s.is_none_or(|s| a <= s) => {
                now = a;
                let p = pipe.pop_front().unwrap();
                let prior_in_flight = in_flight;
                in_flight -= MSS;
                if p.lost {
                    lost_unreported += MSS;
                    if recovery_point.is_none() {
                        recovery_point = Some(seq);
                        cc.on_congestion_event(now, in_flight);
                    }
                    continue;
                }
                delivered += MSS;
                delivered_time = now;
                first_sent = p.sent;
                if now >= half {
                    goodput_bytes += MSS;
                }
                let rtt = now - p.sent;
                min_rtt = min_rtt.min(rtt);
                srtt = if srtt == Duration::ZERO { rtt } else { Duration((7 * srtt.0 + rtt.0) / 8) };
                let interval = (p.sent - p.first_sent).max(now - p.delivered_time);
                let rs = RateSample {
                    delivered: delivered - p.delivered,
                    interval,
                    prior_delivered: p.delivered,
                    total_delivered: delivered,
                    is_app_limited: false,
                };
                let ack = AckEvent {
                    bytes_acked: MSS,
                    prior_in_flight,
                    in_flight,
                    lost_bytes: std::mem::take(&mut lost_unreported),
                    rtt: Some(rtt),
                    srtt,
                    min_rtt,
                    rate: (interval >= min_rtt).then_some(rs),
                    in_recovery: recovery_point.is_some(),
                    cwnd_limited: true,
                };
                cc.on_ack(now, &ack);
                if recovery_point.is_some_and(|rp| p.seq >= rp) {
                    recovery_point = None;
                    cc.on_recovery_end(now);
                }
            }
            (_, Some(s)) => {
                now = s;
                if in_flight == 0 {
                    first_sent = now;
                    delivered_time = now;
                }
                let depart = now.max(link_free) + tx;
                link_free = depart;
                pipe.push_back(Pkt {
                    seq,
                    sent: now,
                    ack_at: depart + prop,
                    delivered,
                    delivered_time,
                    first_sent,
                    lost: rng.bernoulli(loss),
                });
                seq += 1;
                in_flight += MSS;
                cc.on_sent(now, MSS, in_flight);
                let pace = cc.pacing_rate().and_then(|r| r.transmission_time(leoguard_core::Bytes(MSS)));
                next_send = now + pace.unwrap_or(Duration::ZERO);
            }
            _ => unreachable!("nothing in flight and cwnd closed"),
        }
    }
    let secs_measured = end.saturating_duration_since(half).as_secs_f64();
    let goodput = goodput_bytes as f64 * 8.0 / secs_measured / rate.0 as f64;
    (goodput, cc)
}

#[test]
fn packet_level_bottleneck_is_filled_without_loss() {
    let (util, cc) = packet_sim(Bps::mbps(20), Duration::from_millis(40), 0.0, 20);
    assert!(util > 0.9, "utilisation {util}");
    assert!(within(cc.bw().0, Bps::mbps(20).0, 0.1), "bw {:?}", cc.bw());
    let min_rtt = cc.min_rtt().unwrap();
    assert!(min_rtt >= Duration::from_millis(40) && min_rtt < Duration::from_millis(42));
}

#[test]
fn one_percent_random_loss_keeps_eighty_percent_of_capacity() {
    let (util, cc) = packet_sim(Bps::mbps(20), Duration::from_millis(40), 0.01, 20);
    assert!(util >= 0.8, "utilisation {util} under 1 % loss");
    assert!(within(cc.bw().0, Bps::mbps(20).0, 0.1), "bw {:?}", cc.bw());
}

/// An ACK of one segment sent when `prior_delivered` bytes had been delivered, `total` delivered now,
/// `in_flight` left after it and `lost` newly marked lost by it.
fn recovery_ack(prior_delivered: u64, total: u64, in_flight: u64, lost: u64) -> AckEvent {
    AckEvent {
        bytes_acked: MSS,
        prior_in_flight: in_flight + MSS + lost,
        in_flight,
        lost_bytes: lost,
        rtt: Some(Duration::from_millis(20)),
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        rate: Some(RateSample {
            delivered: 10 * MSS,
            interval: Duration::from_millis(20),
            prior_delivered,
            total_delivered: total,
            is_app_limited: false,
        }),
        in_recovery: true,
        cwnd_limited: true,
    }
}

#[test]
fn recovery_conserves_packets_for_the_round_that_starts_at_the_ack_entering_it() {
    // Linux `bbr_set_cwnd_to_recover_or_restore`: the ACK that finds recovery entered cuts cwnd to
    // in flight + acked and starts a round counting its own deliveries; until data sent after it is
    // acknowledged, each ACK releases what it acknowledged; then cwnd slow-starts (+acked per ACK).
    let mut cc = Bbr::with_seed(MSS, 10, 3);
    let mut s = Script::new(Duration::from_millis(20), Bps::mbps(50));
    for _ in 0..30 {
        s.round(&mut cc);
    }
    assert_eq!(cc.mode(), Mode::ProbeBw);
    let good = cc.cwnd();
    assert!(good > 100 * MSS, "{good}");
    let d = s.total;
    // An outage: most of the window is lost. The recovery's first ACK acknowledges a segment sent
    // before it (prior_delivered d) and marks 60 segments lost; 30 are left in flight.
    cc.on_congestion_event(s.now, 30 * MSS);
    assert_eq!(cc.cwnd(), good, "the window is BBR's to set on the next ACK");
    cc.on_ack(s.now, &recovery_ack(d, d + MSS, 30 * MSS, 60 * MSS));
    assert_eq!(cc.cwnd(), 31 * MSS);
    // More ACKs of segments sent before recovery: one out per one in, however many.
    let mut total = d + MSS;
    for k in 1..=20 {
        total += MSS;
        cc.on_ack(s.now, &recovery_ack(d - (k % 3) * MSS, total, 30 * MSS, 0));
        assert_eq!(cc.cwnd(), 31 * MSS, "ACK {k} of the conservation round");
    }
    // The ACK of a segment sent after recovery began ends the round: +acked from then on...
    cc.on_ack(s.now, &recovery_ack(d + MSS, total + MSS, 30 * MSS, 0));
    assert_eq!(cc.cwnd(), 32 * MSS);
    // ...less what each ACK newly marks lost (an ACK for P segments releases at most 2P).
    cc.on_ack(s.now, &recovery_ack(d + 2 * MSS, total + 2 * MSS, 20 * MSS, 5 * MSS));
    assert_eq!(cc.cwnd(), 28 * MSS);
    // Leaving recovery restores the window saved when it began.
    cc.on_recovery_end(s.now);
    assert_eq!(cc.cwnd(), good);
}
