//! The receiving end without I/O: leoguard-proto's [`TcpReceiver`] (in-order, exactly-once delivery,
//! delayed ACKs, SACK and DSACK, timestamps) behind the transport's framing, a check of every payload
//! byte against the sender's pattern, and the close handshake (a FIN is answered with a FIN-ACK once
//! the whole stream is held). It serves one connection: the flow of the first valid datagram.
//!
//! With StarTCP ([`Receiver::with_startcp`]) the proto's receiver runs the Handover Manager on the
//! datagrams' arrival times (the driver's clock): a probe (a data segment without payload, the probe
//! flag in option kind 1) counts as an arrival, and every ACK carries the manager's signal (the
//! predicted next handover as an offset from the ACK's sending, the recovery notice) in option kind 1.

use std::collections::VecDeque;

use leoguard_core::Instant;
use leoguard_proto::startcp::{HandoverManager, StartcpConfig, StartcpError};
use leoguard_proto::tcp::{Ack, TcpConfig, TcpReceiver};
use leoguard_wire::transport::STARTCP_TLV_MAX;
use leoguard_wire::{AckRepr, StartcpOption, TlvOptions, TransportMessage, TransportPacket};

use crate::{pattern, Dropped};

/// Counters of what arrived at the receiver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReceiverCounters {
    /// Datagrams handed to `handle_datagram`.
    pub datagrams_in: u64,
    /// Data segments taken (duplicates included).
    pub segments: u64,
    /// Data segments that carried only bytes already held.
    pub duplicates: u64,
    /// Dropped: not a valid transport datagram.
    pub malformed: u64,
    /// Dropped: another connection's.
    pub other_flow: u64,
    /// Dropped: carried a critical option this end does not know.
    pub unknown_critical: u64,
    /// Dropped: a message a receiver does not take (ACK, FIN-ACK).
    pub unexpected: u64,
    /// Dropped: payload bytes that are not the stream's at their offset.
    pub corrupt: u64,
    /// ACKs queued.
    pub acks: u64,
    /// FINs received.
    pub fins: u64,
    /// StarTCP probes taken (data segments without payload).
    pub probes: u64,
    /// ACKs that carried StarTCP's signals.
    pub startcp_signals: u64,
}

#[derive(Clone, Copy, Debug)]
enum Out {
    Ack(Ack),
    FinAck(u64),
}

/// One receiving end.
#[derive(Debug)]
pub struct Receiver {
    tcp: TcpReceiver,
    flow: Option<u32>,
    end: Option<u64>,
    out: VecDeque<Out>,
    first_data: Option<Instant>,
    last_delivery: Option<Instant>,
    completed_at: Option<Instant>,
    /// Counters.
    pub counters: ReceiverCounters,
}

impl Receiver {
    /// A receiver with TCP parameters `cfg` (delayed ACKs, receive window, DSACK and quick-ACK
    /// switches).
    pub fn new(cfg: TcpConfig) -> Receiver {
        Receiver::with_tcp(TcpReceiver::new(cfg))
    }

    /// A receiver that runs StarTCP's Handover Manager with `star` (its peer is a `startcp` sender).
    pub fn with_startcp(cfg: TcpConfig, star: StartcpConfig) -> Result<Receiver, StartcpError> {
        Ok(Receiver::with_tcp(TcpReceiver::with_startcp(cfg, star)?))
    }

    /// StarTCP's Handover Manager (detected interruptions, the phase), when on.
    pub fn startcp(&self) -> Option<&HandoverManager> {
        self.tcp.startcp()
    }

    fn with_tcp(tcp: TcpReceiver) -> Receiver {
        Receiver {
            tcp,
            flow: None,
            end: None,
            out: VecDeque::with_capacity(8),
            first_data: None,
            last_delivery: None,
            completed_at: None,
            counters: ReceiverCounters::default(),
        }
    }

    /// The connection served, once a datagram chose it.
    pub fn flow(&self) -> Option<u32> {
        self.flow
    }

    /// Bytes delivered in order so far.
    pub fn delivered(&self) -> u64 {
        self.tcp.delivered
    }

    /// When the first data segment arrived.
    pub fn first_data_at(&self) -> Option<Instant> {
        self.first_data
    }

    /// When the last in-order bytes were delivered.
    pub fn last_delivery_at(&self) -> Option<Instant> {
        self.last_delivery
    }

    /// When the whole stream was held and the sender's FIN answered, if it was.
    pub fn completed_at(&self) -> Option<Instant> {
        self.completed_at
    }

    /// The stream's length, once the FIN told it.
    pub fn stream_end(&self) -> Option<u64> {
        self.end
    }

