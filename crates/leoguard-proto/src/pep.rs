//! A split-TCP performance-enhancing proxy (RFC 3135 §2.4: the proxy terminates the upstream TCP
//! connection, acknowledges data locally and relays it downstream on a connection of its own), as the
//! M-PEP baseline of the SATGUARD paper (§4: "M-PEPs on the ground stations, dishes and their ingress
//! satellites") uses it. Sans-IO: data segments and ACKs in, ACKs and segments out.
//!
//! Buffering and backpressure: the proxy holds the bytes it received but the downstream receiver has
//! not acknowledged (in order and out of order) in one buffer of `buffer` bytes. It advertises the free
//! room as its receive window, so the upstream sender may send up to `snd_una(downstream) + buffer`;
//! when the downstream connection frees room while the upstream has stopped on a closed window, the
//! proxy sends a window update (RFC 9293 §3.8.6.2.2: the receiver announces a window once it has grown
//! by a significant amount; here a quarter of the buffer, at least 2 MSS).

use crate::cc::CongestionControl;
use crate::tcp::{Ack, Segment, TcpConfig, TcpReceiver, TcpSender};
use leoguard_core::Instant;

/// One split-TCP proxy: the receiving end of the upstream connection and the sending end of the
/// downstream one, over a bounded buffer.
#[derive(Debug)]
pub struct SplitProxy {
    /// The upstream connection's receiver (acknowledges locally).
    pub rx: TcpReceiver,
    /// The downstream connection's sender (relays what `rx` delivered in order).
    pub tx: TcpSender,
    buffer: u64,
    mss: u64,
    /// Right edge of the window last advertised upstream.
    last_edge: u64,
    /// Pure window updates sent.
    pub window_updates: u64,
}

impl SplitProxy {
    /// A proxy with a `buffer`-byte buffer relaying with controller `cc`.
    pub fn new(cfg: TcpConfig, cc: Box<dyn CongestionControl>, buffer: u64) -> Self {
        SplitProxy {
            rx: TcpReceiver::new(cfg),
            tx: TcpSender::new(cfg, cc, Some(0)),
            buffer,
            mss: u64::from(cfg.mss),
            last_edge: buffer,
            window_updates: 0,
        }
    }

    /// Bytes held: received in order but not yet acknowledged downstream, plus out-of-order bytes.
    pub fn buffered(&self) -> u64 {
        self.rx.rcv_nxt().saturating_sub(self.tx.snd_una()) + self.rx.ooo_bytes()
    }

    /// The buffer size.
    pub fn buffer(&self) -> u64 {
        self.buffer
    }

    fn advertise(&mut self, mut a: Ack) -> Ack {
        let edge = self.tx.snd_una() + self.buffer;
        a.rwnd = edge.saturating_sub(a.cum);
        self.last_edge = edge;
        a
    }

    /// A data segment from upstream sent at `ts` (its TSval): the bytes it completes in order are
    /// handed to the downstream sender; returns the ACK to send upstream now, if any.
    pub fn on_data(&mut self, now: Instant, seq: u64, len: u32, ts: Instant) -> Option<Ack> {
        let (newly, ack) = self.rx.on_segment(now, seq, len, ts);
        if newly > 0 {
            self.tx.write(newly);
        }
        ack.map(|a| self.advertise(a))
    }

    /// An ACK from downstream; returns a window update to send upstream if the room it freed is
    /// significant.
    pub fn on_ack(&mut self, now: Instant, ack: &Ack) -> Option<Ack> {
        self.tx.on_ack(now, ack);
        let edge = self.tx.snd_una() + self.buffer;
        if edge >= self.last_edge + (self.buffer / 4).max(2 * self.mss) {
            self.window_updates += 1;
            let a = self.rx.ack_now();
            return Some(self.advertise(a));
        }
        None
    }

