//! What a run produced, as columns (per-flow summaries, series, packet and link records, scheme
//! counters), and the collection of them from a finished or interrupted simulation.

use super::{FlowKind, Scenario};
use crate::sim::{AgentId, CbrSource, Sim, Sink};
use crate::tcp_agent::{TcpSink, TcpSource};
use leoguard_core::Instant;

/// Summary of one flow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowResult {
    /// Bytes delivered in order to the receiving application.
    pub delivered_bytes: u64,
    /// delivered bytes x 8 / active time.
    pub goodput_bps: f64,
    /// Sender retransmissions (TCP).
    pub retransmissions: u64,
    /// Retransmission timeouts (TCP).
    pub rtos: u64,
    /// Tail Loss Probes sent (TCP).
    pub tlps: u64,
    /// ACKs that reported a duplicate segment, DSACK (TCP).
    pub dsacks: u64,
    /// Window reductions undone as spurious (TCP: DSACK, Eifel or F-RTO).
    pub undos: u64,
    /// Packets the sender emitted that the network lost (drops on any link), over packets emitted.
    pub network_loss: f64,
    /// For UDP: packets not received over packets sent (loss seen by the endpoint).
    pub endpoint_loss: f64,
    /// Flow completion time, seconds after the flow's start (fixed-size TCP transfers that finished).
    pub fct_s: Option<f64>,
    /// Packets sent.
    pub packets_sent: u64,
}

/// One sample of a TCP flow's sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesRow {
    /// Flow index.
    pub flow: u32,
    /// Time, ns.
    pub t_ns: u64,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub in_flight: u64,
    /// Smoothed RTT, ns.
    pub srtt_ns: u64,
    /// Bytes acknowledged so far.
    pub acked: u64,
    /// Retransmissions so far.
    pub retransmissions: u64,
}

/// One data packet that reached its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRow {
    /// Flow index.
    pub flow: u32,
    /// Sequence number (TCP: first byte; UDP: packet number).
    pub seq: u64,
    /// Sent, ns.
    pub sent_ns: u64,
    /// Received, ns.
    pub received_ns: u64,
    /// Whether this copy was a retransmission.
    pub retransmission: bool,
    /// Links crossed.
    pub hops: u16,
}

/// The application-perceived delay of one TCP segment: from its first transmission to its in-order
/// delivery to the receiving application (retransmissions and head-of-line blocking included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppDelayRow {
    /// Flow index.
    pub flow: u32,
    /// First byte.
    pub seq: u64,
    /// First sent, ns.
    pub sent_ns: u64,
    /// Delivered in order, ns (`None`: not by the end of the run).
    pub delivered_ns: Option<u64>,
}

/// One StarTCP stall of a flow's sender (one per handover it predicted and stalled for).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartcpRow {
    /// Flow index.
    pub flow: u32,
    /// The predicted handover, ns (sender clock = simulation clock).
    pub predicted_ns: u64,
    /// When sending stopped, ns.
    pub stall_start_ns: u64,
    /// When it resumed, ns (`None`: still stalled at the end).
    pub stall_end_ns: Option<u64>,
    /// Probes sent during the stall.
    pub probes: u64,
    /// Why it resumed: "notice", "timeout" or "" (still stalled).
    pub reason: &'static str,
    /// The lead chosen, ns.
    pub lead_ns: u64,
    /// The policy's input when it chose it (`leoguard_proto::startcp::FEATURES`).
    pub state: [f64; 5],
}

/// One interruption a StarTCP receiver detected (an abnormal gap in arrivals).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterruptionRow {
    /// Flow index.
    pub flow: u32,
    /// Start (the last arrival before the gap), ns.
    pub start_ns: u64,
    /// Length of the gap, ns.
    pub duration_ns: u64,
    /// Whether the sender was stalled (probing) across it.
    pub stalled: bool,
}

/// One sample of a directed link's activity (links without traffic, queue or drops are left out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkSeriesRow {
    /// End of the sampling interval, ns.
    pub t_ns: u64,
    /// Sending node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// Bytes delivered during the interval.
    pub bytes: u64,
    /// Link capacity, bit/s (utilisation = bytes x 8 / (rate x interval)).
    pub rate_bps: u64,
    /// Bytes queued at the sample instant.
    pub queue_bytes: u64,
    /// Drops during the interval.
    pub drops: u64,
    /// Link state at the sample instant.
    pub up: bool,
}

