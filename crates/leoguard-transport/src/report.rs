//! The JSON the binary writes: per-interval telemetry and a final summary for each end (field
//! reference: docs/transport.md). Times are seconds since the end's clock origin, plus the
//! CLOCK_MONOTONIC nanoseconds of that origin (`origin_mono_ns`), so a caller can put both ends and
//! the emulator on one time line.

use leoguard_core::Instant;
use serde::Serialize;

use crate::receiver::{Receiver, ReceiverCounters};
use crate::sender::{Sender, SenderCounters};

/// Goodput over an interval, from a running byte count.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rate {
    last: Option<(Instant, u64)>,
}

impl Rate {
    /// A rate whose first interval starts at `t` with `bytes` counted.
    pub fn starting(t: Instant, bytes: u64) -> Rate {
        Rate { last: Some((t, bytes)) }
    }

    /// Bits per second since the previous call (0 on the first), and remembers (`now`, `bytes`).
    pub fn update(&mut self, now: Instant, bytes: u64) -> f64 {
        let r = match self.last {
            Some((t, b)) if now > t => {
                bytes.saturating_sub(b) as f64 * 8.0 / now.saturating_duration_since(t).as_secs_f64()
            }
            _ => 0.0,
        };
        self.last = Some((now, bytes));
        r
    }
}

/// How late the loop woke for the deadlines it slept towards (pacing and timers): a histogram at
/// 1 µs resolution up to 10 ms.
#[derive(Clone, Debug)]
pub struct Lateness {
    counts: Vec<u32>,
    max_us: u64,
    n: u64,
}

impl Default for Lateness {
    fn default() -> Lateness {
        Lateness { counts: vec![0; 10_001], max_us: 0, n: 0 }
    }
}

impl Lateness {
    /// Records one wake-up `late_us` after its deadline.
    pub fn record(&mut self, late_us: u64) {
        let i = late_us.min(10_000) as usize;
        self.counts[i] = self.counts[i].saturating_add(1);
        self.max_us = self.max_us.max(late_us);
        self.n += 1;
    }

    fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let want = ((self.n as f64 * q).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (us, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= want {
                return Some(us as u64);
            }
        }
        Some(self.max_us)
    }

    /// p50, p99 and max in µs, and the number of wake-ups.
    pub fn summary(&self) -> WakeLateness {
        WakeLateness {
            wakeups: self.n,
            p50_us: self.quantile(0.5),
            p99_us: self.quantile(0.99),
            max_us: (self.n > 0).then_some(self.max_us),
        }
    }
}

/// How late the loop woke for its deadlines.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct WakeLateness {
    /// Wake-ups for a deadline.
    pub wakeups: u64,
    /// Median lateness, µs.
    pub p50_us: Option<u64>,
    /// 99th percentile, µs.
    pub p99_us: Option<u64>,
    /// Largest, µs.
    pub max_us: Option<u64>,
}

/// One interval line of the sender (stdout).
#[derive(Clone, Debug, Serialize)]
pub struct SendInterval {
    /// Always "interval".
    pub event: &'static str,
    /// Seconds since the clock origin.
    pub t_s: f64,
    /// CLOCK_MONOTONIC, nanoseconds.
    pub t_mono_ns: u64,
    /// Bytes cumulatively acknowledged so far.
    pub acked_bytes: u64,
    /// Goodput over the interval (bytes acknowledged), bit/s.
    pub goodput_bps: f64,
    /// Congestion window, bytes.
    pub cwnd_bytes: u64,
    /// Bytes in flight.
    pub in_flight_bytes: u64,
    /// Smoothed RTT, ms (null before the first sample).
    pub srtt_ms: Option<f64>,
    /// Retransmissions so far.
    pub retransmissions: u64,
    /// Retransmission timeouts so far.
    pub rtos: u64,
    /// The controller's state label.
    pub cc_state: &'static str,
}

impl SendInterval {
    /// The sender's state now.
    pub fn of(s: &Sender, now: Instant, origin_mono_ns: u64, rate: &mut Rate) -> SendInterval {
        let st = s.stats();
        SendInterval {
            event: "interval",
            t_s: now.as_secs_f64(),
            t_mono_ns: origin_mono_ns + now.as_nanos(),
            acked_bytes: st.bytes_acked,
            goodput_bps: rate.update(now, st.bytes_acked),
            cwnd_bytes: s.tcp().cc().cwnd(),
            in_flight_bytes: s.tcp().in_flight(),
            srtt_ms: s.tcp().srtt().map(|d| d.as_millis_f64()),
            retransmissions: st.retransmissions,
            rtos: st.rtos,
            cc_state: s.tcp().cc().state(),
        }
    }
}

