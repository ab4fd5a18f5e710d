//! A web flow in a scenario: validation, building its agents and flow ids, its per-flow summary.

use super::browser::{plan, WebClient};
use super::conn::Wire;
use super::corpus::{page, Page, CORPUS_PAGES};
use super::server::WebServer;
use super::Http;
use crate::engine::NodeId;
use crate::scenario::{FlowKind, FlowResult, FlowSpec, ScenarioError};
use crate::schemes::mpep::web::WebSplit;
use crate::sim::{AgentId, Sim};
use leoguard_core::{Duration, Instant};

fn invalid(field: String, value: impl ToString, reason: &str) -> ScenarioError {
    ScenarioError::Invalid { field, value: value.to_string(), reason: reason.to_string() }
}

/// Checks a web flow's fields (flow index `i`).
pub fn validate(i: usize, cc: &str, pages: &[u32]) -> Result<(), ScenarioError> {
    if leoguard_proto::cc::build(cc, 1448, 10).is_err() {
        return Err(invalid(
            format!("flows[{i}].cc"),
            cc,
            &format!("unknown congestion control (known: {})", leoguard_proto::cc::ALGORITHMS.join(", ")),
        ));
    }
    if pages.is_empty() {
        return Err(invalid(format!("flows[{i}].pages"), "[]", "must list at least one page"));
    }
    if let Some((j, p)) = pages.iter().enumerate().find(|(_, &p)| p >= CORPUS_PAGES) {
        return Err(invalid(
            format!("flows[{i}].pages[{j}]"),
            p,
            &format!("is not a corpus page (the corpus has pages 0..{CORPUS_PAGES})"),
        ));
    }
    Ok(())
}

/// Hosts web flow `i` (a [`FlowKind::Web`]) on `sim`: the browser on its source node, the server on
/// its destination node, both bound to the flow id `i` and to a block of connection flow ids
/// starting at `owner.len()` (appended to `owner`, each marked as belonging to flow `i`).
/// `reports`: when the link layer reports upcoming handovers to both ends' senders (SaTCP).
pub fn attach(
    sim: &mut Sim,
    i: usize,
    f: &FlowSpec,
    owner: &mut Vec<u32>,
    reports: Vec<Instant>,
) -> (AgentId, AgentId) {
    attach_split(sim, i, f, owner, reports, None)
}

/// [`attach`] with the connections' M-PEP chains in `split` (filled in by the caller).
pub fn attach_split(
    sim: &mut Sim,
    i: usize,
    f: &FlowSpec,
    owner: &mut Vec<u32>,
    reports: Vec<Instant>,
    split: Option<WebSplit>,
) -> (AgentId, AgentId) {
    let FlowKind::Web { cc, http, corpus_seed, pages, think } = &f.kind else {
        unreachable!("attach is called for web flows only")
    };
    let pages: Vec<Page> = pages.iter().map(|&p| page(*corpus_seed, p)).collect();
    let first_flow = owner.len() as u32;
    let opts = Hosting { http: *http, cc, think: *think, start: f.start, tc: f.tc, reports, split };
    let (a, b, slots) = host(sim, i as u32, first_flow, NodeId(f.src), NodeId(f.dst), pages, &opts);
    owner.extend(std::iter::repeat_n(i as u32, slots as usize));
    (a, b)
}

/// How a web flow's agents behave.
#[derive(Clone, Debug)]
pub struct Hosting<'a> {
    /// HTTP version.
    pub http: Http,
    /// Congestion control of every connection.
    pub cc: &'a str,
    /// Pause between loads.
    pub think: Duration,
    /// Navigation start of the first load.
    pub start: Instant,
    /// IPv6 Traffic Class of the packets.
    pub tc: u8,
    /// The connections' M-PEP chains (None: not split).
    pub split: Option<WebSplit>,
    /// SaTCP handover reports to both ends' senders.
    pub reports: Vec<Instant>,
}

/// Hosts a browser on `src` loading `pages` from a server on `dst`, bound to flow `flow` and to the
/// connection flow ids from `first_flow`; returns the two agents and the number of connection ids.
pub fn host(
    sim: &mut Sim,
    flow: u32,
    first_flow: u32,
    src: NodeId,
    dst: NodeId,
    pages: Vec<Page>,
    o: &Hosting<'_>,
) -> (AgentId, AgentId, u32) {
    let slot_base = plan(&pages, o.http);
    let slots = slot_base.last().copied().unwrap_or(0);
    let wire = Wire::new(slots as usize);
    let mut client = WebClient::new(flow, first_flow, dst, o.http, o.cc, pages, o.think, slot_base, wire.clone());
    client.start_at = o.start;
    client.tc = o.tc;
    client.handover_reports = o.reports.clone();
    client.split = o.split.clone();
    let mut server = WebServer::new(first_flow, slots, src, o.http, o.cc, o.tc, wire);
    server.handover_reports = o.reports.clone();
    server.split = o.split.clone();
    let (a, b) = (sim.attach_flow(src, flow, Box::new(client)), sim.attach_flow(dst, flow, Box::new(server)));
    for id in first_flow..first_flow + slots {
        sim.bind_flow(a, src, id);
        sim.bind_flow(b, dst, id);
    }
    (a, b, slots)
}

/// The per-flow summary of a web flow: bytes delivered to the browser, retransmissions and packets
/// (TCP segments of both ends, DNS queries and answers, SYNs) of every connection; the scenario
/// divides the flow's drops of non-ACK packets by `packets_sent` and the delivered bytes by the
/// active time.
pub fn flow_result(client: &WebClient, server: &WebServer) -> FlowResult {
    let mut fr = FlowResult::default();
    for l in &client.loads {
        fr.packets_sent += l.setup_packets();
        for c in &l.conns {
            fr.delivered_bytes += c.ep.rx.delivered;
            fr.retransmissions += c.ep.tx.stats.retransmissions;
            fr.rtos += c.ep.tx.stats.rtos;
            fr.packets_sent += c.ep.tx.stats.segments_sent;
        }
    }
    // DNS answers count as data packets (a lost one is a lost packet of the flow); SYN-ACKs carry
    // the ACK flag and, like ACKs, are neither counted as sent nor as lost.
    fr.packets_sent += server.dns_answered;
    for e in server.conns.iter().flatten() {
        fr.retransmissions += e.tx.stats.retransmissions;
        fr.rtos += e.tx.stats.rtos;
        fr.packets_sent += e.tx.stats.segments_sent;
    }
    fr
}