/// Totals of one directed link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkRow {
    /// Sending node.
    pub from: u32,
    /// Receiving node.
    pub to: u32,
    /// The link's counters.
    pub stats: crate::engine::LinkStats,
    /// Loss-model drops over packets offered.
    pub realised_loss: f64,
    /// The loss model's registry name ("none" without one).
    pub loss_model: &'static str,
    /// The loss model's parameters, e.g. "p=0.01" (empty without one).
    pub loss_params: String,
    /// The loss model's lossy seconds of the run as (second, rate), for per-second models
    /// ([`leoguard_net::loss::LossModel::lossy_seconds`]); the same in every engine and for any traffic.
    pub lossy_seconds: Option<Vec<(u64, f64)>>,
}

/// One dropped packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropRow {
    /// When, ns.
    pub t_ns: u64,
    /// Flow index.
    pub flow: u32,
    /// Sequence number.
    pub seq: u64,
    /// Link ends (None: no route at a node).
    pub link: Option<(u32, u32)>,
    /// "queue", "loss", "down" or "no-route".
    pub reason: &'static str,
    /// A packet of a scheme's link-local control lane, not the flow's data as its sender sent it: a
    /// SATGUARD HAck (`seq` is the link it acknowledges), void (`seq` is the dropped packet's) or
    /// buffer-migration copy or commit, a LinkGuardian ACK, dummy or retransmission. It carries the
    /// flow's number but its loss is not the loss of that data packet (and the flow's `network_loss`
    /// leaves it out).
    pub control: bool,
}

/// Everything a run produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunResult {
    /// Per flow, in scenario order.
    pub flows: Vec<FlowResult>,
    /// Sender time series of TCP flows.
    pub series: Vec<SeriesRow>,
    /// Every data packet received.
    pub packets: Vec<PacketRow>,
    /// Application-perceived delay of sampled TCP segments (`Scenario::app_delay_every`).
    pub app_delay: Vec<AppDelayRow>,
    /// StarTCP senders' stalls.
    pub startcp: Vec<StartcpRow>,
    /// StarTCP receivers' detected interruptions.
    pub interruptions: Vec<InterruptionRow>,
    /// Per directed link.
    pub links: Vec<LinkRow>,
    /// Every drop.
    pub drops: Vec<DropRow>,
    /// Per-link activity over time.
    pub link_series: Vec<LinkSeriesRow>,
    /// Packet-hops processed (links crossed).
    pub packet_hops: u64,
    /// Simulated time the results cover, ns (less than the duration if the run was stopped early).
    pub simulated_ns: u64,
    /// A problem that stopped the topology from changing (e.g. a TLE that could not be propagated).
    pub topology_error: Option<String>,
    /// SATGUARD's counters summed over all nodes (when it runs).
    pub satguard: Option<crate::schemes::satguard::SatguardStats>,
    /// Per-hop counters of the in-network scheme, one row per directed link it sent on.
    pub hops: Vec<crate::schemes::satguard::HopRow>,
    /// LinkGuardian's counters summed over all nodes (when it runs).
    pub linkguardian: Option<crate::schemes::linkguardian::LinkGuardianStats>,
    /// The capture as a pcap file (when the scenario asks for one).
    pub capture: Option<Vec<u8>>,
    /// Packets the capture saw but did not record (past `max_packets`).
    pub capture_missed: u64,
    /// M-PEP's counters summed over all split flows (when it runs).
    pub mpep: Option<crate::schemes::mpep::MpepStats>,
    /// Every M-PEP proxy migration, in time order (when it runs).
    pub mpep_migrations: Vec<crate::schemes::mpep::MigrationRecord>,
    /// Page loads of web flows.
    pub web: Vec<crate::web::WebLoadRow>,
    /// Objects of the page loads of web flows.
    pub web_objects: Vec<crate::web::WebObjectRow>,
    /// Every frame of the WebRTC flows.
    pub webrtc_frames: Vec<crate::webrtc::FrameRow>,
    /// Frames rendered per second of the WebRTC flows.
    pub webrtc_fps: Vec<crate::webrtc::FpsRow>,
    /// Per WebRTC flow, in flow order.
    pub webrtc: Vec<crate::webrtc::WebrtcSummary>,
    /// The Tambur slot hooks' counters (when `[tambur]` runs).
    pub tambur: Option<crate::schemes::tambur::TamburStats>,
    /// The liquid tunnel ends' counters (when `[liquid]` runs).
    pub liquid: Option<crate::schemes::liquid::LiquidStats>,
    /// The LEOTP mid nodes' counters summed over nodes (when a run has LEOTP flows).
    pub leotp: Option<leoguard_net::schemes::leotp::LeotpMidTotals>,
}

