//! The sending end without I/O: the application (a transfer of N bytes, or writing for S seconds,
//! optionally at a fixed rate), leoguard-proto's [`TcpSender`] with the registry's controller, the
//! transport's framing, and the close handshake (FIN until FIN-ACK). The binary owns the clock and
//! the socket and drives it: `handle_datagram(now, bytes)`, `poll_transmit(now, buf)`,
//! `poll_timeout()`, `handle_timeout(now)`.
//!
//! Times are leoguard [`Instant`]s on the driver's clock, which must be whole microseconds: TSval
//! travels in microseconds and Eifel's undo compares the echo with the retransmission's send time
//! exactly, so a clock finer than the wire would make every echo look older than it is.

use leoguard_core::{Bps, Bytes, Duration, Instant};
use leoguard_proto::cc::{self, UnknownAlgorithm};
use leoguard_proto::startcp::{self, Signal, StartcpError, StartcpSpec};
use leoguard_proto::tcp::{Ack, SenderStats, TcpConfig, TcpSender};
use leoguard_wire::transport::STARTCP_TLV_MAX;
use leoguard_wire::{AckRepr, DataSegment, StartcpOption, TlvOptions, TransportMessage, TransportPacket};

use crate::{pattern, Dropped};

/// FINs sent before the sender gives up waiting for the FIN-ACK (everything was acknowledged by
/// then; only the receiver's confirmation is missing).
pub const FIN_TRIES: u32 = 8;

/// How much the application has to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// A transfer of this many bytes.
    Bytes(u64),
    /// Write for this long, then stop writing and finish what was written.
    For(Duration),
}

/// What a sender is built from.
#[derive(Clone, Debug)]
pub struct SenderConfig {
    /// Connection id carried in every datagram.
    pub flow: u32,
    /// Congestion controller, by registry name (`leoguard_proto::cc::build`).
    pub cc: String,
    /// TCP parameters (MSS, header bytes for pacing, loss-recovery switches).
    pub tcp: TcpConfig,
    /// How much the application sends.
    pub amount: Amount,
    /// The application writes one MSS at this rate (an application-limited stream); `None`: as fast
    /// as the connection takes it.
    pub rate: Option<Bps>,
    /// StarTCP's configuration and lead policy when `cc` is `startcp` (`None`: the defaults, the
    /// heuristic lead); ignored for other controllers.
    pub startcp: Option<StartcpSpec>,
}

