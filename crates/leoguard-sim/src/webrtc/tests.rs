use super::jitter::JitterBuffer;
use super::*;
use crate::engine::{LinkId, QueueLimit};
use crate::sim::{chain, Agent, Ctx, Sim};
use leoguard_core::Bps;

const MS: u64 = 1_000_000;

/// Equal frames (no size variation, one key frame of delta size), sent as a burst per frame.
fn flat() -> WebrtcConfig {
    WebrtcConfig { keyframe_interval: None, key_ratio: 1.0, size_sigma: 0.0, pacing_factor: 0.0, ..Default::default() }
}

/// A hook on the sender's node that drops the first transmission of chosen media packets.
#[derive(Debug)]
struct DropSeqs(Vec<u64>);

impl Agent for DropSeqs {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn start(&mut self, _ctx: &mut Ctx) {}
    fn on_packet(&mut self, _p: &crate::engine::Packet, _ctx: &mut Ctx) {}
    fn on_timer(&mut self, _t: u64, _ctx: &mut Ctx) {}
    fn on_depart(&mut self, _l: LinkId, p: &mut crate::engine::Packet, _ctx: &mut Ctx) -> bool {
        !(p.flags & FLAG_MEDIA != 0 && p.flags & FLAG_RTX == 0 && self.0.contains(&p.seq))
    }
}

/// 100 Mbit/s, 20 ms one way, one hop; `drop` media packets lost at the sender.
fn run(
    cfg: WebrtcConfig,
    secs: u64,
    drop: Vec<u64>,
    setup: impl FnOnce(&mut Sim, LinkId),
) -> (Vec<FrameRow>, WebrtcSummary) {
    let (mut sim, fwd) = chain(1, Bps::mbps(100), Duration::from_millis(20), QueueLimit::Packets(1000), 1);
    sim.attach_hook(crate::engine::NodeId(0), Box::new(DropSeqs(drop)));
    setup(&mut sim, fwd[0]);
    let ends = attach(&mut sim, 0, 0, 1, cfg, Instant::ZERO, 0, 7);
    let end = Instant(secs * 1_000_000_000);
    sim.run(end);
    let (rows, _, s) = collect(&sim, 0, ends, end);
    (rows, s)
}

/// Wire bytes of the packets of one flat frame: payload 2.5 Mbit/s / 30 = 10 417 bytes in 9 packets
/// (4 of 1158, 5 of 1157) plus 52 header bytes each.
fn flat_frame_packets() -> Vec<u64> {
    let mut v = vec![1158 + 52; 4];
    v.extend(vec![1157 + 52; 5]);
    v
}

fn ser_ns(bytes: u64) -> u64 {
    bytes * 8 * 1_000_000_000 / 100_000_000
}

#[test]
fn lossless_constant_delay_path_gives_propagation_plus_serialisation_plus_playout_minimum() {
    let (rows, s) = run(flat(), 4, vec![], |_, _| {});
    let transit = 20 * MS + ser_ns(flat_frame_packets().iter().sum());
    assert_eq!(transit, 20 * MS + 870_800);
    // Playout minimum: OS jitter 10 ms + render delay 10 ms (the jitter estimate is 0).
    let minimum = 20 * MS;
    for r in rows.iter().filter(|r| r.capture_ns < 3_900 * MS) {
        assert_eq!(r.complete_ns.unwrap() - r.capture_ns, transit, "frame {}", r.frame);
        assert_eq!(r.render_ns.unwrap() - r.capture_ns, transit + minimum, "frame {}", r.frame);
    }
    assert!((s.e2e_p50_ms - 40.8708).abs() < 1e-6 && (s.e2e_p95_ms - 40.8708).abs() < 1e-6);
    assert!((s.jb_mean_ms - 20.0).abs() < 1e-6);
    assert_eq!(s.fps_mean, 30.0);
    assert_eq!(s.fps_std, 0.0);
    assert_eq!((s.freezes, s.nacks, s.plis, s.retransmissions), (0, 0, 0, 0));
    assert_eq!(s.frames_sent, 121, "captures at 0, 1/30, ..., 4 s");
    assert_eq!(s.key_frames, 1);
}

