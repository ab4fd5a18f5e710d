//! Simulator agents that host the sans-IO TCP state machines of `leoguard-proto` on nodes: a sender
//! (bulk or fixed-size transfer) and a receiver, with per-packet and per-flow telemetry.

use crate::engine::{NodeId, Packet};
use crate::sim::{Agent, Ctx};
use leoguard_core::{Duration, Instant};
use leoguard_net::host::DeadlineTimer;
use leoguard_proto::tcp::{Ack, TcpReceiver, TcpSender};
use std::any::Any;

/// Packet flag: carries data.
pub const FLAG_DATA: u16 = 1;
/// Packet flag: carries an acknowledgement.
pub const FLAG_ACK: u16 = 2;
/// Packet flag: the data is a retransmission.
pub const FLAG_RETX: u16 = 4;
/// Packet flag (clear of the web and M-PEP flags 8-32): a StarTCP probe (no data; the StarTCP option with its probe flag).
pub const FLAG_PROBE: u16 = 64;
/// Packet flag: an ACK carrying StarTCP's recovery notice.
pub const FLAG_RECOVERED: u16 = 128;

/// TCP header bytes of a StarTCP option without a prediction (5, padded to 8) and with one (9 ->
/// 12); see leoguard-wire's `StartcpOption`.
const STARTCP_BARE: u32 = 8;
const STARTCP_PREDICTION: u32 = 12;

/// An ACK packet's `seq` carries the advertised window in its low 32 bits and StarTCP's predicted
/// next handover in its high 32 (microseconds from the ACK's sending, plus one; zero: none), as the
/// option on the wire carries them.
fn ack_seq(a: &Ack) -> u64 {
    let pred = a.startcp.next_handover_us().map_or(0, |us| u64::from(us) + 1);
    a.rwnd.min(u64::from(u32::MAX)) | (pred.min(u64::from(u32::MAX)) << 32)
}

/// The StarTCP signal an ACK packet carries (see [`ack_seq`]).
fn ack_signal(p: &Packet) -> leoguard_proto::startcp::Signal {
    let pred = (p.seq >> 32) as u32;
    leoguard_proto::startcp::Signal::from_wire(pred.checked_sub(1), p.flags & FLAG_RECOVERED != 0)
}

// (Bits 59-62 of an agent wrapping a source are the M-PEP source's own tokens: keep clear of them.)
const TOKEN_APP: u64 = 1 << 58;
const TOKEN_REPORT: u64 = 1 << 60;
const TOKEN_START: u64 = 1 << 61;
const TOKEN_TIMER: u64 = 1 << 62;
const TOKEN_SAMPLE: u64 = 1 << 63;

/// One sample of a flow's sender state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    /// When.
    pub t: Instant,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Smoothed RTT (zero before the first sample).
    pub srtt: Duration,
    /// Bytes acknowledged so far.
    pub acked: u64,
    /// Retransmissions so far.
    pub retransmissions: u64,
}

/// A TCP sender on a node.
#[derive(Debug)]
pub struct TcpSource {
    /// Flow id.
    pub flow: u32,
    /// Receiver's node.
    pub dst: NodeId,
    /// The state machine.
    pub tcp: TcpSender,
    /// Header bytes added to each segment on the wire.
    pub header: u32,
    /// IPv6 Traffic Class of its packets.
    pub tc: u8,
    /// Sampling interval of `samples` (zero: no sampling).
    pub sample_every: Duration,
    /// Sender state over time.
    pub samples: Vec<FlowSample>,
    /// When the last byte was acknowledged (fixed-size transfers).
    pub completed_at: Option<Instant>,
    /// When the flow starts sending.
    pub start_at: Instant,
    /// When the link layer reports an upcoming handover to the sender (SaTCP), in time order.
    pub handover_reports: Vec<Instant>,
    /// Record the first transmission of every `delay_every`-th new segment (0: none), for the
    /// application-perceived delay (send to in-order delivery, retransmissions and head-of-line
    /// blocking included).
    pub delay_every: u64,
    /// (first byte, length, first sent) of the recorded segments (of an application-limited
    /// stream: of the recorded writes, from the write).
    pub first_sent: Vec<(u64, u32, Instant)>,
    /// An application-limited stream: the application writes `.1` bytes every `.0` from the start
    /// (the sender must then be created with a limit of `Some(0)`); `None`: bulk or fixed size.
    pub app_rate: Option<(Duration, u32)>,
    originals: u64,
    writes: u64,
    /// While true the sender neither sends nor arms its protocol timer (its connection is being
    /// rebuilt: a split-TCP proxy it sends to is migrating).
    pub paused: bool,
    /// The protocol timer (RTO, TLP, RACK, pacing, StarTCP's).
    timer: DeadlineTimer,
}