    /// The next segment to relay downstream now, if any.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Segment> {
        self.tx.poll_transmit(now)
    }

    /// When `handle_timeout` is next needed (downstream RTO or pacing, upstream delayed ACK).
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.tx.poll_timeout(), self.rx.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Handles the timers; returns a delayed ACK to send upstream, if one is due.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Ack> {
        self.tx.handle_timeout(now);
        self.rx.handle_timeout(now).map(|a| self.advertise(a))
    }

    /// Rebuilds the downstream connection from byte `at` (what the downstream receiver holds in order)
    /// with a fresh controller `cc` (slow start), after the proxy's state migrated.
    pub fn restart_downstream(&mut self, cc: Box<dyn CongestionControl>, at: u64) {
        self.tx.restart(cc, at.min(self.rx.rcv_nxt()));
    }

    /// The ACK announcing the proxy upstream after a reconnection (its in-order point and window).
    pub fn reconnect_ack(&mut self) -> Ack {
        let a = self.rx.ack_now();
        self.advertise(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc;
    use leoguard_core::Duration;

    fn proxy(buffer: u64) -> SplitProxy {
        let cfg = TcpConfig::default();
        SplitProxy::new(cfg, cc::build("newreno", 1448, 10).unwrap(), buffer)
    }

    #[test]
    fn data_is_relayed_in_order_and_the_window_shrinks_with_the_buffer() {
        let mut p = proxy(10 * 1448);
        let t = Instant::ZERO;
        // Out of order first: nothing to relay, an immediate ACK with a SACK block.
        let a = p.on_data(t, 1448, 1448, t).expect("out-of-order data is acknowledged at once");
        assert_eq!((a.cum, a.n_sack), (0, 1));
        assert!(p.poll_transmit(t).is_none());
        assert_eq!(p.buffered(), 1448);
        // The hole filled: both segments go downstream in order.
        let a = p.on_data(t, 0, 1448, t).expect("a segment filling a hole is acknowledged at once");
        assert_eq!(a.cum, 2 * 1448);
        // The window is the buffer minus what it holds (nothing acknowledged downstream yet).
        assert_eq!(a.rwnd, 8 * 1448);
        let s1 = p.poll_transmit(t).unwrap();
        let s2 = p.poll_transmit(t).unwrap();
        assert_eq!((s1.seq, s2.seq, s2.len), (0, 1448, 1448));
        assert!(p.poll_transmit(t).is_none(), "nothing more written");
        // Downstream acknowledges both: the room comes back and is announced (2 MSS >= 10/4 MSS? no:
        // the threshold is max(buffer/4, 2 MSS) = 2.5 MSS, so 2 MSS freed is not yet worth an update).
        let later = t + Duration::from_millis(10);
        let up = p.on_ack(later, &Ack { cum: 2 * 1448, rwnd: 1 << 20, ..Default::default() });
        assert!(up.is_none());
        assert_eq!(p.buffered(), 0);
    }

    #[test]
    fn a_full_buffer_closes_the_window_and_a_drain_reopens_it_with_an_update() {
        let mut p = proxy(4 * 1448);
        let t = Instant::ZERO;
        let mut last = None;
        for k in 0..4 {
            last = p.on_data(t, k * 1448, 1448, t).or(last);
        }
        let a = p.rx.ack_now();
        assert_eq!(a.cum, 4 * 1448);
        assert_eq!(p.buffered(), 4 * 1448);
        assert_eq!(last.unwrap().rwnd, 0, "the buffer is full: the window is closed");
        while p.poll_transmit(t).is_some() {}
        // Downstream acknowledges 2 of 4: 2 MSS freed >= max(1 MSS, 2 MSS): an update opens 2 MSS.
        let up = p.on_ack(t + Duration::from_millis(5), &Ack { cum: 2 * 1448, rwnd: 1 << 20, ..Default::default() });
        let up = up.expect("a window update");
        assert_eq!((up.cum, up.rwnd), (4 * 1448, 2 * 1448));
        assert_eq!(p.window_updates, 1);
    }

    #[test]
    fn a_restart_resends_from_the_receivers_point_in_slow_start() {
        let mut p = proxy(1 << 20);
        let t = Instant::ZERO;
        for k in 0..40 {
            p.on_data(t, k * 1448, 1448, t);
        }
        // Grow the downstream window over a few round trips.
        let mut now = t;
        let mut acked = 0;
        for _ in 0..2 {
            let mut sent = Vec::new();
            while let Some(s) = p.poll_transmit(now) {
                sent.push(s);
            }
            now += Duration::from_millis(20);
            for s in sent {
                acked = s.seq + u64::from(s.len);
                p.on_ack(now, &Ack { cum: acked, rwnd: 1 << 20, ..Default::default() });
            }
        }
        assert!(p.tx.cc().cwnd() > 10 * 1448);
        // The downstream receiver holds 3 segments more than acknowledged (ACKs lost in the handover).
        let at = acked + 3 * 1448;
        p.restart_downstream(cc::build("newreno", 1448, 10).unwrap(), at);
        assert_eq!(p.tx.cc().cwnd(), 10 * 1448, "slow start again from the initial window");
        assert_eq!(p.tx.snd_una(), at);
        let s = p.poll_transmit(now).unwrap();
        assert_eq!((s.seq, s.retransmission), (at, false));
        assert_eq!(p.buffered(), 40 * 1448 - at);
    }
}