#[test]
fn a_lost_packet_is_recovered_by_nack_after_one_round_trip() {
    // Frame 45 (captured at 1.5 s, after the first RTT measurement) loses its packet 3 of 9.
    let k = 45u64;
    let lost = k * 9 + 3;
    let (rows, s) = run(flat(), 3, vec![lost], |_, _| {});
    let p = flat_frame_packets();
    // Packet 4 arrives right behind packet 2 (packet 3 never used the link): the gap is seen then.
    let gap_seen = 20 * MS + ser_ns(p[..3].iter().sum::<u64>() + p[4]);
    // NACK: 40 bytes of IP/UDP/RTCP + one 4-byte FCI; the retransmission is the 1210-byte packet.
    let back = ser_ns(44) + 20 * MS;
    let retx = ser_ns(p[3]) + 20 * MS;
    let r = &rows[k as usize];
    assert_eq!(r.complete_ns.unwrap() - r.capture_ns, gap_seen + back + retx);
    // Late for its render time: rendered as soon as complete; its neighbours are not held up.
    assert_eq!(r.render_ns, r.complete_ns);
    assert_eq!(rows[k as usize + 1].render_ns.unwrap() - rows[k as usize + 1].capture_ns, 40_870_800);
    assert_eq!((s.retransmissions, s.plis, s.freezes), (1, 0, 0));
    assert!(s.nacks >= 1);
}

#[test]
fn a_half_second_outage_is_one_freeze() {
    let (rows, s) = run(flat(), 5, vec![], |sim, l| {
        sim.schedule_link_state(Instant(2_000 * MS), l, false);
        sim.schedule_link_state(Instant(2_500 * MS), l, true);
    });
    assert_eq!(s.freezes, 1, "{s:?}");
    // The gap: from the last frame rendered before the outage to the first after it.
    assert!(s.freeze_s > 0.5 && s.freeze_s < 0.65, "{s:?}");
    assert!(s.retransmissions > 100, "the outage's packets come back from the history");
    // Every frame is eventually rendered (the history of 1 s covers the outage).
    assert!(rows.iter().filter(|r| r.capture_ns < 4_800 * MS).all(|r| r.render_ns.is_some()));
}

#[test]
fn jitter_buffer_target_grows_under_delay_variation_and_shrinks_back() {
    let mut jb = JitterBuffer::new(Duration::from_secs(5), 99.0);
    let rtt = Duration::from_millis(40);
    let frame = |i: u64| Instant(i * 33_333_333);
    let mut currents = Vec::new();
    for i in 0..600u64 {
        // 50 ms transit, except 6 s to 8 s where every other frame takes 60 ms longer.
        let extra = if (180..240).contains(&i) && i % 2 == 1 { 60 } else { 0 };
        let done = frame(i) + Duration::from_millis(50 + extra);
        jb.on_complete(done, frame(i), false);
        jb.render_time(done, frame(i), rtt);
        currents.push(jb.current().unwrap().as_nanos());
    }
    let ms = |i: usize| currents[i] as f64 / 1e6;
    assert!((ms(170) - 20.0).abs() < 1e-6, "steady: playout minimum");
    // Target 60 + 20 ms; the delay rises by at most 100 ms per second of media (3.33 ms a frame) but a
    // late frame pushes it up by its lateness at once.
    assert!(ms(239) > 75.0, "{}", ms(239));
    assert!((jb.target(rtt).as_nanos() as f64 / 1e6 - 20.0).abs() < 1e-6);
    // The variation leaves the 5 s window 5 s after 8 s; the delay then falls at 100 ms/s.
    assert!((ms(380) - 80.0).abs() < 1e-3, "still within the window: {}", ms(380));
    assert!(ms(400) < 40.0, "falling: {}", ms(400));
    assert!((ms(599) - 20.0).abs() < 1e-6, "back to the minimum: {}", ms(599));
    for w in currents.windows(2) {
        assert!(w[1] + 3_333_334 >= w[0], "falls at most 100 ms/s");
    }
}

