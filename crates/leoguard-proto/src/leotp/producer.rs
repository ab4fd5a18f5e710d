//! A LEOTP producer: serves byte ranges of a [`Source`] to any number of flows. Each Interest's range
//! joins the flow's send queue (room `queue_segments`, hard bound `interest_buffer_mss`); Data leaves from a token bucket at the
//! rate the flow's requester last asked for, refilled every 1 ms, and carries in `wnd` the queue's
//! spare room in MSS, which the consumer's Interest pacing reads (REFERENCE.md "LEOTP").

use super::cc::TokenBucket;
use super::config::{LeotpConfig, LeotpError};
use super::{echo_ts, write_out, Face, FlowKey, Out, Transmit};
use leoguard_core::{Instant, KeyMap};
use leoguard_wire::leotp::{LeotpHeader, LeotpPacket, LeotpType, LEOTP_HEADER_LEN};
use std::collections::VecDeque;

/// The content a producer serves.
pub trait Source {
    /// Its length, bytes (at most `u32::MAX`: the header's offsets are 32-bit).
    fn total(&self) -> u64;
    /// Fills `out` with the bytes from `offset` on (`offset + out.len() <= total()`).
    fn read(&self, offset: u64, out: &mut [u8]);
}

/// The byte at `offset` of [`PatternSource`]: a hash of the offset, so a byte delivered at the wrong
/// offset (by a segment, a block, or one byte) is caught.
pub fn pattern_byte(offset: u64) -> u8 {
    let mut z = (offset >> 3).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> ((offset & 7) * 8)) as u8
}

/// `total` bytes of [`pattern_byte`]: content a consumer can check without a copy of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PatternSource {
    /// Length, bytes.
    pub total: u64,
}

impl Source for PatternSource {
    fn total(&self) -> u64 {
        self.total
    }

    fn read(&self, offset: u64, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = pattern_byte(offset + i as u64);
        }
    }
}

/// A producer's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Interests queued (keep-alives excluded).
    pub interests: u64,
    /// Keep-alives received.
    pub keepalives: u64,
    /// Data packets sent.
    pub data_sent: u64,
    /// Payload bytes sent.
    pub bytes_sent: u64,
    /// Interests dropped because the flow's send queue held `interest_buffer_mss` ranges.
    pub queue_full_dropped: u64,
    /// Malformed packets dropped (unparsable, Data, negative rate).
    pub malformed_dropped: u64,
    /// Interests for more than one MSS or beyond the source dropped.
    pub out_of_range_dropped: u64,
}

#[derive(Debug)]
struct Flow {
    flow: FlowKey,
    queue: VecDeque<(u32, u32)>,
    bucket: TokenBucket,
    last_ts: (u32, Instant),
}

/// A LEOTP producer.
#[derive(Debug)]
pub struct Producer<S: Source> {
    cfg: LeotpConfig,
    source: S,
    flows: Vec<Flow>,
    index: KeyMap<usize>,
    rr: usize,
    payload: Vec<u8>,
    stats: ProducerStats,
}