/// Why a sender could not be built.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SenderError {
    /// The controller is not in the registry.
    #[error(transparent)]
    Algorithm(#[from] UnknownAlgorithm),
    /// StarTCP's configuration does not validate.
    #[error(transparent)]
    Startcp(#[from] StartcpError),
}

/// Counters of what arrived at the sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SenderCounters {
    /// Datagrams handed to `handle_datagram`.
    pub datagrams_in: u64,
    /// ACKs processed.
    pub acks: u64,
    /// Dropped: not a valid transport datagram.
    pub malformed: u64,
    /// Dropped: another connection's.
    pub other_flow: u64,
    /// Dropped: carried a critical option this end does not know.
    pub unknown_critical: u64,
    /// Dropped: a message a sender does not take (data, FIN).
    pub unexpected: u64,
    /// FINs sent.
    pub fins_sent: u64,
    /// ACKs that carried StarTCP's signals (a prediction, a recovery notice).
    pub startcp_signals: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Close {
    /// Still sending.
    Open,
    /// Everything acknowledged; FIN `tries` times so far, the next at `next`.
    Closing { end: u64, next: Instant, tries: u32 },
    /// The receiver confirmed it holds the whole stream.
    Closed,
    /// No FIN-ACK after [`FIN_TRIES`] FINs (the data were all acknowledged).
    Unconfirmed,
}

/// One sending end.
#[derive(Debug)]
pub struct Sender {
    tcp: TcpSender,
    flow: u32,
    mss: u64,
    amount: Amount,
    rate: Option<Bps>,
    start: Option<Instant>,
    /// The application is still writing.
    writing: bool,
    written: u64,
    close: Close,
    completed_at: Option<Instant>,
    /// Counters.
    pub counters: SenderCounters,
}

impl Sender {
    /// A sender; fails when the controller is not in the registry or StarTCP's configuration does
    /// not validate. With `cc = "startcp"` it runs StarTCP's Sending Controller over
    /// `startcp.config.base_cc`, as the simulator's sender does.
    pub fn new(cfg: &SenderConfig) -> Result<Sender, SenderError> {
        let (mss, iw) = (u64::from(cfg.tcp.mss), cfg.tcp.init_cwnd_segments);
        // The application hands the stream over as it goes (`write`), so a timed sender can stop.
        let tcp = if cfg.cc == "startcp" {
            let spec = cfg.startcp.clone().unwrap_or_default();
            let controller = startcp::build_cc(&spec.config, mss, iw)?;
            let policy = spec.policy.build(&spec.config);
            TcpSender::with_startcp_policy(cfg.tcp, controller, Some(0), spec.config, policy)?
        } else {
            TcpSender::new(cfg.tcp, cc::build(&cfg.cc, mss, iw)?, Some(0))
        };
        Ok(Sender {
            tcp,
            flow: cfg.flow,
            mss: u64::from(cfg.tcp.mss),
            amount: cfg.amount,
            rate: cfg.rate.filter(|r| r.0 > 0),
            start: None,
            writing: true,
            written: 0,
            close: Close::Open,
            completed_at: None,
            counters: SenderCounters::default(),
        })
    }

    /// The connection's state machine (for telemetry).
    pub fn tcp(&self) -> &TcpSender {
        &self.tcp
    }

    /// Its counters.
    pub fn stats(&self) -> SenderStats {
        self.tcp.stats
    }

    /// Bytes the application has written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// When the application started.
    pub fn started_at(&self) -> Option<Instant> {
        self.start
    }

    /// When every byte written was acknowledged after the application stopped, if it was.
    pub fn completed_at(&self) -> Option<Instant> {
        self.completed_at
    }

    /// Whether every byte was acknowledged after the application stopped writing.
    pub fn is_complete(&self) -> bool {
        self.completed_at.is_some()
    }

    /// Whether the receiver confirmed the close (FIN-ACK).
    pub fn is_closed(&self) -> bool {
        self.close == Close::Closed
    }

    /// Whether there is nothing left to do: closed, or every FIN went unanswered.
    pub fn is_finished(&self) -> bool {
        matches!(self.close, Close::Closed | Close::Unconfirmed)
    }

    /// The application's deadline of a timed sender.
    fn stop_at(&self) -> Option<Instant> {
        match (self.amount, self.start) {
            (Amount::For(d), Some(s)) => Some(s + d),
            _ => None,
        }
    }

    fn cap(&self) -> u64 {
        match self.amount {
            Amount::Bytes(n) => n,
            Amount::For(_) => u64::MAX,
        }
    }

    /// Interval between two writes of one MSS at the application's rate.
    fn write_interval(&self) -> Option<Duration> {
        self.rate.and_then(|r| r.transmission_time(Bytes(self.mss)))
    }

    /// The application writes what it has for `now`: at its rate, else enough that the connection is
    /// never short of data (one segment beyond what was sent, so a timed sender that stops sends at
    /// most one segment more).
    fn app_write(&mut self, now: Instant) {
        let start = *self.start.get_or_insert(now);
        if !self.writing {
            return;
        }
        if self.stop_at().is_some_and(|s| now >= s) {
            self.writing = false;
            return;
        }
        let target = match self.write_interval() {
            Some(iv) => {
                let k = now.saturating_duration_since(start).as_nanos() / iv.as_nanos().max(1);
                (k + 1).saturating_mul(self.mss)
            }
            None => self.tcp.snd_nxt().saturating_add(self.mss),
        };
        let target = target.min(self.cap());
        if target > self.written {
            self.tcp.write(target - self.written);
            self.written = target;
        }
        if self.written >= self.cap() {
            self.writing = false;
        }
    }

    /// The next datagram to send now, written to `buf` (which must hold a header and an MSS, see
    /// [`Sender::buffer_len`]); returns its length.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.app_write(now);
        if let Some(seg) = self.tcp.poll_transmit(now) {
            if seg.probe {
                // StarTCP §2.3: a stalled sender's probe, a data segment without payload at snd_nxt
                // with the probe flag in option kind 1.
                let probe = StartcpOption { probe: true, ..StartcpOption::default() };
                let mut area = [0u8; STARTCP_TLV_MAX];
                let n = TlvOptions::emit_startcp(&probe, &mut area).ok()?;
                let p = TransportPacket {
                    flow: self.flow,
                    // Just written by the encoder, so it parses.
                    options: TlvOptions::parse(&area[..n]).ok()?,
                    message: TransportMessage::Data(DataSegment {
                        seq: seg.seq,
                        retransmission: false,
                        ts_us: seg.ts.as_nanos() / 1_000,
                        payload: &[],
                    }),
                };
                return p.emit(buf).ok();
            }
            let (hl, len) = (leoguard_wire::transport::DATA_HEADER_LEN, seg.len as usize);
            if buf.len() < hl + len {
                // A buffer smaller than `buffer_len()` is the driver's bug; the segment then counts as
                // lost and recovery resends it.
                return None;
            }
            let (header, rest) = buf.split_at_mut(hl);
            let payload = &mut rest[..len];
            pattern::fill(seg.seq, payload);
            let p = TransportPacket {
                flow: self.flow,
                options: TlvOptions::EMPTY,
                message: TransportMessage::Data(DataSegment {
                    seq: seg.seq,
                    retransmission: seg.retransmission,
                    ts_us: seg.ts.as_nanos() / 1_000,
                    payload,
                }),
            };
            return p.emit_header(header).ok().map(|h| h + len);
        }
        self.check_complete(now);
        if let Close::Closing { end, next, tries } = self.close {
            if now >= next {
                if tries >= FIN_TRIES {
                    self.close = Close::Unconfirmed;
                    return None;
                }
                let retry = Duration(self.tcp.rto().as_nanos().clamp(50_000_000, 1_000_000_000));
                self.close = Close::Closing { end, next: now + retry, tries: tries + 1 };
                self.counters.fins_sent += 1;
                let p = TransportPacket {
                    flow: self.flow,
                    options: TlvOptions::EMPTY,
                    message: TransportMessage::Fin { end },
                };
                return p.emit(buf).ok();
            }
        }
        None
    }

    fn check_complete(&mut self, now: Instant) {
        if self.close == Close::Open && !self.writing && self.tcp.is_done() {
            self.completed_at = Some(now);
            self.close = Close::Closing { end: self.written, next: now, tries: 0 };
        }
    }

    /// Bytes a datagram of this sender can take: the data header and one MSS.
    pub fn buffer_len(&self) -> usize {
        leoguard_wire::transport::DATA_HEADER_LEN + self.mss as usize
    }

    /// A datagram from the receiver.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), Dropped> {
        self.counters.datagrams_in += 1;
        let p = match TransportPacket::parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.counters.malformed += 1;
                return Err(Dropped::Malformed);
            }
        };
        if p.flow != self.flow {
            self.counters.other_flow += 1;
            return Err(Dropped::OtherFlow);
        }
        if p.options.unknown_critical(&[]).is_some() {
            self.counters.unknown_critical += 1;
            return Err(Dropped::UnknownCritical);
        }
        match p.message {
            TransportMessage::Ack(a) => {
                self.counters.acks += 1;
                let mut ack = to_proto_ack(&a);
                if let Some(o) = p.options.startcp() {
                    ack.startcp = Signal::from_wire(o.next_handover_us, o.recovered);
                    self.counters.startcp_signals += 1;
                }
                self.tcp.on_ack(now, &ack);
                self.check_complete(now);
                Ok(())
            }
            TransportMessage::FinAck { end } if matches!(self.close, Close::Closing { end: e, .. } if e == end) => {
                self.close = Close::Closed;
                Ok(())
            }
            TransportMessage::FinAck { .. } => Ok(()), // a late duplicate
            TransportMessage::Data(_) | TransportMessage::Fin { .. } => {
                self.counters.unexpected += 1;
                Err(Dropped::Unexpected)
            }
        }
    }

    /// When the sender next needs `handle_timeout` or can send: the connection's timers and pacing,
    /// the application's next write or its deadline, the next FIN.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.tcp.poll_timeout();
        let mut at = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        if self.writing {
            at(self.stop_at());
            if let (Some(iv), Some(s)) = (self.write_interval(), self.start) {
                // The write after the last one made.
                let k = self.written / self.mss.max(1);
                at(Some(s + Duration(iv.as_nanos().saturating_mul(k))));
            }
        }
        if let Close::Closing { next, .. } = self.close {
            at(Some(next));
        }
        t
    }

    /// Runs the timers that are due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.tcp.poll_timeout().is_some_and(|t| t <= now) {
            self.tcp.handle_timeout(now);
        }
        self.app_write(now);
        self.check_complete(now);
    }
}

/// The transport's ACK as the proto's (TSecr back into the sender's clock; StarTCP's signals, which
/// ride in the options area, are the caller's to add).
pub fn to_proto_ack(a: &AckRepr) -> Ack {
    Ack {
        cum: a.cum,
        sack: a.sack,
        n_sack: a.n_sack,
        rwnd: u64::from(a.rwnd),
        ts_ecr: a.ts_ecr_us.map(|us| Instant(us.saturating_mul(1_000))),
        startcp: Signal::NONE,
    }
}
