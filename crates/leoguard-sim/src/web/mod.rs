//! Web browsing over the simulator: a synthetic page corpus from published web statistics
//! (`corpus`), a browser agent that loads pages object by object over HTTP/1.1 or HTTP/2 with DNS,
//! TCP and TLS 1.3 set-up per host (`browser`), the server agent that answers it (`server`), and the
//! page-load metrics (page load time, Speed Index). docs/web.md describes the model as built.
//!
//! Flow ids: a web flow `i` of the scenario keeps its own id for nothing but bookkeeping; each of its
//! connections gets its own flow id (so in-network schemes see separate flows), allocated in a block
//! above the scenario's flows when the run is built: one slot per connection the page loads may open
//! (per load and host: one for HTTP/2, up to six for HTTP/1.1), in load order. The run records which
//! scenario flow each extra id belongs to.

pub mod browser;
pub mod conn;
pub mod corpus;
pub mod server;
pub mod setup;
#[cfg(test)]
mod tests;

use leoguard_core::{Duration, Instant};

/// HTTP version a browser speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Http {
    /// HTTP/1.1: up to [`H1_CONNS_PER_HOST`] persistent connections per host, one request at a time
    /// on each.
    Http1,
    /// HTTP/2: one connection per host, every request multiplexed on it.
    Http2,
}

impl Http {
    /// Parses "1.1" or "2".
    pub fn parse(s: &str) -> Option<Http> {
        match s {
            "1.1" | "http/1.1" | "h1" => Some(Http::Http1),
            "2" | "h2" | "http/2" => Some(Http::Http2),
            _ => None,
        }
    }

    /// "1.1" or "2".
    pub fn name(self) -> &'static str {
        match self {
            Http::Http1 => "1.1",
            Http::Http2 => "2",
        }
    }
}

/// Chrome's (and Firefox's) limit of persistent HTTP/1.1 connections per host (RFC 7230 §6.4 leaves
/// it open; browsers use 6).
pub const H1_CONNS_PER_HOST: u32 = 6;

/// Wire sizes of the set-up and HTTP messages, bytes. DNS: IPv4 + UDP + a query for a typical host
/// name (~42 B of DNS); the answer adds one A record and EDNS. TCP SYN/SYN-ACK: 20 B of options
/// (MSS, SACK-permitted, timestamps, window scale). TLS 1.3 (RFC 8446): Chrome pads its ClientHello
/// to 512 B (+5 B record header); the server's flight (ServerHello, EncryptedExtensions, a two-
/// certificate RSA-2048 chain, CertificateVerify, Finished) is ~4.5 KB; the client's Finished with
/// the compatibility ChangeCipherSpec is ~64 B. HTTP/1.1 header sizes: HTTP Archive medians of
/// ~500 B per request and ~400 B per response header; HTTP/2 compresses repeated headers with HPACK
/// (RFC 7541) to ~100 B each way, and opens with the 24 B preface and a SETTINGS frame each way.
pub mod sizes {
    /// DNS query on the wire.
    pub const DNS_QUERY: u32 = 70;
    /// DNS answer on the wire.
    pub const DNS_ANSWER: u32 = 110;
    /// SYN or SYN-ACK on the wire.
    pub const SYN: u32 = 60;
    /// TLS ClientHello.
    pub const CLIENT_HELLO: u64 = 517;
    /// TLS server flight.
    pub const SERVER_FLIGHT: u64 = 4_500;
    /// TLS client Finished.
    pub const CLIENT_FINISHED: u64 = 64;
    /// HTTP/2 connection preface + SETTINGS (client) and SETTINGS (server).
    pub const H2_PREFACE: u64 = 64;
    /// HTTP/1.1 request.
    pub const H1_REQUEST: u64 = 500;
    /// HTTP/1.1 response header.
    pub const H1_RESPONSE_HEADER: u64 = 400;
    /// HTTP/2 request (HPACK-compressed HEADERS frame).
    pub const H2_REQUEST: u64 = 100;
    /// HTTP/2 response HEADERS frame plus DATA frame headers.
    pub const H2_RESPONSE_HEADER: u64 = 100;
}