impl<S: Source> Producer<S> {
    /// A producer of `source`.
    pub fn new(cfg: LeotpConfig, source: S) -> Result<Producer<S>, LeotpError> {
        cfg.validate()?;
        if source.total() > u64::from(u32::MAX) {
            return Err(LeotpError::Invalid {
                field: "total",
                value: source.total().to_string(),
                reason: "a source must fit the header's 32-bit offsets",
            });
        }
        Ok(Producer {
            cfg,
            source,
            flows: Vec::new(),
            index: KeyMap::default(),
            rr: 0,
            payload: Vec::new(),
            stats: ProducerStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> ProducerStats {
        self.stats
    }

    /// The rate `flow`'s requester asked for, bit/s.
    pub fn rate_bps(&self, flow: FlowKey) -> Option<u64> {
        self.index.get(&flow).map(|&i| self.flows[i].bucket.rate_bps())
    }

    /// Ranges of `flow` waiting to be sent.
    pub fn queued(&self, flow: FlowKey) -> usize {
        self.index.get(&flow).map_or(0, |&i| self.flows[i].queue.len())
    }

    /// A UDP payload from downstream; unparsable bytes are dropped and counted.
    pub fn handle_datagram(&mut self, now: Instant, flow: FlowKey, datagram: &[u8]) {
        match LeotpPacket::parse(datagram) {
            Ok(p) => self.handle_packet(now, flow, p.header),
            Err(_) => self.stats.malformed_dropped += 1,
        }
    }

    /// An Interest of `flow` (anything else is dropped and counted).
    pub fn handle_packet(&mut self, now: Instant, flow: FlowKey, header: LeotpHeader) {
        let rate = match header.requested_rate_bps() {
            Some(r) if header.kind == LeotpType::Interest && header.validate().is_ok() => r,
            _ => {
                self.stats.malformed_dropped += 1;
                return;
            }
        };
        let i = match self.index.get(&flow) {
            Some(&i) => i,
            None => {
                // Flows stay for the producer's lifetime (as many as the engine creates).
                self.flows.push(Flow {
                    flow,
                    queue: VecDeque::new(),
                    bucket: TokenBucket::new(now, rate, self.cfg.token_interval),
                    last_ts: (header.ts_ms, now),
                });
                self.index.insert(flow, self.flows.len() - 1);
                self.flows.len() - 1
            }
        };
        let f = &mut self.flows[i];
        f.bucket.refill(now);
        f.bucket.set_rate(rate);
        f.last_ts = (header.ts_ms, now);
        if header.is_keepalive() {
            self.stats.keepalives += 1;
            return;
        }
        if header.range_len() > self.cfg.mss || u64::from(header.end) > self.source.total() {
            self.stats.out_of_range_dropped += 1;
            return;
        }
        // The queue's room (what `wnd` reports) is `queue_segments`; ranges beyond it still wait
        // (a range costs 8 bytes) up to the consumer's own bound, so Interests that a consumer
        // paced on stale room information are served late rather than lost.
        if f.queue.len() >= self.cfg.interest_buffer_mss as usize {
            self.stats.queue_full_dropped += 1;
            return;
        }
        self.stats.interests += 1;
        f.queue.push_back((header.start, header.end));
    }

    /// When a waiting queue's token bucket refills.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.flows.iter().filter(|f| !f.queue.is_empty()).map(|f| f.bucket.next_refill()).min()
    }

    /// Nothing but refills happens on time at a producer; [`Producer::poll_transmit`] does those.
    pub fn on_timer(&mut self, _now: Instant) {}

    /// The next Data packet due at `now`, written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let n = self.flows.len();
        for k in 0..n {
            let i = (self.rr + k) % n;
            let f = &mut self.flows[i];
            if f.queue.is_empty() {
                continue;
            }
            f.bucket.refill(now);
            if !f.bucket.ready() {
                continue;
            }
            let Some((start, end)) = f.queue.pop_front() else { continue };
            let room = (self.cfg.queue_segments as usize).saturating_sub(f.queue.len());
            let header = LeotpHeader::data(start, end, room as i16, echo_ts(f.last_ts.0, f.last_ts.1, now));
            f.bucket.spend(LEOTP_HEADER_LEN + header.payload_len());
            self.rr = i + 1;
            let mut payload = std::mem::take(&mut self.payload);
            payload.clear();
            if self.cfg.carry_payload {
                payload.resize(header.payload_len(), 0);
                self.source.read(u64::from(start), &mut payload);
            }
            let out = Out { flow: f.flow, face: Face::Downstream, header, payload };
            let t = write_out(&out, buf);
            self.payload = out.payload;
            self.stats.data_sent += 1;
            self.stats.bytes_sent += u64::from(header.len);
            return Some(t);
        }
        None
    }
}
