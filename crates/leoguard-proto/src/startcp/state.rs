//! The sender's recent history for the lead policy's state (StarTCP §2.2 (i)): RTT samples,
//! acknowledged bytes and delivery-rate samples in the last n intervals.

use leoguard_core::{Bps, Duration, Instant};

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    /// Interval number (`now / interval`) this bucket holds; buckets of older intervals are stale.
    index: u64,
    rtt_sum_ms: f64,
    rtt_sq_ms2: f64,
    rtt_n: u64,
    acked: u64,
    max_rate: u64,
}

/// RTT samples, acknowledged bytes and delivery-rate samples in a ring of n intervals.
#[derive(Clone, Debug)]
pub struct StateTracker {
    interval: Duration,
    buckets: Vec<Bucket>,
    latest: u64,
}

impl StateTracker {
    /// A tracker of `n` intervals of `interval` each (both at least 1 ns / 1).
    pub fn new(interval: Duration, n: u32) -> Self {
        let interval = Duration(interval.as_nanos().max(1));
        StateTracker {
            interval,
            buckets: vec![Bucket { index: u64::MAX, ..Bucket::default() }; n.max(1) as usize],
            latest: 0,
        }
    }

    fn bucket(&mut self, now: Instant) -> &mut Bucket {
        let index = now.as_nanos() / self.interval.as_nanos();
        self.latest = self.latest.max(index);
        let n = self.buckets.len() as u64;
        let b = &mut self.buckets[(index % n) as usize];
        if b.index != index {
            *b = Bucket { index, ..Bucket::default() };
        }
        b
    }

    /// An RTT sample taken at `now`.
    pub fn on_rtt(&mut self, now: Instant, rtt: Duration) {
        let ms = rtt.as_millis_f64();
        let b = self.bucket(now);
        b.rtt_sum_ms += ms;
        b.rtt_sq_ms2 += ms * ms;
        b.rtt_n += 1;
    }

    /// `bytes` newly acknowledged at `now`, with the ACK's delivery-rate sample if it gave one.
    pub fn on_delivered(&mut self, now: Instant, bytes: u64, rate: Option<Bps>) {
        let b = self.bucket(now);
        b.acked += bytes;
        if let Some(r) = rate {
            b.max_rate = b.max_rate.max(r.0);
        }
    }

    fn live(&self) -> impl Iterator<Item = &Bucket> {
        let n = self.buckets.len() as u64;
        let oldest = self.latest.saturating_sub(n - 1);
        self.buckets.iter().filter(move |b| b.index != u64::MAX && b.index >= oldest && b.index <= self.latest)
    }

    /// Mean and (population) variance of the RTT samples in the window, ms and ms², if any.
    pub fn rtt_stats(&self) -> Option<(f64, f64)> {
        let (mut s, mut q, mut n) = (0.0, 0.0, 0u64);
        for b in self.live() {
            s += b.rtt_sum_ms;
            q += b.rtt_sq_ms2;
            n += b.rtt_n;
        }
        if n == 0 {
            return None;
        }
        let mean = s / n as f64;
        Some((mean, (q / n as f64 - mean * mean).max(0.0)))
    }

    /// Bytes acknowledged in the window over the window's length (n intervals, the current partial
    /// one included), as a bit rate.
    pub fn ack_rate(&self) -> Bps {
        let bytes: u64 = self.live().map(|b| b.acked).sum();
        let span = u128::from(self.interval.as_nanos()) * self.buckets.len() as u128;
        Bps(u64::try_from(u128::from(bytes) * 8 * 1_000_000_000 / span).unwrap_or(u64::MAX))
    }

    /// The highest delivery-rate sample in the window.
    pub fn max_delivery_rate(&self) -> Option<Bps> {
        self.live().map(|b| b.max_rate).max().filter(|&r| r > 0).map(Bps)
    }
}
