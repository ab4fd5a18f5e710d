//! Bindings of the open-loop TCP trace replay (`leoguard validate tcp-trace`, docs/tcp-trace.md): a
//! sender-side capture (leoguard's `[capture]` pcap: classic, LINKTYPE_RAW, IPv6) is read into one
//! connection's data segments and ACKs with their TCP options, mapped onto the model's byte offsets
//! (relative to the ISN, segments larger than the MSS split into MSS pieces), and replayed against
//! leoguard-proto's sender ([`leoguard_proto::trace_replay`]).

use crate::LeoguardError;
use leoguard_core::{Duration, Instant};
use leoguard_proto::tcp::{Recovery, TcpConfig};
use leoguard_proto::trace_replay::{replay, InfoSample, ReplayConfig, TraceEvent, TraceKind};
use leoguard_wire::pcap::{read_records, LINKTYPE_RAW};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

const SYN: u16 = 0x02;
const ACK: u16 = 0x10;

/// One captured TCP segment of the connection, as on the wire.
#[derive(Clone, Debug, Default)]
struct Wire {
    t_ns: u64,
    /// From the sender (data direction).
    data_dir: bool,
    seq: u32,
    ack: u32,
    flags: u16,
    win: u16,
    payload: u32,
    mss: Option<u16>,
    wscale: Option<u8>,
    ts: Option<(u32, u32)>,
    sack: Vec<(u32, u32)>,
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The TCP options of interest (RFC 793 MSS, RFC 7323 window scale and timestamps, RFC 2018 SACK).
fn options(opts: &[u8], w: &mut Wire) {
    let mut i = 0;
    while i < opts.len() {
        let kind = opts[i];
        if kind == 0 {
            break;
        }
        if kind == 1 {
            i += 1;
            continue;
        }
        let Some(&len) = opts.get(i + 1) else { break };
        let len = usize::from(len);
        if len < 2 || i + len > opts.len() {
            break;
        }
        let body = &opts[i + 2..i + len];
        match (kind, body.len()) {
            (2, 2) => w.mss = Some(be16(body, 0)),
            (3, 1) => w.wscale = Some(body[0]),
            (8, 8) => w.ts = Some((be32(body, 0), be32(body, 4))),
            (5, n) if n % 8 == 0 => w.sack = body.chunks(8).map(|c| (be32(c, 0), be32(c, 4))).collect(),
            _ => {}
        }
        i += len;
    }
}

/// The segments between port `sport` (sender) and `dport` (receiver), in capture order. A file that is
/// not a leoguard capture is refused naming what is wrong; records that are not IPv6 TCP are skipped.
fn read(pcap: &[u8], sport: u16, dport: u16) -> Result<Vec<Wire>, String> {
    let mut out = Vec::new();
    for (t_ns, body) in read_records(pcap, LINKTYPE_RAW)? {
        if body.len() < 40 || body[0] >> 4 != 6 {
            continue;
        }
        let payload_len = usize::from(be16(body, 4));
        let (mut nh, mut off) = (body[6], 40usize);
        // Hop-by-Hop, Routing, Destination Options (RFC 8200): next header, length in 8-byte units.
        while matches!(nh, 0 | 43 | 60) && off + 2 <= body.len() {
            nh = body[off];
            off += (usize::from(body[off + 1]) + 1) * 8;
        }
        if nh != 6 || off + 20 > body.len() {
            continue;
        }
        let tcp = &body[off..];
        let (sp, dp) = (be16(tcp, 0), be16(tcp, 2));
        let data_dir = (sp, dp) == (sport, dport);
        if !data_dir && (sp, dp) != (dport, sport) {
            continue;
        }
        let hdr = usize::from(tcp[12] >> 4) * 4;
        let mut w = Wire {
            t_ns,
            data_dir,
            seq: be32(tcp, 4),
            ack: be32(tcp, 8),
            flags: be16(tcp, 12) & 0x1FF,
            win: be16(tcp, 14),
            payload: (payload_len + 40).saturating_sub(off + hdr) as u32,
            ..Wire::default()
        };
        if hdr > 20 {
            options(&tcp[20..hdr.min(tcp.len())], &mut w);
        }
        out.push(w);
    }
    Ok(out)
}

/// 32-bit sequence numbers as 64-bit offsets from `base` (the first data byte), unwrapped near `near`.
fn unwrap(x: u32, base: u32, near: u64) -> u64 {
    let rel = u64::from(x.wrapping_sub(base));
    let hi = near & !0xFFFF_FFFF;
    [hi.wrapping_sub(1 << 32), hi, hi + (1 << 32)]
        .into_iter()
        .map(|h| h.wrapping_add(rel))
        .filter(|&c| c < (1 << 62))
        .min_by_key(|&c| c.abs_diff(near))
        .unwrap_or(rel)
}

/// The connection mapped onto the model: its events, one row per captured packet for the report, and
/// what the handshake said.
struct Mapped {
    events: Vec<TraceEvent>,
    /// Per event: the captured packet's row.
    event_row: Vec<usize>,
    rows: Vec<Row>,
    mss: u32,
    ts: bool,
    wscale: u8,
    first_data: Option<(Instant, u64)>,
    second_data: Option<Instant>,
    high: u64,
}

struct Row {
    t_ns: u64,
    data: bool,
    seq: u64,
    end: u64,
    ack: u64,
    sack: Vec<(u64, u64)>,
    flags: u16,
    retx: bool,
    rwnd: u64,
}

fn map(segs: &[Wire]) -> Result<Mapped, String> {
    let syn = segs.iter().find(|w| w.data_dir && w.flags & (SYN | ACK) == SYN).ok_or("no SYN from the sender")?;
    let synack = segs.iter().find(|w| !w.data_dir && w.flags & (SYN | ACK) == SYN | ACK);
    let ts = syn.ts.is_some() && synack.is_none_or(|s| s.ts.is_some());
    // Linux's mss_cache: the smaller of the two MSS options, less the timestamp option (12 bytes).
    let peer_mss = synack.and_then(|s| s.mss).unwrap_or(u16::MAX);
    let mss = u32::from(syn.mss.unwrap_or(1440).min(peer_mss)) - if ts { 12 } else { 0 };
    // The receiver's window field is scaled by the shift it announced (not on the SYN-ACK itself).
    let wscale = match (syn.wscale, synack.and_then(|s| s.wscale)) {
        (Some(_), Some(r)) => r.min(14),
        _ => 0,
    };
    let base = syn.seq.wrapping_add(1);
    let (mut events, mut event_row, mut rows) = (Vec::new(), Vec::new(), Vec::new());
    let (mut high, mut near) = (0u64, 0u64);
    let (mut first_data, mut second_data) = (None, None);
    for w in segs {
        let t = Instant(w.t_ns);
        if w.flags & SYN != 0 {
            continue;
        }
        if w.data_dir {
            if w.payload == 0 {
                continue;
            }
            let seq = unwrap(w.seq, base, near);
            let end = seq + u64::from(w.payload);
            near = end;
            let retx = seq < high;
            rows.push(Row { t_ns: w.t_ns, data: true, seq, end, ack: 0, sack: vec![], flags: w.flags, retx, rwnd: 0 });
            match first_data {
                None => first_data = Some((t, u64::from(w.payload))),
                Some(_) if second_data.is_none() => second_data = Some(t),
                _ => {}
            }
            // GSO/TSO super-segments (a capture inside the hosts, or offloads on): MSS pieces, as on the wire.
            let mut s = seq;
            while s < end {
                let e = (s + u64::from(mss)).min(end);
                let tsval = w.ts.map(|x| x.0);
                events.push(TraceEvent { t, kind: TraceKind::Send { seq: s, end: e, tsval } });
                event_row.push(rows.len() - 1);
                s = e;
            }
            high = high.max(end);
        } else if w.flags & ACK != 0 {
            let cum = unwrap(w.ack, base, near);
            let sack: Vec<(u64, u64)> =
                w.sack.iter().take(3).map(|&(a, b)| (unwrap(a, base, near), unwrap(b, base, near))).collect();
            let rwnd = u64::from(w.win) << wscale;
            let mut blocks = [(0u64, 0u64); 3];
            blocks[..sack.len()].copy_from_slice(&sack);
            rows.push(Row {
                t_ns: w.t_ns,
                data: false,
                seq: 0,
                end: 0,
                ack: cum,
                sack,
                flags: w.flags,
                retx: false,
                rwnd,
            });
            if first_data.is_none() {
                continue; // the handshake's ACKs: nothing is in flight yet
            }
            let kind = TraceKind::Ack {
                cum,
                sack: blocks,
                n_sack: rows.last().map_or(0, |r| r.sack.len() as u8),
                rwnd,
                tsecr: w.ts.map(|x| x.1),
            };
            events.push(TraceEvent { t, kind });
            event_row.push(rows.len() - 1);
        }
    }
    Ok(Mapped { events, event_row, rows, mss, ts, wscale, first_data, second_data, high })
}

fn kind_name(k: leoguard_proto::trace_replay::DivergenceKind) -> &'static str {
    k.name()
}