#[test]
fn tambur_recovers_a_single_loss_without_a_round_trip() {
    let cfg = WebrtcConfig { fec: Fec::Tambur(Default::default()), nack: false, ..flat() };
    // The first loss (frame 30) turns the parity on; the second (frame 60) is repaired by it.
    let (rows, s) = run(cfg, 3, vec![30 * 9 + 3, 60 * 9 + 3], |_, _| {});
    assert_eq!(s.nacks, 0);
    assert_eq!(s.retransmissions, 0);
    assert!(s.fec_recovered >= 1, "{s:?}");
    assert!(s.parity_packets > 0);
    let r = &rows[60];
    let p = flat_frame_packets();
    // Recovered when the frame's first parity packet arrives: the frame's 8 packets and the parity
    // (1158-byte symbol + 52 + 16 header bytes) right behind them.
    let par = 1158 + 52 + 16;
    let want = 20 * MS + ser_ns(p.iter().sum::<u64>() - p[3] + par);
    assert_eq!(r.complete_ns.unwrap() - r.capture_ns, want);
    assert!(r.render_ns.is_some());
    // Frame 30 was sent before any parity, but its lost packet is in its V part, which the parities
    // of frames 30..=33 cover: once the immediate loss report turned the parity on (one one-way
    // delay later), frame 32's or 33's parity repairs it, within tau = 3 frames.
    let r = &rows[30];
    let late = r.complete_ns.unwrap() - r.capture_ns;
    assert!(late > 33 * MS + 20 * MS && late < 100 * MS + 22 * MS, "{r:?}");
    assert!(r.render_ns.is_some());
    assert_eq!((s.fec_recovered, s.plis, s.freezes), (2, 0, 0));
}

#[test]
fn freeze_definition_follows_webrtc_stats() {
    // 30 frames at 33 ms, then gaps of 180 ms (no freeze: below 33 + 150) and 200 ms (a freeze).
    let mut t: Vec<u64> = (0..31).map(|i| i * 33 * MS).collect();
    let last = *t.last().unwrap();
    t.push(last + 180 * MS);
    let mut x = last + 180 * MS;
    for _ in 0..30 {
        x += 33 * MS;
        t.push(x);
    }
    t.push(x + 200 * MS);
    let (n, total) = freezes(&t);
    assert_eq!(n, 1);
    assert!((total - 0.2).abs() < 1e-9);
}

#[test]
fn bad_parameters_name_the_field() {
    let c = WebrtcConfig { fps: 0, ..Default::default() };
    assert_eq!(c.validate().unwrap_err().0, "fps");
    let c = WebrtcConfig { bitrate_bps: 1, ..Default::default() };
    assert_eq!(c.validate().unwrap_err().0, "bitrate_mbps");
    assert!(WebrtcConfig::default().validate().is_ok());
}

#[test]
fn tambur_beyond_its_window_loses_frames_and_asks_for_a_key_frame() {
    let cfg = WebrtcConfig { fec: Fec::Tambur(Default::default()), nack: false, ..flat() };
    // A first loss turns the parity on; then four whole frames (36 media packets, 36 unknowns) are
    // lost: the parities that cover them give 35 equations, not enough for all of them.
    let mut drop = vec![30 * 9 + 3];
    drop.extend(60 * 9..64 * 9);
    let (rows, s) = run(cfg, 4, drop, |_, _| {});
    assert!(s.plis >= 1, "{s:?}");
    let lost: Vec<u64> =
        rows.iter().filter(|r| r.capture_ns < 3_500 * MS && r.render_ns.is_none()).map(|r| r.frame).collect();
    assert!(!lost.is_empty() && lost.iter().all(|&f| f >= 60), "{lost:?}");
    assert!(s.freezes >= 1);
    // After the requested key frame the call goes on.
    let key = rows.iter().find(|r| r.frame > 64 && r.key).expect("a key frame after the PLI");
    assert!(rows[key.frame as usize..].iter().filter(|r| r.capture_ns < 3_800 * MS).all(|r| r.render_ns.is_some()));
}
