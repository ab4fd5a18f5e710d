//! A tiny deterministic network for the sans-IO ends (smoltcp's `netsim` idea): a bottleneck of
//! `rate` with a FIFO of `queue` datagrams and a one-way `delay` each way, seeded Bernoulli loss,
//! periodic outages (handover interruptions), and scripted microsecond time. The ends run exactly as
//! under the binary, minus the socket.

use std::collections::VecDeque;

use leoguard_core::{stream, Bps, Bytes, Duration, Instant, RngStream};
use leoguard_proto::tcp::TcpConfig;

use crate::receiver::Receiver;
use crate::sender::{Amount, Sender, SenderConfig};

struct Dir {
    /// (offered, arrival, datagram)
    inflight: VecDeque<(Instant, Instant, Vec<u8>)>,
    busy_until: Instant,
    loss: f64,
    rng: RngStream,
    /// Drop datagrams for which this returns true (besides the random loss).
    filter: fn(&[u8]) -> bool,
    dropped: u64,
}

impl Dir {
    fn offer(&mut self, now: Instant, d: Vec<u8>, rate: Bps, delay: Duration, queue: usize) {
        let queued = self.inflight.iter().filter(|(_, t, _)| *t > now + delay).count();
        if queued >= queue || (self.filter)(&d) || self.rng.bernoulli(self.loss) {
            self.dropped += 1;
            return;
        }
        let tx = rate.transmission_time(Bytes(d.len() as u64 + 48)).unwrap_or(Duration::ZERO);
        self.busy_until = self.busy_until.max(now) + tx;
        self.inflight.push_back((now, self.busy_until + delay, d));
    }
}

/// Whether the link is down at some time in [from, to]: outages of `len` every `period`, the first
/// at `period`.
fn hits_outage(outage: Option<(Duration, Duration)>, from: Instant, to: Instant) -> bool {
    let Some((period, len)) = outage else { return false };
    let p = period.as_nanos().max(1);
    // The first outage starting after `from`, and the one `from` may lie in.
    let k = from.as_nanos() / p;
    let in_current = k >= 1 && from.as_nanos() < k * p + len.as_nanos();
    in_current || (k + 1) * p <= to.as_nanos()
}

/// The outcome of a run.
pub(crate) struct Run {
    pub sender: Sender,
    pub receiver: Receiver,
    pub now: Instant,
    pub dropped: (u64, u64),
}

/// Network parameters.
#[derive(Clone, Copy)]
pub(crate) struct Net {
    pub rate: Bps,
    pub delay: Duration,
    pub queue: usize,
    pub loss_fwd: f64,
    pub loss_rev: f64,
    pub seed: u64,
    pub fwd_filter: fn(&[u8]) -> bool,
    pub rev_filter: fn(&[u8]) -> bool,
    /// (period, length): both directions are down for `length` every `period` from `period` on;
    /// a datagram on the link (from its offer to its arrival) at any moment of an outage is lost.
    pub outage: Option<(Duration, Duration)>,
}

impl Default for Net {
    fn default() -> Net {
        Net {
            rate: Bps::mbps(20),
            delay: Duration::from_millis(10),
            queue: 100,
            loss_fwd: 0.0,
            loss_rev: 0.0,
            seed: 1,
            fwd_filter: |_| false,
            rev_filter: |_| false,
            outage: None,
        }
    }
}

fn up_to_us(t: Instant) -> Instant {
    Instant(t.0.div_ceil(1_000) * 1_000)
}

pub(crate) fn sender_config(cc: &str, amount: Amount) -> SenderConfig {
    SenderConfig {
        flow: 42,
        cc: cc.into(),
        tcp: TcpConfig { mss: 1400, ..TcpConfig::default() },
        amount,
        rate: None,
        startcp: None,
    }
}

