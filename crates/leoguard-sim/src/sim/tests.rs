use super::*;

fn sink(sim: &Sim, n: NodeId) -> &Sink {
    sim.agent(n).and_then(|a| a.as_any().downcast_ref::<Sink>()).expect("a sink is attached")
}

fn cbr(dst: u32, size: u32, interval_us: u64, count: u64) -> Box<CbrSource> {
    Box::new(CbrSource {
        flow: 1,
        dst: NodeId(dst),
        size,
        interval: Duration::from_micros(interval_us),
        count,
        sent: 0,
        start: Instant::ZERO,
        tc: 0,
    })
}

#[test]
fn unloaded_chain_delay_is_the_sum_of_serialisation_and_propagation() {
    // 9 hops of 100 Mbit/s and 2 ms; 1250 B packets (100 us each) at 10 Mbit/s: no queueing.
    let (mut sim, _) = chain(9, Bps::mbps(100), Duration::from_millis(2), QueueLimit::Packets(100), 1);
    sim.attach(NodeId(0), cbr(9, 1250, 1000, 500));
    sim.attach(NodeId(9), Box::<Sink>::default());
    sim.run(Instant(10_000_000_000));
    let got = &sink(&sim, NodeId(9)).received;
    assert_eq!(got.len(), 500);
    for (k, &(seq, sent, recv, hops)) in got.iter().enumerate() {
        assert_eq!(seq, k as u64);
        assert_eq!(hops, 9);
        assert_eq!((recv - sent).as_nanos(), 9 * (100_000 + 2_000_000));
    }
    assert!(sim.drops.is_empty());
    assert_eq!(sim.net.pool.live(), 0);
}

#[test]
fn overload_queues_then_drops_at_the_bottleneck() {
    // 2 hops; the second is 5 Mbit/s behind a 100 Mbit/s first hop; 10 Mbit/s offered.
    let mut sim = Sim::new(3, 7);
    let a = sim.add_link(NodeId(0), NodeId(1), Bps::mbps(100), Duration::from_millis(1), QueueLimit::Packets(50));
    let b = sim.add_link(NodeId(1), NodeId(2), Bps::mbps(5), Duration::from_millis(1), QueueLimit::Bytes(20 * 1250));
    sim.route(NodeId(0), NodeId(2), a);
    sim.route(NodeId(1), NodeId(2), b);
    sim.attach(NodeId(0), cbr(2, 1250, 1000, 1000));
    sim.attach(NodeId(2), Box::<Sink>::default());
    sim.run(Instant(5_000_000_000));
    let got = &sink(&sim, NodeId(2)).received;
    // The bottleneck carries 500 packets/s; over the 1 s of arrivals plus the drain that is
    // about half, and the queue never holds more than its 20 packets.
    let stats = sim.net.links[b.0 as usize].stats;
    assert_eq!(stats.max_queue_bytes, 20 * 1250);
    assert_eq!(got.len() as u64 + stats.drops_queue, 1000);
    assert!((got.len() as i64 - 520).abs() <= 5, "{}", got.len());
    // Queueing delay = bytes ahead / capacity: at most 20 packets x 2 ms, plus 2 ms serialisation.
    let max_owd = got.iter().map(|r| (r.2 - r.1).as_nanos()).max().unwrap();
    assert!(max_owd <= 100_000 + 1_000_000 + 20 * 2_000_000 + 2_000_000 + 1_000_000);
    assert!(max_owd >= 20 * 2_000_000);
    assert!(sim.drops.iter().all(|d| d.link == Some(b) && d.reason == Some(DropReason::Queue)));
}