/// The sender's summary (last line on stdout).
#[derive(Clone, Debug, Serialize)]
pub struct SendSummary {
    /// Always "summary".
    pub event: &'static str,
    /// Always "send".
    pub role: &'static str,
    /// Connection id.
    pub flow_id: u32,
    /// Congestion controller.
    pub cc: String,
    /// Payload bytes per segment.
    pub mss: u32,
    /// Bytes the application wrote.
    pub bytes_written: u64,
    /// Bytes acknowledged (delivered to the receiver in order).
    pub bytes_acked: u64,
    /// bytes_acked over duration_s, bit/s.
    pub goodput_bps: f64,
    /// From the application's first write to the acknowledgement of its last byte (or to the exit).
    pub duration_s: f64,
    /// Segments sent, retransmissions included.
    pub segments_sent: u64,
    /// Retransmitted segments.
    pub retransmissions: u64,
    /// Retransmission timeouts.
    pub rtos: u64,
    /// Fast-recovery episodes.
    pub recoveries: u64,
    /// Tail Loss Probes.
    pub tlps: u64,
    /// ACKs with a DSACK block.
    pub dsacks: u64,
    /// Window reductions undone.
    pub undos: u64,
    /// Every byte written was acknowledged.
    pub complete: bool,
    /// The receiver confirmed the close.
    pub closed: bool,
    /// Stopped by SIGINT/SIGTERM/SIGHUP.
    pub interrupted: bool,
    /// Stopped by --timeout.
    pub timed_out: bool,
    /// Datagrams the socket refused (full buffer, unreachable peer): lost like any other loss.
    pub send_errors: u64,
    /// What arrived.
    pub counters: SenderCounters,
    /// CPU seconds (user + system) of the process.
    pub cpu_s: f64,
    /// How late the loop woke for pacing and timer deadlines.
    pub wake_late: Option<WakeLateness>,
    /// CLOCK_MONOTONIC of the clock origin, ns.
    pub origin_mono_ns: u64,
    /// Seconds from the origin to the application's first write.
    pub start_s: f64,
    /// StarTCP's stalls (with `--cc startcp`).
    pub startcp: Option<SendStartcp>,
}

/// One StarTCP stall of the sender: the simulator's `res.startcp` row. Times are nanoseconds since
/// the sender's clock origin (add `origin_mono_ns` for CLOCK_MONOTONIC).
#[derive(Clone, Debug, Serialize)]
pub struct StallRecord {
    /// The predicted handover the stall was for (the receiver's offset placed on this clock).
    pub predicted_ns: u64,
    /// When sending stopped.
    pub stall_start_ns: u64,
    /// When it resumed (null: still stalled at the exit).
    pub stall_end_ns: Option<u64>,
    /// Probes sent during the stall.
    pub probes: u64,
    /// "notice", "timeout" or "" (still stalled).
    pub reason: &'static str,
    /// The lead the policy chose, ns.
    pub lead_ns: u64,
    /// The policy's input (`leoguard_proto::startcp::FEATURES` order and units).
    pub state: [f64; 5],
}

/// The StarTCP part of the sender's summary.
#[derive(Clone, Debug, Serialize)]
pub struct SendStartcp {
    /// The lead policy.
    pub policy: &'static str,
    /// Probes sent in all.
    pub probes_sent: u64,
    /// One record per stall, in order.
    pub stalls: Vec<StallRecord>,
}

impl SendStartcp {
    /// The stalls of `s`, if it runs StarTCP.
    pub fn of(s: &Sender) -> Option<SendStartcp> {
        use leoguard_proto::startcp::ResumeReason;
        let c = s.tcp().startcp()?;
        let stalls = c
            .records()
            .iter()
            .map(|h| StallRecord {
                predicted_ns: h.predicted.as_nanos(),
                stall_start_ns: h.stall_start.as_nanos(),
                stall_end_ns: h.stall_end.map(Instant::as_nanos),
                probes: h.probes,
                reason: match h.reason {
                    Some(ResumeReason::Notice) => "notice",
                    Some(ResumeReason::Timeout) => "timeout",
                    None => "",
                },
                lead_ns: h.lead.as_nanos(),
                state: h.state,
            })
            .collect();
        Some(SendStartcp { policy: c.policy_name(), probes_sent: c.probes_sent(), stalls })
    }
}

impl SendSummary {
    /// The summary of `s` at `now`.
    pub fn of(s: &Sender, cc: &str, mss: u32, now: Instant) -> SendSummary {
        let st = s.stats();
        let start = s.started_at().unwrap_or(now);
        let duration = s.completed_at().unwrap_or(now).saturating_duration_since(start).as_secs_f64();
        SendSummary {
            event: "summary",
            role: "send",
            flow_id: 0,
            cc: cc.to_string(),
            mss,
            bytes_written: s.written(),
            bytes_acked: st.bytes_acked,
            goodput_bps: if duration > 0.0 { st.bytes_acked as f64 * 8.0 / duration } else { 0.0 },
            duration_s: duration,
            segments_sent: st.segments_sent,
            retransmissions: st.retransmissions,
            rtos: st.rtos,
            recoveries: st.recoveries,
            tlps: st.tlps,
            dsacks: st.dsacks,
            undos: st.undos,
            complete: s.is_complete(),
            closed: s.is_closed(),
            interrupted: false,
            timed_out: false,
            send_errors: 0,
            counters: s.counters,
            cpu_s: 0.0,
            wake_late: None,
            origin_mono_ns: 0,
            start_s: start.as_secs_f64(),
            startcp: SendStartcp::of(s),
        }
    }
}