/// Runs `cfg` across `net` until the sender has finished or `limit` passes.
pub(crate) fn run(cfg: &SenderConfig, net: Net, limit: Duration) -> Run {
    let mut s = Sender::new(cfg).expect("known controller");
    let mut r = if cfg.cc == "startcp" {
        let star = cfg.startcp.clone().unwrap_or_default().config;
        Receiver::with_startcp(cfg.tcp, star).expect("valid StarTCP configuration")
    } else {
        Receiver::new(cfg.tcp)
    };
    let mk = |name: &str, loss: f64, filter: fn(&[u8]) -> bool| Dir {
        inflight: VecDeque::new(),
        busy_until: Instant::ZERO,
        loss,
        rng: stream(net.seed, name),
        filter,
        dropped: 0,
    };
    let mut fwd = mk("netsim/fwd", net.loss_fwd, net.fwd_filter);
    let mut rev = mk("netsim/rev", net.loss_rev, net.rev_filter);
    let mut now = Instant::ZERO;
    let end = Instant::ZERO + limit;
    let mut buf = vec![0u8; 65_536];
    while now < end && !s.is_finished() {
        while fwd.inflight.front().is_some_and(|(_, t, _)| *t <= now) {
            let (sent, at, d) = fwd.inflight.pop_front().expect("front");
            if hits_outage(net.outage, sent, at) {
                fwd.dropped += 1;
            } else {
                let _ = r.handle_datagram(now, &d);
            }
        }
        while rev.inflight.front().is_some_and(|(_, t, _)| *t <= now) {
            let (sent, at, d) = rev.inflight.pop_front().expect("front");
            if hits_outage(net.outage, sent, at) {
                rev.dropped += 1;
            } else {
                let _ = s.handle_datagram(now, &d);
            }
        }
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        if r.poll_timeout().is_some_and(|t| t <= now) {
            r.handle_timeout(now);
        }
        while let Some(n) = s.poll_transmit(now, &mut buf) {
            fwd.offer(now, buf[..n].to_vec(), net.rate, net.delay, net.queue);
        }
        while let Some(n) = r.poll_transmit(&mut buf) {
            rev.offer(now, buf[..n].to_vec(), net.rate, net.delay, net.queue);
        }
        let next =
            [s.poll_timeout(), r.poll_timeout(), fwd.inflight.front().map(|x| x.1), rev.inflight.front().map(|x| x.1)]
                .into_iter()
                .flatten()
                .min();
        // Every wake-up moves time on by at least a microsecond (a deadline in the past is a bug the
        // limit then catches instead of a hang).
        now = up_to_us(next.unwrap_or(end).max(now + Duration::from_micros(1)));
    }
    Run { sender: s, receiver: r, now, dropped: (fwd.dropped, rev.dropped) }
}

mod tests {
    use super::*;
    use leoguard_wire::transport::{TYPE_DATA, TYPE_FIN_ACK};
    use leoguard_wire::{TlvOption, TlvOptions, TransportMessage, TransportPacket};

    #[test]
    fn every_controller_delivers_every_byte_once_across_loss() {
        for cc in leoguard_proto::cc::ALGORITHMS {
            let cfg = sender_config(cc, Amount::Bytes(3_000_000));
            let net = Net { loss_fwd: 0.02, loss_rev: 0.02, seed: 7, ..Net::default() };
            let out = run(&cfg, net, Duration::from_secs(60));
            let (s, r) = (&out.sender, &out.receiver);
            assert!(s.is_complete() && s.is_closed(), "{cc}: not finished at {:?}", out.now);
            assert_eq!(r.delivered(), 3_000_000, "{cc}");
            assert_eq!(s.stats().bytes_acked, 3_000_000, "{cc}");
            assert_eq!(r.counters.corrupt + r.counters.malformed + s.counters.malformed, 0, "{cc}");
            assert!(s.stats().retransmissions > 0 && out.dropped.0 > 0, "{cc}: the loss must have bitten");
            assert!(r.completed_at().is_some());
            // 3 MB at no more than 20 Mbit/s takes at least 1.2 s.
            assert!(out.now > Instant::from_secs_f64(1.2), "{cc}: {:?}", out.now);
        }
    }

    #[test]
    fn a_timed_sender_stops_writing_at_its_deadline_and_finishes_what_it_wrote() {
        let cfg = sender_config("bbr", Amount::For(Duration::from_secs(3)));
        let out = run(&cfg, Net::default(), Duration::from_secs(20));
        let (s, r) = (&out.sender, &out.receiver);
        assert!(s.is_complete() && s.is_closed());
        assert_eq!(r.delivered(), s.written());
        // 20 Mbit/s for 3 s is at most 7.5 MB; BBR fills most of it.
        let mb = s.written() as f64 / 1e6;
        assert!((4.5..7.5).contains(&mb), "{mb} MB");
        let done = s.completed_at().expect("complete").as_secs_f64();
        assert!((3.0..3.5).contains(&done), "completed at {done} s");
    }

    #[test]
    fn an_application_rate_limits_what_is_written() {
        let mut cfg = sender_config("cubic", Amount::For(Duration::from_secs(2)));
        cfg.rate = Some(Bps::mbps(4));
        let out = run(&cfg, Net::default(), Duration::from_secs(10));
        // 4 Mbit/s for 2 s: 1 MB, one MSS at a time.
        let w = out.sender.written();
        assert!((980_000..=1_002_800).contains(&w), "{w}");
        assert_eq!(w % 1400, 0);
        assert_eq!(out.receiver.delivered(), w);
        // Application-limited: the window never limits it, so nothing queues and nothing is resent.
        assert_eq!(out.sender.stats().retransmissions, 0);
    }