#[test]
fn a_blackout_loses_only_what_crosses_it_and_nothing_is_duplicated() {
    let (mut sim, fwd) = chain(3, Bps::mbps(100), Duration::from_millis(5), QueueLimit::Packets(100), 3);
    sim.attach(NodeId(0), cbr(3, 1000, 1000, 300));
    sim.attach(NodeId(3), Box::<Sink>::default());
    sim.schedule_link_state(Instant(100_000_000), fwd[1], false);
    sim.schedule_link_state(Instant(200_000_000), fwd[1], true);
    sim.run(Instant(2_000_000_000));
    let got = &sink(&sim, NodeId(3)).received;
    let lost: Vec<u64> = sim.drops.iter().map(|d| d.packet.seq).collect();
    assert!(sim.drops.iter().all(|d| d.reason == Some(DropReason::Down)));
    // Packets sent in [~95 ms, ~195 ms] meet the dead link (5 ms to reach it) or are on it.
    assert!((95..=106).contains(&lost.len()), "{} lost", lost.len());
    let mut seqs: Vec<u64> = got.iter().map(|r| r.0).collect();
    seqs.extend(&lost);
    seqs.sort_unstable();
    assert_eq!(seqs, (0..300).collect::<Vec<_>>(), "every packet exactly once: delivered or lost");
}

/// A per-hop mechanism for the test: drops every tenth packet, holds the next one for 2.5 ms and
/// marks everything it lets leave.
#[derive(Debug, Default)]
struct TestHook {
    held: Vec<Packet>,
    consumed: u64,
    departed: u64,
    link_events: Vec<(LinkId, bool)>,
}

impl Agent for TestHook {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn start(&mut self, _ctx: &mut Ctx) {}
    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}
    fn on_timer(&mut self, _token: u64, ctx: &mut Ctx) {
        let p = self.held.remove(0);
        ctx.resume(p);
    }
    fn on_arrive(&mut self, _link: LinkId, p: &mut Packet, ctx: &mut Ctx) -> bool {
        match p.seq % 10 {
            0 => {
                self.consumed += 1;
                false
            }
            1 => {
                self.held.push(*p);
                ctx.timer(ctx.now() + Duration::from_micros(2500), 0);
                false
            }
            _ => true,
        }
    }
    fn on_depart(&mut self, _link: LinkId, p: &mut Packet, _ctx: &mut Ctx) -> bool {
        self.departed += 1;
        p.flags |= 0x100;
        true
    }
    fn on_link_state(&mut self, link: LinkId, up: bool, _ctx: &mut Ctx) {
        self.link_events.push((link, up));
    }
}

#[test]
fn a_hook_sees_arrivals_and_departures_and_can_hold_or_consume() {
    let (mut sim, fwd) = chain(2, Bps::mbps(100), Duration::from_millis(1), QueueLimit::Packets(100), 5);
    sim.attach(NodeId(0), cbr(2, 100, 1000, 100));
    let sink = sim.attach(NodeId(2), Box::<Sink>::default());
    let hook = sim.attach_hook(NodeId(1), Box::<TestHook>::default());
    sim.schedule_link_state(Instant(500_000_000), fwd[1], false);
    sim.schedule_link_state(Instant(600_000_000), fwd[1], true);
    sim.run(Instant(1_000_000_000));
    let h = sim.agent_by_id(hook).and_then(|a| a.as_any().downcast_ref::<TestHook>()).unwrap();
    let got = &sim.agent_by_id(sink).and_then(|a| a.as_any().downcast_ref::<Sink>()).unwrap().received;
    assert_eq!(h.consumed, 10);
    assert_eq!(h.departed, 90, "held packets leave through on_depart too");
    assert_eq!(got.len(), 90);
    for &(seq, sent, recv, _) in got {
        let extra = if seq % 10 == 1 { 2_500_000 } else { 0 };
        assert_eq!((recv - sent).as_nanos(), 2 * (8_000 + 1_000_000) + extra, "seq {seq}");
    }
    assert_eq!(h.link_events, vec![(fwd[1], false), (fwd[1], true)]);
}

#[test]
fn same_seed_same_trace() {
    let run = || {
        let (mut sim, fwd) = chain(4, Bps::mbps(20), Duration::from_millis(3), QueueLimit::Packets(10), 11);
        sim.schedule_link_delay(Instant(50_000_000), fwd[2], Duration::from_millis(9));
        sim.attach(NodeId(0), cbr(4, 1500, 300, 2000));
        sim.attach(NodeId(4), Box::<Sink>::default());
        sim.run(Instant(3_000_000_000));
        (sink(&sim, NodeId(4)).received.clone(), sim.drops.len())
    };
    assert_eq!(run(), run());
}