impl TcpSource {
    /// A sender of flow `flow` to `dst`.
    pub fn new(flow: u32, dst: NodeId, tcp: TcpSender, sample_every: Duration) -> Self {
        TcpSource {
            flow,
            dst,
            tcp,
            header: 52,
            tc: 0,
            sample_every,
            samples: Vec::new(),
            completed_at: None,
            start_at: Instant::ZERO,
            handover_reports: Vec::new(),
            delay_every: 0,
            first_sent: Vec::new(),
            app_rate: None,
            originals: 0,
            writes: 0,
            paused: false,
            timer: DeadlineTimer::new(TOKEN_TIMER),
        }
    }

    /// Sends what the connection allows now and (re-)arms its timer (nothing while paused).
    pub fn pump(&mut self, ctx: &mut Ctx) {
        if self.paused {
            return;
        }
        let now = ctx.now();
        while let Some(seg) = self.tcp.poll_transmit(now) {
            if seg.probe {
                ctx.send(self.packet(seg.seq, self.header + STARTCP_BARE, FLAG_PROBE, now));
                continue;
            }
            let flags = FLAG_DATA | if seg.retransmission { FLAG_RETX } else { 0 };
            if !seg.retransmission && self.delay_every > 0 && self.app_rate.is_none() {
                if self.originals % self.delay_every == 0 {
                    self.first_sent.push((seg.seq, seg.len, now));
                }
                self.originals += 1;
            }
            ctx.send(self.packet(seg.seq, seg.len + self.header, flags, now));
        }
        if self.completed_at.is_none() && self.tcp.is_done() && self.app_rate.is_none() {
            self.completed_at = Some(now);
        }
        self.timer.set(self.tcp.poll_timeout().filter(|&t| t > now), ctx);
    }

    /// A packet of this flow to the receiver.
    fn packet(&self, seq: u64, size: u32, flags: u16, now: Instant) -> Packet {
        Packet {
            flow: self.flow,
            seq,
            size,
            dst: self.dst.0,
            sent_at: now,
            flags,
            net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        }
    }

    fn sample(&mut self, now: Instant) {
        self.samples.push(FlowSample {
            t: now,
            cwnd: self.tcp.cc().cwnd(),
            in_flight: self.tcp.in_flight(),
            srtt: self.tcp.srtt().unwrap_or(Duration::ZERO),
            acked: self.tcp.stats.bytes_acked,
            retransmissions: self.tcp.stats.retransmissions,
        });
    }
}

impl Agent for TcpSource {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, ctx: &mut Ctx) {
        if self.sample_every > Duration::ZERO {
            self.sample(ctx.now());
            ctx.timer(ctx.now() + self.sample_every, TOKEN_SAMPLE);
        }
        for (i, &t) in self.handover_reports.iter().enumerate() {
            ctx.timer(t, TOKEN_REPORT | i as u64);
        }
        if self.start_at > ctx.now() {
            ctx.timer(self.start_at, TOKEN_START);
        } else if self.app_rate.is_some() {
            self.on_timer(TOKEN_APP, ctx);
        } else {
            self.pump(ctx);
        }
    }

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        if p.flags & FLAG_ACK == 0 || p.flow != self.flow {
            return;
        }
        let ack = Ack {
            cum: p.ack,
            sack: p.sack,
            n_sack: p.n_sack,
            rwnd: p.seq & u64::from(u32::MAX),
            ts_ecr: p.ts_ecr,
            startcp: ack_signal(p),
        };
        self.tcp.on_ack(ctx.now(), &ack);
        self.pump(ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if token == TOKEN_APP {
            if let Some((every, chunk)) = self.app_rate {
                let at = self.tcp.limit().unwrap_or(0);
                if self.delay_every > 0 && self.writes % self.delay_every == 0 {
                    self.first_sent.push((at, chunk, ctx.now()));
                }
                self.writes += 1;
                self.tcp.write(u64::from(chunk));
                ctx.timer(ctx.now() + every, TOKEN_APP);
                self.pump(ctx);
            }
            return;
        }
        if token == TOKEN_SAMPLE {
            self.sample(ctx.now());
            if !self.tcp.is_done() || self.app_rate.is_some() {
                ctx.timer(ctx.now() + self.sample_every, TOKEN_SAMPLE);
            }
            return;
        }
        if token == TOKEN_START {
            if self.app_rate.is_some() {
                return self.on_timer(TOKEN_APP, ctx);
            }
            self.pump(ctx);
            return;
        }
        if token & TOKEN_REPORT != 0 && token & (TOKEN_START | TOKEN_TIMER | TOKEN_SAMPLE) == 0 {
            self.tcp.cc_report_handover(ctx.now());
            return;
        }
        if !self.timer.due(token, ctx) {
            return; // superseded, or early (re-armed for the deadline)
        }
        self.tcp.handle_timeout(ctx.now());
        self.pump(ctx);
    }
}