    #[test]
    fn lost_fin_acks_end_in_an_unconfirmed_but_complete_close() {
        let cfg = sender_config("newreno", Amount::Bytes(100_000));
        let net = Net { rev_filter: |d| d.get(1) == Some(&TYPE_FIN_ACK), ..Net::default() };
        let out = run(&cfg, net, Duration::from_secs(30));
        let s = &out.sender;
        assert!(s.is_finished() && s.is_complete() && !s.is_closed());
        assert_eq!(s.counters.fins_sent, u64::from(crate::sender::FIN_TRIES));
        assert_eq!(out.receiver.counters.fins, u64::from(crate::sender::FIN_TRIES));
        assert_eq!(out.receiver.delivered(), 100_000);
    }

    #[test]
    fn corrupted_payloads_are_dropped_and_repaired_by_retransmission() {
        // Every 50th data datagram has a payload byte flipped on the way: dropped as corrupt, so the
        // sender sees it as lost and resends it.
        let cfg = sender_config("cubic", Amount::Bytes(500_000));
        let mut s = Sender::new(&cfg).expect("cc");
        let mut r = Receiver::new(cfg.tcp);
        let mut buf = vec![0u8; 2048];
        let mut now = Instant::ZERO;
        let mut k = 0u32;
        for _ in 0..200_000 {
            if s.is_finished() {
                break;
            }
            while let Some(n) = s.poll_transmit(now, &mut buf) {
                k += 1;
                if buf[1] == TYPE_DATA && k % 50 == 0 {
                    buf[n - 1] ^= 0x01;
                }
                let _ = r.handle_datagram(now, &buf[..n]);
            }
            let mut acks = Vec::new();
            while let Some(n) = r.poll_transmit(&mut buf) {
                acks.push(buf[..n].to_vec());
            }
            now += Duration::from_millis(5);
            for a in acks {
                let _ = s.handle_datagram(now, &a);
            }
            if r.poll_timeout().is_some_and(|t| t <= now) {
                r.handle_timeout(now);
            }
            if s.poll_timeout().is_some_and(|t| t <= now) {
                s.handle_timeout(now);
            }
        }
        assert!(s.is_closed());
        assert_eq!(r.delivered(), 500_000);
        assert!(r.counters.corrupt > 0 && s.stats().retransmissions >= r.counters.corrupt);
    }

    #[test]
    fn foreign_critical_and_malformed_datagrams_are_dropped_and_counted() {
        let mut r = Receiver::new(TcpConfig::default());
        let now = Instant::ZERO;
        let mut payload = [0u8; 100];
        crate::pattern::fill(0, &mut payload);
        let data = |flow: u32, options: TlvOptions<'static>, payload: &'static [u8]| {
            let p = TransportPacket {
                flow,
                options,
                message: TransportMessage::Data(leoguard_wire::DataSegment {
                    seq: 0,
                    retransmission: false,
                    ts_us: 1,
                    payload,
                }),
            };
            let mut b = vec![0u8; p.buffer_len()];
            p.emit(&mut b).expect("emit");
            b
        };
        let payload: &'static [u8] = Box::leak(Box::new(payload));
        let mut area = [0u8; 8];
        let n = TlvOptions::emit_list(&[TlvOption { kind: 0x85, value: &[1] }], &mut area).expect("area");
        let area: &'static [u8] = Box::leak(area[..n].to_vec().into_boxed_slice());
        let critical = TlvOptions::parse(area).expect("valid");
        let mut area2 = [0u8; 8];
        let n2 = TlvOptions::emit_list(&[TlvOption { kind: 0x05, value: &[1] }], &mut area2).expect("area");
        let area2: &'static [u8] = Box::leak(area2[..n2].to_vec().into_boxed_slice());
        let optional = TlvOptions::parse(area2).expect("valid");
        assert_eq!(r.handle_datagram(now, &[1, 2, 3]), Err(crate::Dropped::Malformed));
        assert_eq!(r.handle_datagram(now, &data(5, critical, payload)), Err(crate::Dropped::UnknownCritical));
        assert_eq!(r.handle_datagram(now, &data(5, optional, payload)), Ok(()));
        assert_eq!(r.handle_datagram(now, &data(6, TlvOptions::EMPTY, payload)), Err(crate::Dropped::OtherFlow));
        let c = r.counters;
        assert_eq!((c.malformed, c.unknown_critical, c.other_flow, c.segments), (1, 1, 1, 1));
        assert_eq!(r.delivered(), 100);
    }
}