#[test]
fn an_agent_bound_to_two_flows_gets_the_packets_of_both() {
    #[derive(Debug, Default)]
    struct Count(Vec<u32>);
    impl Agent for Count {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn start(&mut self, _: &mut Ctx) {}
        fn on_packet(&mut self, p: &Packet, _: &mut Ctx) {
            self.0.push(p.flow);
        }
        fn on_timer(&mut self, _: u64, _: &mut Ctx) {}
    }
    #[derive(Debug)]
    struct Send2;
    impl Agent for Send2 {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn start(&mut self, ctx: &mut Ctx) {
            for flow in [3, 7] {
                ctx.send(Packet { flow, size: 100, dst: 1, ..Default::default() });
            }
        }
        fn on_packet(&mut self, _: &Packet, _: &mut Ctx) {}
        fn on_timer(&mut self, _: u64, _: &mut Ctx) {}
    }
    let (mut sim, _) = chain(1, Bps::mbps(10), Duration::from_millis(1), QueueLimit::Packets(10), 1);
    sim.attach(NodeId(0), Box::new(Send2));
    let id = sim.attach_flow(NodeId(1), 3, Box::new(Count::default()));
    sim.bind_flow(id, NodeId(1), 7);
    sim.run(Instant(1_000_000_000));
    let c = sim.agent_by_id(id).unwrap().as_any().downcast_ref::<Count>().unwrap();
    assert_eq!(c.0, vec![3, 7]);
}

#[test]
fn app_delay_counts_from_first_send_to_in_order_delivery() {
    use crate::tcp_agent::app_delays;
    let t = |ms: u64| Instant(ms * 1_000_000);
    // Segments [0,1000) sent at 0 ms and [1000,2000) at 1 ms; the first is lost and delivered with
    // the retransmission at 250 ms, which also releases the second (head-of-line blocking);
    // [2000,3000) is never delivered.
    let sent = [(0, 1000, t(0)), (1000, 1000, t(1)), (2000, 1000, t(2))];
    let deliveries = [(2000, t(250))];
    let d = app_delays(&sent, &deliveries);
    assert_eq!(d, vec![(0, t(0), Some(t(250))), (1000, t(1), Some(t(250))), (2000, t(2), None)]);
    // In-order delivery in two steps.
    let d = app_delays(&sent[..2], &[(1000, t(20)), (2000, t(21))]);
    assert_eq!(d[0].2, Some(t(20)));
    assert_eq!(d[1].2, Some(t(21)));
}

/// Wakes another agent once, at a fixed delay after its own timer.
#[derive(Debug)]
struct Waker {
    other: Option<AgentId>,
    fired: Vec<(Instant, u64)>,
}

impl Agent for Waker {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn start(&mut self, ctx: &mut Ctx) {
        if self.other.is_some() {
            ctx.timer(Instant(1_000), 7);
        }
    }
    fn on_packet(&mut self, _p: &Packet, _ctx: &mut Ctx) {}
    fn on_timer(&mut self, token: u64, ctx: &mut Ctx) {
        self.fired.push((ctx.now(), token));
        if let Some(o) = self.other {
            ctx.wake(o, ctx.now() + Duration(500), 42);
        }
    }
}

#[test]
fn wake_fires_the_other_agents_timer_at_the_given_time() {
    let mut sim = Sim::new(2, 1);
    let b = sim.attach(NodeId(1), Box::new(Waker { other: None, fired: Vec::new() }));
    let a = sim.attach(NodeId(0), Box::new(Waker { other: Some(b), fired: Vec::new() }));
    sim.run(Instant(1_000_000));
    let fired = |id| &sim.agent_by_id(id).and_then(|x| x.as_any().downcast_ref::<Waker>()).unwrap().fired;
    assert_eq!(fired(a), &vec![(Instant(1_000), 7)]);
    assert_eq!(fired(b), &vec![(Instant(1_500), 42)], "the other agent, not the caller");
}