/// The TCP ends of a flow, plain or wrapped by M-PEP.
fn tcp_ends(sim: &Sim, (a, b): (AgentId, AgentId)) -> (&TcpSource, &TcpSink) {
    use crate::schemes::mpep::{sink_of, source_of};
    let src = sim.agent_by_id(a).and_then(source_of).expect("attached by Running::new");
    (src, sim.agent_by_id(b).and_then(sink_of).expect("attached by Running::new"))
}

pub(super) fn agent<T: 'static>(sim: &Sim, id: AgentId) -> &T {
    sim.agent_by_id(id).and_then(|a| a.as_any().downcast_ref()).expect("attached by Running::new")
}

pub(super) fn collect(s: &Scenario, sim: &Sim, ends: &[(AgentId, AgentId)], owner: &[u32], end: Instant) -> RunResult {
    let mut r = RunResult { simulated_ns: end.as_nanos(), ..Default::default() };
    r.topology_error = sim.driver().and_then(|d| d.error());
    let mut lost_by_flow = vec![0u64; s.flows.len()];
    for d in &sim.drops {
        let flow = owner.get(d.packet.flow as usize).copied().unwrap_or(d.packet.flow);
        let control = d.packet.net.flags & crate::engine::NET_CONTROL != 0;
        if let Some(c) = lost_by_flow.get_mut(flow as usize) {
            if d.packet.flags & crate::tcp_agent::FLAG_ACK == 0 && !control {
                *c += 1;
            }
        }
        let link = d.link.map(|l| {
            let l = &sim.net.links[l.0 as usize];
            (l.from.0, l.to.0)
        });
        let reason = match d.reason {
            Some(crate::engine::DropReason::Queue) => "queue",
            Some(crate::engine::DropReason::Loss) => "loss",
            Some(crate::engine::DropReason::Down) => "down",
            None => "no-route",
        };
        r.drops.push(DropRow { t_ns: d.t.as_nanos(), flow, seq: d.packet.seq, link, reason, control });
    }
    for (i, f) in s.flows.iter().enumerate() {
        let active = end.saturating_duration_since(f.start).as_secs_f64().max(1e-9);
        let mut fr = FlowResult::default();
        match &f.kind {
            FlowKind::Tcp { .. } => {
                let (src, dst) = tcp_ends(sim, ends[i]);
                fr.delivered_bytes = dst.tcp.delivered;
                fr.retransmissions = src.tcp.stats.retransmissions;
                fr.rtos = src.tcp.stats.rtos;
                fr.tlps = src.tcp.stats.tlps;
                fr.dsacks = src.tcp.stats.dsacks;
                fr.undos = src.tcp.stats.undos;
                fr.packets_sent = src.tcp.stats.segments_sent;
                fr.fct_s = src.completed_at.map(|t| t.saturating_duration_since(f.start).as_secs_f64());
                for x in &src.samples {
                    r.series.push(SeriesRow {
                        flow: i as u32,
                        t_ns: x.t.as_nanos(),
                        cwnd: x.cwnd,
                        in_flight: x.in_flight,
                        srtt_ns: x.srtt.as_nanos(),
                        acked: x.acked,
                        retransmissions: x.retransmissions,
                    });
                }
                for h in src.tcp.startcp_records() {
                    use leoguard_proto::startcp::ResumeReason;
                    r.startcp.push(StartcpRow {
                        flow: i as u32,
                        predicted_ns: h.predicted.as_nanos(),
                        stall_start_ns: h.stall_start.as_nanos(),
                        stall_end_ns: h.stall_end.map(|t| t.as_nanos()),
                        probes: h.probes,
                        reason: match h.reason {
                            Some(ResumeReason::Notice) => "notice",
                            Some(ResumeReason::Timeout) => "timeout",
                            None => "",
                        },
                        lead_ns: h.lead.as_nanos(),
                        state: h.state,
                    });
                }
                if let Some(m) = dst.tcp.startcp() {
                    for x in m.interruptions() {
                        r.interruptions.push(InterruptionRow {
                            flow: i as u32,
                            start_ns: x.start.as_nanos(),
                            duration_ns: x.duration.as_nanos(),
                            stalled: x.stalled,
                        });
                    }
                }
                for (seq, sent, delivered) in crate::tcp_agent::app_delays(&src.first_sent, &dst.deliveries) {
                    r.app_delay.push(AppDelayRow {
                        flow: i as u32,
                        seq,
                        sent_ns: sent.as_nanos(),
                        delivered_ns: delivered.map(|t| t.as_nanos()),
                    });
                }
                for p in &dst.records {
                    r.packets.push(PacketRow {
                        flow: i as u32,
                        seq: p.seq,
                        sent_ns: p.sent_at.as_nanos(),
                        received_ns: p.received_at.as_nanos(),
                        retransmission: p.retransmission,
                        hops: p.hops,
                    });
                }
            }
            FlowKind::Web { .. } => {
                let (client, server) = (agent(sim, ends[i].0), agent(sim, ends[i].1));
                fr = crate::web::setup::flow_result(client, server);
                r.web.extend(client.rows(Some(server)));
                r.web_objects.extend(client.object_rows());
            }
            FlowKind::Cbr { .. } => {
                let src: &CbrSource = agent(sim, ends[i].0);
                let dst: &Sink = agent(sim, ends[i].1);
                fr.packets_sent = src.sent;
                fr.delivered_bytes = dst.received.len() as u64
                    * u64::from(match f.kind {
                        FlowKind::Cbr { size, .. } => size,
                        FlowKind::Tcp { .. } | FlowKind::Web { .. } | FlowKind::Webrtc(_) | FlowKind::Leotp { .. } => 0,
                    });
                // Lost = dropped by the network; packets still in flight at the end are not losses.
                // Loss seen by the endpoint: packets sent at least a grace time (1 s, or half the
                // flow's time if shorter) before the end that never arrived. In-network recovery
                // (SATGUARD) makes this differ from the network's drops.
                let grace = (end.saturating_duration_since(src.start).as_nanos() / 2).min(1_000_000_000);
                let cutoff = end.as_nanos().saturating_sub(grace);
                let counted = if src.interval.as_nanos() == 0 || cutoff < src.start.as_nanos() {
                    0
                } else {
                    ((cutoff - src.start.as_nanos()) / src.interval.as_nanos() + 1).min(src.sent)
                };
                let arrived = dst.received.iter().filter(|r| r.0 < counted).count() as u64;
                fr.endpoint_loss = 1.0 - arrived.min(counted) as f64 / counted.max(1) as f64;
                for &(seq, sent, recv, hops) in &dst.received {
                    r.packets.push(PacketRow {
                        flow: i as u32,
                        seq,
                        sent_ns: sent.as_nanos(),
                        received_ns: recv.as_nanos(),
                        retransmission: false,
                        hops,
                    });
                }
            }
            FlowKind::Leotp { .. } => super::leotp::flow_result(sim, i as u32, ends[i], &mut fr, &mut r),
            // Collected below.
            FlowKind::Webrtc(_) => {}
        }
        if let FlowKind::Webrtc(_) = f.kind {
            let (rows, fps, w) = crate::webrtc::collect(sim, i as u32, ends[i], end);
            fr.packets_sent = w.media_packets + w.retransmissions + w.parity_packets;
            fr.retransmissions = w.retransmissions;
            fr.delivered_bytes = rows.iter().filter(|r| r.render_ns.is_some()).map(|r| u64::from(r.size)).sum();
            r.webrtc_frames.extend(rows);
            r.webrtc_fps.extend(fps);
            r.webrtc.push(w);
        }
        fr.goodput_bps = fr.delivered_bytes as f64 * 8.0 / fr.fct_s.unwrap_or(active).max(1e-9);
        fr.network_loss = lost_by_flow[i] as f64 / fr.packets_sent.max(1) as f64;
        if let FlowKind::Leotp { .. } = f.kind {
            fr.network_loss = super::leotp::data_loss(sim, i as u32, fr.packets_sent);
        }
        if matches!(f.kind, FlowKind::Tcp { .. } | FlowKind::Web { .. } | FlowKind::Leotp { .. }) {
            // TCP hides network loss from the application: the endpoint sees none (delivery is complete
            // and in order); what it pays is retransmissions and delay.
            fr.endpoint_loss = 0.0;
        }
        r.flows.push(fr);
    }
    for x in &sim.link_samples {
        let l = &sim.net.links[x.link.0 as usize];
        r.link_series.push(LinkSeriesRow {
            t_ns: x.t.as_nanos(),
            from: l.from.0,
            to: l.to.0,
            bytes: x.bytes,
            rate_bps: l.rate.0,
            queue_bytes: x.queue_bytes,
            drops: x.drops,
            up: x.up,
        });
    }
    for l in &sim.net.links {
        let st = l.stats;
        r.packet_hops += st.delivered;
        let realised = st.drops_loss as f64 / st.offered.max(1) as f64;
        let (loss_model, loss_params, lossy_seconds) = match l.loss_model() {
            Some(m) => {
                let p: Vec<String> = m.params().iter().map(|(k, v)| format!("{k}={v}")).collect();
                (m.name(), p.join(" "), m.lossy_seconds(end))
            }
            None => ("none", String::new(), None),
        };
        r.links.push(LinkRow {
            from: l.from.0,
            to: l.to.0,
            stats: st,
            realised_loss: realised,
            loss_model,
            loss_params,
            lossy_seconds,
        });
    }
    r
}