/// One data packet as the receiver saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRecord {
    /// First byte.
    pub seq: u64,
    /// When the sender emitted this copy.
    pub sent_at: Instant,
    /// When it arrived.
    pub received_at: Instant,
    /// Whether this copy was a retransmission.
    pub retransmission: bool,
    /// Links it crossed.
    pub hops: u16,
}

/// A TCP receiver on a node.
#[derive(Debug)]
pub struct TcpSink {
    /// Flow id.
    pub flow: u32,
    /// Sender's node (where ACKs go).
    pub peer: NodeId,
    /// The state machine.
    pub tcp: TcpReceiver,
    /// Every data packet received (if `record`).
    pub records: Vec<PacketRecord>,
    /// Whether to keep per-packet records.
    pub record: bool,
    /// IPv6 Traffic Class of its ACKs.
    pub tc: u8,
    /// Whether to record in-order delivery progress in `deliveries`.
    pub track_delivery: bool,
    /// (bytes delivered in order, when) each time in-order delivery advanced (if `track_delivery`).
    pub deliveries: Vec<(u64, Instant)>,
    /// The protocol timer (RTO, TLP, RACK, pacing, StarTCP's).
    timer: DeadlineTimer,
}

impl TcpSink {
    /// A receiver of flow `flow` whose ACKs go to `peer`.
    pub fn new(flow: u32, peer: NodeId, tcp: TcpReceiver, record: bool) -> Self {
        TcpSink {
            flow,
            peer,
            tcp,
            records: Vec::new(),
            record,
            tc: 0,
            track_delivery: false,
            deliveries: Vec::new(),
            timer: DeadlineTimer::new(TOKEN_TIMER),
        }
    }

    fn send_ack(&self, a: &Ack, ctx: &mut Ctx) {
        // The ACK's `seq` field carries the advertised window and StarTCP's prediction (`ack_seq`).
        let option = if a.startcp.next_handover.is_some() {
            STARTCP_PREDICTION
        } else if a.startcp.recovered {
            STARTCP_BARE
        } else {
            0
        };
        ctx.send(Packet {
            flow: self.flow,
            seq: ack_seq(a),
            ack: a.cum,
            sack: a.sack,
            n_sack: a.n_sack,
            ts_ecr: a.ts_ecr,
            size: 52 + option,
            dst: self.peer.0,
            sent_at: ctx.now(),
            flags: FLAG_ACK | if a.startcp.recovered { FLAG_RECOVERED } else { 0 },
            net: crate::engine::NetFields { tc: self.tc, ..Default::default() },
            ..Default::default()
        });
    }

    fn arm(&mut self, ctx: &mut Ctx) {
        self.timer.set(self.tcp.poll_timeout().filter(|&t| t > ctx.now()), ctx);
    }
}