/// Retransmission timeout of a SYN and of a DNS query (RFC 6298 §2.1 initial RTO 1 s, Linux
/// `TCP_TIMEOUT_INIT`; glibc's resolver also waits ~1 s per try at its shortest setting), doubled
/// per retry.
pub const SETUP_TIMEOUT: Duration = Duration(1_000_000_000);

/// Number of connection slots page `page` may use: per host, one (HTTP/2) or as many as it has
/// objects, at most six (HTTP/1.1). Returns the first slot of each host and the total.
pub fn slots_of(page: &corpus::Page, http: Http) -> (Vec<u32>, u32) {
    let mut per_host = vec![0u32; page.origins as usize];
    for o in &page.objects {
        per_host[o.origin as usize] += 1;
    }
    let mut first = Vec::with_capacity(per_host.len());
    let mut total = 0;
    for n in per_host {
        first.push(total);
        total += match http {
            Http::Http1 => n.clamp(1, H1_CONNS_PER_HOST),
            Http::Http2 => 1,
        };
    }
    (first, total)
}

/// One page load of a web flow.
#[derive(Clone, Debug, PartialEq)]
pub struct WebLoadRow {
    /// Scenario flow index.
    pub flow: u32,
    /// Position in the flow's page list.
    pub load: u32,
    /// Corpus page index.
    pub page: u32,
    /// Navigation start, ns.
    pub start_ns: u64,
    /// Page load time (navigation start to the last object complete), ns; None if unfinished.
    pub plt_ns: Option<u64>,
    /// Speed Index estimate, ns; None if unfinished.
    pub speed_index_ns: Option<u64>,
    /// Objects of the page.
    pub objects: u32,
    /// Objects complete.
    pub objects_done: u32,
    /// Response body bytes of the page.
    pub bytes: u64,
    /// Hosts of the page.
    pub origins: u32,
    /// Connections opened.
    pub connections: u32,
    /// Mean DNS lookup time over the hosts resolved, ns.
    pub dns_ns: u64,
    /// Mean connection set-up time (SYN sent to TLS done) over connections set up, ns.
    pub handshake_ns: u64,
    /// TCP retransmissions on the load's connections (both directions).
    pub retransmissions: u64,
    /// SYNs and DNS queries sent again after a timeout.
    pub setup_retries: u64,
}

/// One object of a page load.
#[derive(Clone, Debug, PartialEq)]
pub struct WebObjectRow {
    /// Scenario flow index.
    pub flow: u32,
    /// Position in the flow's page list.
    pub load: u32,
    /// Object index in the page.
    pub object: u32,
    /// Host.
    pub origin: u32,
    /// Resource type ("html", "css", "js", "image", "font", "other").
    pub kind: &'static str,
    /// Response body bytes.
    pub size: u64,
    /// Parent object (None: the root).
    pub parent: Option<u32>,
    /// Request written, ns after navigation start (None: not requested).
    pub requested_ns: Option<u64>,
    /// Response complete, ns after navigation start (None: not complete).
    pub done_ns: Option<u64>,
    /// Weight in the visual-completeness estimate.
    pub visual_weight: f64,
}

/// Speed Index estimate: the integral over time, from navigation start, of one minus the visual
/// completeness, where visual completeness at t is the share of visual weight whose objects have
/// completed by t (an object-completion approximation of WebPageTest's frame-based Speed Index, as in
/// Bocchi, De Cicco & Rossi, "Measuring the Quality of Experience of Web users", ACM SIGCOMM
/// Internet-QoE 2016, ByteIndex/ObjectIndex). `done` are (completion time, weight) pairs; None if a
/// visual object is unfinished.
pub fn speed_index(start: Instant, done: &[(Option<Instant>, f64)]) -> Option<Duration> {
    let total: f64 = done.iter().map(|d| d.1).filter(|&w| w > 0.0).sum();
    if total <= 0.0 {
        return Some(Duration::ZERO);
    }
    let mut pts: Vec<(u64, f64)> = Vec::new();
    for &(t, w) in done {
        if w > 0.0 {
            pts.push((t?.saturating_duration_since(start).as_nanos(), w));
        }
    }
    pts.sort_by_key(|p| p.0);
    let (mut si, mut prev, mut complete) = (0.0, 0u64, 0.0);
    for (t, w) in pts {
        si += (t - prev) as f64 * (1.0 - complete / total);
        prev = t;
        complete += w;
    }
    Some(Duration(si.round() as u64))
}