/// One point of the receiver's delivery series.
#[derive(Clone, Debug, Serialize)]
pub struct RecvInterval {
    /// Seconds since the clock origin.
    pub t_s: f64,
    /// CLOCK_MONOTONIC, nanoseconds.
    pub t_mono_ns: u64,
    /// Bytes delivered in order so far.
    pub delivered_bytes: u64,
    /// Goodput over the interval, bit/s.
    pub goodput_bps: f64,
}

/// The receiver's report (--out, and the last line on stdout without the series).
#[derive(Clone, Debug, Serialize)]
pub struct RecvSummary {
    /// Always "summary".
    pub event: &'static str,
    /// Always "recv".
    pub role: &'static str,
    /// The connection served, if any datagram arrived.
    pub flow_id: Option<u32>,
    /// Bytes delivered in order, each checked against the sender's pattern.
    pub bytes_delivered: u64,
    /// The stream's length as the FIN gave it.
    pub stream_end: Option<u64>,
    /// bytes_delivered over duration_s, bit/s.
    pub goodput_bps: f64,
    /// From the first data segment to the last in-order delivery.
    pub duration_s: f64,
    /// The whole stream arrived and the FIN was answered.
    pub complete: bool,
    /// Stopped by a signal.
    pub interrupted: bool,
    /// Stopped by --timeout.
    pub timed_out: bool,
    /// What arrived.
    pub counters: ReceiverCounters,
    /// Datagrams the socket refused.
    pub send_errors: u64,
    /// CPU seconds (user + system) of the process.
    pub cpu_s: f64,
    /// CLOCK_MONOTONIC of the clock origin, ns.
    pub origin_mono_ns: u64,
    /// Seconds from the origin to the first data segment.
    pub first_data_s: Option<f64>,
    /// The delivery series (--json-interval).
    pub intervals: Vec<RecvInterval>,
    /// StarTCP's Handover Manager (with `--startcp`).
    pub startcp: Option<RecvStartcp>,
}

/// One interruption the Handover Manager detected (the simulator's `res.interruptions` row): a gap
/// in arrivals above the expected inter-arrival time plus the threshold.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct InterruptionRecord {
    /// The last arrival before the gap, ns since the receiver's clock origin.
    pub start_ns: u64,
    /// Length of the gap, ns.
    pub duration_ns: u64,
    /// Whether the sender was stalled (probing) when it began, so it ended in a recovery notice.
    pub stalled: bool,
}

/// The StarTCP part of the receiver's report.
#[derive(Clone, Debug, Serialize)]
pub struct RecvStartcp {
    /// Interruptions detected, in order.
    pub interruptions: Vec<InterruptionRecord>,
    /// Recovery notices raised.
    pub notices: u64,
    /// The handover phase in [0, period) of the receiver's clock, once enough interruptions
    /// support it, ns.
    pub base_phase_ns: Option<u64>,
    /// The expected inter-arrival time, ns.
    pub expected_interarrival_ns: Option<u64>,
}

impl RecvStartcp {
    /// The Handover Manager's state of `r`, if it runs one.
    pub fn of(r: &Receiver) -> Option<RecvStartcp> {
        let m = r.startcp()?;
        Some(RecvStartcp {
            interruptions: m
                .interruptions()
                .iter()
                .map(|x| InterruptionRecord {
                    start_ns: x.start.as_nanos(),
                    duration_ns: x.duration.as_nanos(),
                    stalled: x.stalled,
                })
                .collect(),
            notices: m.notices(),
            base_phase_ns: m.base_phase().map(|d| d.as_nanos()),
            expected_interarrival_ns: m.expected_interarrival().map(|d| d.as_nanos()),
        })
    }
}

impl RecvSummary {
    /// The report of `r` (series left empty).
    pub fn of(r: &Receiver) -> RecvSummary {
        let duration = match (r.first_data_at(), r.last_delivery_at()) {
            (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        RecvSummary {
            event: "summary",
            role: "recv",
            flow_id: r.flow(),
            bytes_delivered: r.delivered(),
            stream_end: r.stream_end(),
            goodput_bps: if duration > 0.0 { r.delivered() as f64 * 8.0 / duration } else { 0.0 },
            duration_s: duration,
            complete: r.completed_at().is_some(),
            interrupted: false,
            timed_out: false,
            counters: r.counters,
            send_errors: 0,
            cpu_s: 0.0,
            origin_mono_ns: 0,
            first_data_s: r.first_data_at().map(Instant::as_secs_f64),
            intervals: Vec::new(),
            startcp: RecvStartcp::of(r),
        }
    }
}