impl Agent for TcpSink {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_packet(&mut self, p: &Packet, ctx: &mut Ctx) {
        if p.flow != self.flow {
            return;
        }
        if p.flags & FLAG_PROBE != 0 {
            if let Some(a) = self.tcp.on_probe(ctx.now()) {
                self.send_ack(&a, ctx);
            }
            self.arm(ctx);
            return;
        }
        if p.flags & FLAG_DATA == 0 {
            return;
        }
        if self.record {
            self.records.push(PacketRecord {
                seq: p.seq,
                sent_at: p.sent_at,
                received_at: ctx.now(),
                retransmission: p.flags & FLAG_RETX != 0,
                hops: p.hops,
            });
        }
        let len = p.size.saturating_sub(52);
        let before = self.tcp.delivered;
        let (_, ack) = self.tcp.on_segment(ctx.now(), p.seq, len, p.sent_at);
        if self.track_delivery && self.tcp.delivered > before {
            self.deliveries.push((self.tcp.delivered, ctx.now()));
        }
        if let Some(a) = ack {
            self.send_ack(&a, ctx);
        }
        self.arm(ctx);
    }

    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        if !self.timer.due(token, ctx) {
            return;
        }
        if let Some(a) = self.tcp.handle_timeout(ctx.now()) {
            self.send_ack(&a, ctx);
        }
        self.arm(ctx);
    }
}

/// The application-perceived delay of the recorded segments of a flow: (first byte, first sent,
/// delivered in order to the application or `None` if it never was), from the sender's
/// `first_sent` and the receiver's `deliveries` (both in increasing order).
pub fn app_delays(
    first_sent: &[(u64, u32, Instant)],
    deliveries: &[(u64, Instant)],
) -> Vec<(u64, Instant, Option<Instant>)> {
    first_sent
        .iter()
        .map(|&(seq, len, sent)| {
            let end = seq + u64::from(len);
            let i = deliveries.partition_point(|&(d, _)| d < end);
            (seq, sent, deliveries.get(i).map(|x| x.1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::QueueLimit;
    use crate::sim::{chain, Sim};
    use leoguard_core::Bps;
    use leoguard_proto::cc;
    use leoguard_proto::tcp::TcpConfig;

    fn flow_over_chain(cc_name: &str, bytes: Option<u64>, hops: usize) -> (Sim, Vec<crate::engine::LinkId>) {
        let (mut sim, fwd) = chain(hops, Bps::mbps(100), Duration::from_millis(2), QueueLimit::Bytes(1_000_000), 5);
        let cfg = TcpConfig::default();
        let tx = TcpSender::new(cfg, cc::build(cc_name, u64::from(cfg.mss), cfg.init_cwnd_segments).unwrap(), bytes);
        sim.attach(NodeId(0), Box::new(TcpSource::new(1, NodeId(hops as u32), tx, Duration::from_millis(100))));
        sim.attach(NodeId(hops as u32), Box::new(TcpSink::new(1, NodeId(0), TcpReceiver::new(cfg), true)));
        (sim, fwd)
    }

    fn source(sim: &Sim) -> &TcpSource {
        sim.agent(NodeId(0)).and_then(|a| a.as_any().downcast_ref()).unwrap()
    }

    fn sink(sim: &Sim, n: u32) -> &TcpSink {
        sim.agent(NodeId(n)).and_then(|a| a.as_any().downcast_ref()).unwrap()
    }

    #[test]
    fn a_transfer_over_a_chain_completes_with_every_byte_once() {
        let (mut sim, _) = flow_over_chain("newreno", Some(5_000_000), 9);
        sim.run(Instant(30_000_000_000));
        let (src, dst) = (source(&sim), sink(&sim, 9));
        assert_eq!(dst.tcp.delivered, 5_000_000);
        assert_eq!(dst.tcp.duplicates, 0);
        assert!(src.completed_at.is_some());
        assert!(dst.records.iter().all(|r| r.hops == 9));
        // Propagation 2 x 9 x 2 ms = 36 ms; the smoothed RTT must be at least that.
        assert!(src.samples.iter().any(|s| s.srtt >= Duration::from_millis(36)));
    }

    #[test]
    fn a_blackout_longer_than_the_rto_is_survived_by_backoff() {
        let (mut sim, fwd) = flow_over_chain("newreno", Some(8_000_000), 3);
        sim.schedule_link_state(Instant(500_000_000), fwd[1], false);
        sim.schedule_link_state(Instant(2_500_000_000), fwd[1], true);
        sim.run(Instant(60_000_000_000));
        let (src, dst) = (source(&sim), sink(&sim, 3));
        assert_eq!(dst.tcp.delivered, 8_000_000);
        assert!(src.tcp.stats.rtos >= 2, "{} RTOs", src.tcp.stats.rtos);
        assert!(src.completed_at.unwrap() > Instant(2_500_000_000));
        // The application saw every byte once, in order, despite the blackout.
        assert_eq!(dst.tcp.rcv_nxt(), 8_000_000);
    }
}