    /// A datagram from the sender. `Ok` means it was this connection's and was taken: the driver
    /// then answers to its source address.
    pub fn handle_datagram(&mut self, now: Instant, datagram: &[u8]) -> Result<(), Dropped> {
        self.counters.datagrams_in += 1;
        let p = match TransportPacket::parse(datagram) {
            Ok(p) => p,
            Err(_) => {
                self.counters.malformed += 1;
                return Err(Dropped::Malformed);
            }
        };
        if p.options.unknown_critical(&[]).is_some() {
            self.counters.unknown_critical += 1;
            return Err(Dropped::UnknownCritical);
        }
        if !matches!(p.message, TransportMessage::Data(_) | TransportMessage::Fin { .. }) {
            self.counters.unexpected += 1;
            return Err(Dropped::Unexpected);
        }
        if *self.flow.get_or_insert(p.flow) != p.flow {
            self.counters.other_flow += 1;
            return Err(Dropped::OtherFlow);
        }
        match p.message {
            TransportMessage::Data(d) => {
                if !pattern::check(d.seq, d.payload) {
                    self.counters.corrupt += 1;
                    return Err(Dropped::Corrupt);
                }
                if d.payload.is_empty() {
                    // A StarTCP probe (flag P), or an empty segment, which the proto takes the same
                    // way: an arrival for the Handover Manager, never data.
                    self.counters.probes += 1;
                    if let Some(a) = self.tcp.on_probe(now) {
                        self.queue(Out::Ack(a));
                    }
                    return Ok(());
                }
                self.counters.segments += 1;
                self.first_data.get_or_insert(now);
                let before = self.tcp.duplicates;
                let ts = Instant(d.ts_us.saturating_mul(1_000));
                let (newly, ack) = self.tcp.on_segment(now, d.seq, d.payload.len() as u32, ts);
                self.counters.duplicates += self.tcp.duplicates - before;
                if newly > 0 {
                    self.last_delivery = Some(now);
                }
                if let Some(a) = ack {
                    self.queue(Out::Ack(a));
                }
                self.try_complete(now, false);
            }
            TransportMessage::Fin { end } => {
                self.counters.fins += 1;
                self.end = Some(end);
                if !self.try_complete(now, true) {
                    // Not all there yet (the sender closes only once everything is acknowledged, so
                    // an ACK was lost): say where the stream stands.
                    let a = self.tcp.ack_now();
                    self.queue(Out::Ack(a));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Answers the FIN once the whole stream is held: when the stream completes, and every FIN after
    /// that (`fin`: this datagram is one), since a FIN-ACK may be lost.
    fn try_complete(&mut self, now: Instant, fin: bool) -> bool {
        match self.end {
            Some(end) if self.tcp.rcv_nxt() >= end => {
                if self.completed_at.is_none() || fin {
                    self.completed_at.get_or_insert(now);
                    self.queue(Out::FinAck(end));
                }
                true
            }
            _ => false,
        }
    }

    fn queue(&mut self, o: Out) {
        if matches!(o, Out::Ack(_)) {
            self.counters.acks += 1;
        }
        // The driver sends after every datagram, so this stays short; a stuck socket must not grow
        // it without bound (a lost ACK is repaired by the next one).
        if self.out.len() >= 64 {
            self.out.pop_front();
        }
        self.out.push_back(o);
    }

    /// The next datagram to send, written to `buf` (at least 96 bytes); returns its length.
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<usize> {
        let flow = self.flow?;
        let mut area = [0u8; STARTCP_TLV_MAX];
        let mut options = TlvOptions::EMPTY;
        let message = match self.out.pop_front()? {
            Out::Ack(a) => {
                if !a.startcp.is_none() {
                    let o = StartcpOption {
                        probe: false,
                        recovered: a.startcp.recovered,
                        next_handover_us: a.startcp.next_handover_us(),
                    };
                    let n = TlvOptions::emit_startcp(&o, &mut area).ok()?;
                    // Just written by the encoder, so it parses.
                    options = TlvOptions::parse(&area[..n]).ok()?;
                    self.counters.startcp_signals += 1;
                }
                TransportMessage::Ack(to_wire_ack(&a))
            }
            Out::FinAck(end) => TransportMessage::FinAck { end },
        };
        TransportPacket { flow, options, message }.emit(buf).ok()
    }

    /// When the delayed-ACK timer fires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.tcp.poll_timeout()
    }

    /// Runs the delayed-ACK timer if it is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(a) = self.tcp.handle_timeout(now) {
            self.queue(Out::Ack(a));
        }
    }
}

/// The proto's ACK on the wire (a window beyond 4 GiB is sent as 4 GiB; TSecr in microseconds).
pub fn to_wire_ack(a: &Ack) -> AckRepr {
    let n = a.n_sack.min(3);
    let mut sack = [(0, 0); 3];
    sack[..usize::from(n)].copy_from_slice(&a.sack[..usize::from(n)]);
    AckRepr {
        cum: a.cum,
        sack,
        n_sack: n,
        rwnd: u32::try_from(a.rwnd).unwrap_or(u32::MAX),
        ts_ecr_us: a.ts_ecr.map(|t| t.as_nanos() / 1_000),
    }
}