/// Replays the connection from port `sport` to port `dport` of capture `pcap` against the model with
/// controller `cc`; `samples` are the sender's TCP_INFO readings as columns (t_lo_ns, t_hi_ns, cwnd,
/// in_recovery). Returns the connection's parameters, its packets (columns), the divergences (each
/// with the row of the packet it was found at), the aligned window series (columns) and counters.
#[pyfunction]
#[pyo3(signature = (pcap, sport, dport, samples, cc = "cubic", slack_ms = 10.0, tol_segments = 2.0, tol_frac = 0.1, max_divergences = 20, pacing = true, switches = Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn tcp_trace_replay<'py>(
    py: Python<'py>,
    pcap: &[u8],
    sport: u16,
    dport: u16,
    samples: &Bound<'py, PyDict>,
    cc: &str,
    slack_ms: f64,
    tol_segments: f64,
    tol_frac: f64,
    max_divergences: usize,
    pacing: bool,
    switches: Vec<(String, bool)>,
) -> PyResult<Bound<'py, PyDict>> {
    let err = |m: String| LeoguardError::new_err(m);
    let segs = read(pcap, sport, dport).map_err(|m| err(format!("capture: {m}")))?;
    let m = map(&segs).map_err(|e| err(format!("capture: connection {sport} -> {dport}: {e}")))?;
    let col = |k: &str| -> PyResult<Vec<u64>> { crate::get::<Vec<u64>>(samples, k).map(Option::unwrap_or_default) };
    let (t_lo, t_hi, cwnd) = (col("t_lo_ns")?, col("t_hi_ns")?, col("cwnd")?);
    let rec: Vec<bool> = crate::get::<Vec<bool>>(samples, "in_recovery")?.unwrap_or_default();
    if [t_hi.len(), cwnd.len(), rec.len()].iter().any(|&n| n != t_lo.len()) {
        return Err(err("samples: t_lo_ns, t_hi_ns, cwnd and in_recovery differ in length".into()));
    }
    let infos: Vec<InfoSample> = (0..t_lo.len())
        .map(|i| InfoSample {
            t_lo: Instant(t_lo[i]),
            t_hi: Instant(t_hi[i].max(t_lo[i])),
            cwnd_segments: cwnd[i],
            in_recovery: rec[i],
        })
        .collect();
    // The application: a short first segment was written alone (iperf3's 37-byte cookie, then the
    // test starts), the rest by the time the second segment left; in all, what the kernel sent.
    let writes = match (m.first_data, m.second_data) {
        (Some((t, len)), Some(t2)) if len < u64::from(m.mss) => vec![(t, len), (t2, m.high - len)],
        (Some((t, _)), _) => vec![(t, m.high)],
        (None, _) => vec![],
    };
    // The model's loss-recovery switches (to test a hypothesis: does the departure move without HyStart?).
    let mut recovery = Recovery::linux();
    for (name, on) in &switches {
        if !recovery.set(name, *on) {
            return Err(err(format!("unknown model switch '{name}' (known: {})", Recovery::NAMES.join(", "))));
        }
    }
    let cfg = ReplayConfig {
        tcp: TcpConfig { mss: m.mss, header_bytes: 40 + if m.ts { 32 } else { 20 }, recovery, ..TcpConfig::default() },
        cc: cc.to_string(),
        writes,
        slack: Duration::from_secs_f64(slack_ms.max(0.0) / 1e3),
        tol_segments,
        tol_frac,
        max_divergences,
        // Linux's defaults (net.ipv4.tcp_pacing_ss_ratio, tcp_pacing_ca_ratio).
        pacing: pacing.then_some((200, 120)),
    };
    let rep = py.allow_threads(|| replay(&cfg, &m.events, &infos)).map_err(|e| err(e.to_string()))?;

    let out = PyDict::new(py);
    let conn = PyDict::new(py);
    conn.set_item("mss", m.mss)?;
    conn.set_item("timestamps", m.ts)?;
    conn.set_item("wscale", m.wscale)?;
    conn.set_item("data_bytes", m.high)?;
    conn.set_item("first_segment_bytes", m.first_data.map(|x| x.1))?;
    out.set_item("connection", conn)?;
    let pk = PyDict::new(py);
    let r = &m.rows;
    pk.set_item("t_ns", r.iter().map(|x| x.t_ns).collect::<Vec<_>>())?;
    pk.set_item("dir", r.iter().map(|x| if x.data { "data" } else { "ack" }).collect::<Vec<_>>())?;
    pk.set_item("seq", r.iter().map(|x| x.seq).collect::<Vec<_>>())?;
    pk.set_item("end", r.iter().map(|x| x.end).collect::<Vec<_>>())?;
    pk.set_item("ack", r.iter().map(|x| x.ack).collect::<Vec<_>>())?;
    pk.set_item("sack", r.iter().map(|x| x.sack.clone()).collect::<Vec<_>>())?;
    pk.set_item("flags", r.iter().map(|x| x.flags).collect::<Vec<_>>())?;
    pk.set_item("retransmission", r.iter().map(|x| x.retx).collect::<Vec<_>>())?;
    pk.set_item("rwnd", r.iter().map(|x| x.rwnd).collect::<Vec<_>>())?;
    out.set_item("packets", pk)?;
    let divs = PyList::empty(py);
    for d in &rep.divergences {
        let x = PyDict::new(py);
        x.set_item("t_ns", d.t.as_nanos())?;
        x.set_item("kind", kind_name(d.kind))?;
        x.set_item("row", m.event_row.get(d.event).copied())?;
        x.set_item("kernel", d.kernel)?;
        x.set_item(
            "model",
            d.model
                .map(|(s, due)| (s.seq, s.seq + u64::from(s.len), s.retransmission, s.ts.as_nanos(), due.as_nanos())),
        )?;
        x.set_item("kernel_cwnd", d.kernel_cwnd)?;
        x.set_item("model_cwnd_segments", d.model_cwnd as f64 / f64::from(m.mss))?;
        x.set_item("model_in_flight_segments", d.model_in_flight as f64 / f64::from(m.mss))?;
        x.set_item("model_state", d.model_state)?;
        divs.append(x)?;
    }
    out.set_item("divergences", divs)?;
    let se = PyDict::new(py);
    let s = &rep.series;
    se.set_item("t_ns", s.iter().map(|x| x.t.as_nanos()).collect::<Vec<_>>())?;
    se.set_item("kernel_cwnd", s.iter().map(|x| x.kernel_cwnd).collect::<Vec<_>>())?;
    se.set_item("model_cwnd_lo", s.iter().map(|x| x.model_cwnd_lo).collect::<Vec<_>>())?;
    se.set_item("model_cwnd_hi", s.iter().map(|x| x.model_cwnd_hi).collect::<Vec<_>>())?;
    se.set_item("model_ssthresh", s.iter().map(|x| x.model_ssthresh).collect::<Vec<_>>())?;
    se.set_item("compared", s.iter().map(|x| x.compared).collect::<Vec<_>>())?;
    se.set_item("within", s.iter().map(|x| x.within).collect::<Vec<_>>())?;
    out.set_item("series", se)?;
    out.set_item("divergence_count", rep.divergence_count)?;
    out.set_item("matched_before_first", rep.matched_before_first)?;
    out.set_item("kernel_sends", rep.kernel_sends)?;
    out.set_item("kernel_retransmissions", rep.kernel_retransmissions)?;
    out.set_item("max_lag_ms", rep.max_lag.as_millis_f64())?;
    out.set_item("max_lag_at_ns", rep.max_lag_at.as_nanos())?;
    let mut lags = rep.lags_ns.clone();
    lags.sort_unstable();
    let pct = |q: f64| lags.get(((lags.len().saturating_sub(1)) as f64 * q) as usize).map(|&x| x as f64 / 1e6);
    out.set_item("lag_ms_p50", pct(0.5))?;
    out.set_item("lag_ms_p99", pct(0.99))?;
    let st = PyDict::new(py);
    st.set_item("segments_sent", rep.model_stats.segments_sent)?;
    st.set_item("retransmissions", rep.model_stats.retransmissions)?;
    st.set_item("rtos", rep.model_stats.rtos)?;
    st.set_item("recoveries", rep.model_stats.recoveries)?;
    st.set_item("tlps", rep.model_stats.tlps)?;
    st.set_item("undos", rep.model_stats.undos)?;
    out.set_item("model_stats", st)?;
    Ok(out)
}

/// Adds the trace replay to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tcp_trace_replay, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_unwrap_across_the_32_bit_edge() {
        let base = u32::MAX - 10;
        assert_eq!(unwrap(base, base, 0), 0);
        assert_eq!(unwrap(5, base, 10), 16);
        assert_eq!(unwrap(base.wrapping_add(100), base, (1 << 32) + 50), (1 << 32) + 100);
    }

    #[test]
    fn tcp_options_are_read() {
        let mut w = Wire::default();
        // NOP NOP TS(1, 2) SACK(10-20, 30-40) MSS 1440 WS 7
        let mut o = vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 5, 18];
        for x in [10u32, 20, 30, 40] {
            o.extend_from_slice(&x.to_be_bytes());
        }
        o.extend_from_slice(&[2, 4, 0x05, 0xA0, 3, 3, 7, 0]);
        options(&o, &mut w);
        assert_eq!(w.ts, Some((1, 2)));
        assert_eq!(w.sack, vec![(10, 20), (30, 40)]);
        assert_eq!(w.mss, Some(1440));
        assert_eq!(w.wscale, Some(7));
    }
}
