//! The command line of `leoguard-transport` (see `USAGE`): every bad argument is a one-line error that
//! names the flag.

use std::net::SocketAddr;
use std::path::PathBuf;

use leoguard_core::{Bps, Duration};
use leoguard_proto::startcp::StartcpConfig;
use leoguard_proto::tcp::{Recovery, TcpConfig};

/// The usage text.
pub const USAGE: &str = "\
usage: leoguard-transport send --to ADDR:PORT --cc NAME (--bytes N | --seconds S) [--json-interval MS]
                               [--rate-mbps R] [--mss BYTES] [--recovery SPEC] [--timeout S]
                               [--flow-id N] [--tclass TC] [--startcp SPEC]
       leoguard-transport recv --bind ADDR:PORT --out FILE.json [--json-interval MS] [--recovery SPEC]
                               [--timeout S] [--linger-ms MS] [--startcp SPEC]
  --cc        a congestion controller of leoguard-proto's registry (newreno, reno, cubic, bbr, satcp,
              startcp)
  --startcp   StarTCP's [startcp] fields as NAME=VALUE,...: base_cc period_s gap_threshold_ms
              kde_bandwidth_ms min_events max_events probe_interval_ms resume_timeout_ms max_lead_ms
              lead_rttvar_gain lead_margin_ms state_interval_ms state_intervals policy (heuristic,
              fixed, scripted, learnt) lead_ms leads_ms (MS:MS:...) weights (a JSON file); `on` for
              the defaults. send: with --cc startcp; recv: runs the Handover Manager
  --bytes     a transfer of N bytes (suffixes K, M, G: powers of 1024); --seconds: write for S seconds
  --recovery  linux or legacy, then switches: linux,rack=off,tlp=on (rack tlp dsack undo frto prr
              cwnd_limited quickack hystart)
  --mss       payload bytes per datagram (default: a 1500-byte path: 1426 over IPv6, 1446 over IPv4)
  --timeout   give up after S seconds (send: default S + 10 with --seconds, none with --bytes;
              recv: default none)
       leoguard-transport leotp-serve --bind ADDR:PORT [--bytes N] [--out FILE.json] [--timeout S]
       leoguard-transport leotp-fetch --from ADDR:PORT (--bytes N | --seconds S) [--bind ADDR:PORT]
                                      [--out FILE.json] [--mss BYTES] [--timeout S]
  leotp-serve  a LEOTP producer of N pattern bytes (default: unbounded, 4 GiB - 1) to every consumer
  leotp-fetch  a LEOTP consumer: fetches [0, N) (or as much as S seconds allow), checks every byte,
               prints a JSON summary (docs/leotp.md, \"On real packets\")";

/// Bytes of the IP and UDP headers and the transport's data header on a datagram of `addr`'s family.
pub fn header_bytes(addr: &SocketAddr) -> u32 {
    let ip = if addr.is_ipv6() { 40 } else { 20 };
    ip + 8 + leoguard_wire::transport::DATA_HEADER_LEN as u32
}

/// The MSS that fills a 1500-byte path.
pub fn default_mss(addr: &SocketAddr) -> u32 {
    1500 - header_bytes(addr)
}

/// How the StarTCP sender chooses its lead, as the command line gives it (`--startcp policy=...`).
#[derive(Clone, Debug, PartialEq)]
pub enum PolicyArg {
    /// The drain-time heuristic.
    Heuristic,
    /// `lead_ms`.
    Fixed(Duration),
    /// `leads_ms`, one per handover.
    Scripted(Vec<Duration>),
    /// The actor in the JSON weights file `weights` (read by the binary).
    Learnt(PathBuf),
}

/// `--startcp`: StarTCP's configuration and lead policy (the scenario's `[startcp]`).
#[derive(Clone, Debug, PartialEq)]
pub struct StartcpArgs {
    /// Handover Manager and Sending Controller parameters (validated).
    pub config: StartcpConfig,
    /// The lead policy.
    pub policy: PolicyArg,
}

/// `--startcp` fields: the scenario's `[startcp]` name, the `StartcpConfig` field it sets and the
/// factor from its unit to the config's (seconds; counts and gains as they are).
const STARTCP_FIELDS: [(&str, &str, f64); 12] = [
    ("period_s", "period", 1.0),
    ("gap_threshold_ms", "gap_threshold", 1e-3),
    ("kde_bandwidth_ms", "kde_bandwidth", 1e-3),
    ("min_events", "min_events", 1.0),
    ("max_events", "max_events", 1.0),
    ("probe_interval_ms", "probe_interval", 1e-3),
    ("resume_timeout_ms", "resume_timeout", 1e-3),
    ("max_lead_ms", "max_lead", 1e-3),
    ("lead_rttvar_gain", "lead_rttvar_gain", 1.0),
    ("lead_margin_ms", "lead_margin", 1e-3),
    ("state_interval_ms", "state_interval", 1e-3),
    ("state_intervals", "state_intervals", 1.0),
];

fn lead_ms(k: &str, v: &str) -> Result<Duration, String> {
    match v.parse::<f64>() {
        Ok(ms) if ms.is_finite() && (0.0..1e7).contains(&ms) => Ok(Duration::from_secs_f64(ms / 1e3)),
        _ => Err(format!("--startcp: {k} expects milliseconds in [0, 1e7), got {v:?}")),
    }
}

/// Parses `--startcp`: `on`, or `NAME=VALUE` pairs separated by commas, named as the scenario's
/// `[startcp]` fields.
pub fn startcp(spec: &str) -> Result<StartcpArgs, String> {
    let mut config = StartcpConfig::default();
    let (mut policy, mut lead, mut leads, mut weights) = (None, None, None, None);
    for part in spec.split(',').filter(|p| !p.is_empty() && *p != "on") {
        let (k, v) = part.split_once('=').ok_or_else(|| format!("--startcp: expected NAME=VALUE, got {part:?}"))?;
        match k {
            "base_cc" => config.set_base_cc(v).map_err(|e| format!("--startcp: {e}"))?,
            "policy" => policy = Some(v.to_string()),
            "lead_ms" => lead = Some(lead_ms(k, v)?),
            "leads_ms" => leads = Some(v.split(':').map(|x| lead_ms(k, x)).collect::<Result<Vec<_>, _>>()?),
            "weights" => weights = Some(PathBuf::from(v)),
            _ => {
                let Some(&(_, field, unit)) = STARTCP_FIELDS.iter().find(|f| f.0 == k) else {
                    let known: Vec<&str> = STARTCP_FIELDS.iter().map(|f| f.0).collect();
                    return Err(format!(
                        "--startcp: unknown field {k:?} (known: base_cc, {}, policy, lead_ms, leads_ms, weights)",
                        known.join(", ")
                    ));
                };
                let x = v.parse::<f64>().map_err(|_| format!("--startcp: {k} expects a number, got {v:?}"))?;
                config.set(field, x * unit).map_err(|e| format!("--startcp: {k} = {v}: {e}"))?;
            }
        }
    }
    config.validate().map_err(|e| format!("--startcp: {e}"))?;
    let need = |what: &str| format!("--startcp: policy={} needs {what}", policy.as_deref().unwrap_or_default());
    let policy = match policy.as_deref() {
        None | Some("heuristic") => PolicyArg::Heuristic,
        Some("fixed") => PolicyArg::Fixed(lead.ok_or_else(|| need("lead_ms"))?),
        Some("scripted") => PolicyArg::Scripted(leads.take().ok_or_else(|| need("leads_ms"))?),
        Some("learnt") => PolicyArg::Learnt(weights.take().ok_or_else(|| need("weights (a JSON file)"))?),
        Some(other) => {
            return Err(format!("--startcp: policy={other:?}: expected heuristic, fixed, scripted or learnt"))
        }
    };
    if weights.is_some() {
        return Err("--startcp: weights is only read with policy=learnt".into());
    }
    if leads.is_some() {
        return Err("--startcp: leads_ms is only read with policy=scripted".into());
    }
    Ok(StartcpArgs { config, policy })
}

/// `send` arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct SendArgs {
    /// The receiver.
    pub to: SocketAddr,
    /// Congestion controller name.
    pub cc: String,
    /// How much to send.
    pub amount: crate::sender::Amount,
    /// Per-interval telemetry on stdout.
    pub json_interval: Option<Duration>,
    /// Application rate.
    pub rate: Option<Bps>,
    /// Payload bytes per segment.
    pub mss: u32,
    /// Loss-recovery switches.
    pub recovery: Recovery,
    /// Give up after this long.
    pub timeout: Option<Duration>,
    /// Connection id (default: random).
    pub flow_id: Option<u32>,
    /// IP traffic class / TOS byte of the datagrams.
    pub tclass: Option<u8>,
    /// StarTCP's configuration (with `--cc startcp`).
    pub startcp: Option<StartcpArgs>,
}

/// `recv` arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct RecvArgs {
    /// Address to bind.
    pub bind: SocketAddr,
    /// Where the JSON report goes.
    pub out: PathBuf,
    /// Interval of the report's delivery series.
    pub json_interval: Option<Duration>,
    /// Loss-recovery switches (the receiver's: DSACK, quick ACKs).
    pub recovery: Recovery,
    /// Give up after this long.
    pub timeout: Option<Duration>,
    /// How long to stay after the transfer completed, answering repeated FINs.
    pub linger: Duration,
    /// Run StarTCP's Handover Manager with this configuration.
    pub startcp: Option<StartcpArgs>,
}

/// A parsed command line.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `send`.
    Send(SendArgs),
    /// `recv`.
    Recv(RecvArgs),
    /// `leotp-serve`: a LEOTP producer.
    LeotpServe(crate::leotp::ServeArgs),
    /// `leotp-fetch`: a LEOTP consumer.
    LeotpFetch(crate::leotp::FetchArgs),
    /// `--help`.
    Help,
}

impl SendArgs {
    /// The TCP parameters these arguments give.
    pub fn tcp_config(&self) -> TcpConfig {
        TcpConfig {
            mss: self.mss,
            header_bytes: header_bytes(&self.to),
            recovery: self.recovery,
            ..TcpConfig::default()
        }
    }
}

impl RecvArgs {
    /// The TCP parameters these arguments give.
    pub fn tcp_config(&self) -> TcpConfig {
        TcpConfig { recovery: self.recovery, ..TcpConfig::default() }
    }
}

pub(crate) type Flags = Vec<(String, String)>;

pub(crate) fn flags(args: &[String], known: &[&str]) -> Result<Flags, String> {
    let mut out: Flags = Vec::new();
    let mut it = args.iter();
    while let Some(k) = it.next() {
        if !known.contains(&k.as_str()) {
            return Err(if k.starts_with("--") {
                format!("unknown flag {k}")
            } else {
                format!("unexpected argument {k:?}")
            });
        }
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        if out.iter().any(|(f, _)| f == k) {
            return Err(format!("{k} given twice"));
        }
        out.push((k.clone(), v.clone()));
    }
    Ok(out)
}

pub(crate) fn get<'a>(f: &'a Flags, k: &str) -> Option<&'a str> {
    f.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

pub(crate) fn addr(f: &Flags, k: &str) -> Result<SocketAddr, String> {
    let v = get(f, k).ok_or_else(|| format!("{k} is required"))?;
    v.parse().map_err(|_| format!("{k}: expected ADDR:PORT ([v6]:port for IPv6), got {v:?}"))
}

pub(crate) fn seconds(f: &Flags, k: &str) -> Result<Option<Duration>, String> {
    get(f, k)
        .map(|v| match v.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s <= 1e6 => Ok(Duration::from_secs_f64(s)),
            _ => Err(format!("{k}: expected seconds in (0, 1e6], got {v:?}")),
        })
        .transpose()
}

pub(crate) fn millis(f: &Flags, k: &str) -> Result<Option<Duration>, String> {
    get(f, k)
        .map(|v| match v.parse::<u64>() {
            Ok(ms) if (1..=3_600_000).contains(&ms) => Ok(Duration::from_millis(ms)),
            _ => Err(format!("{k}: expected whole milliseconds in 1..=3600000, got {v:?}")),
        })
        .transpose()
}

pub(crate) fn byte_count(k: &str, v: &str) -> Result<u64, String> {
    let (num, mult) = match v.char_indices().last() {
        Some((i, 'K' | 'k')) => (&v[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&v[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(n) if n > 0 && n < 1 << 62 => Ok(n),
        _ => Err(format!("{k}: expected a positive byte count (suffix K, M or G allowed), got {v:?}")),
    }
}

/// Parses a recovery spec: `linux` or `legacy`, then `,name=on|off` switches.
pub fn recovery(spec: &str) -> Result<Recovery, String> {
    let mut parts = spec.split(',');
    let mut r = match parts.next().unwrap_or_default() {
        "linux" => Recovery::linux(),
        "legacy" => Recovery::legacy(),
        other => return Err(format!("--recovery: expected linux or legacy first, got {other:?}")),
    };
    for p in parts {
        let (name, on) = match p.split_once('=') {
            Some((n, "on" | "1" | "true")) => (n, true),
            Some((n, "off" | "0" | "false")) => (n, false),
            _ => return Err(format!("--recovery: expected NAME=on|off, got {p:?}")),
        };
        if !r.set(name, on) {
            return Err(format!("--recovery: unknown switch {name:?} (known: {})", Recovery::NAMES.join(", ")));
        }
    }
    Ok(r)
}

fn parse_send(args: &[String]) -> Result<SendArgs, String> {
    let f = flags(
        args,
        &[
            "--to",
            "--cc",
            "--bytes",
            "--seconds",
            "--json-interval",
            "--rate-mbps",
            "--mss",
            "--recovery",
            "--timeout",
            "--flow-id",
            "--tclass",
            "--startcp",
        ],
    )?;
    let to = addr(&f, "--to")?;
    if to.port() == 0 || to.ip().is_unspecified() {
        return Err(format!("--to: {to} is not a destination"));
    }
    let cc = get(&f, "--cc").ok_or("--cc is required")?.to_string();
    leoguard_proto::cc::build(&cc, 1448, 10).map_err(|e| format!("--cc: {e}"))?;
    let amount = match (get(&f, "--bytes"), seconds(&f, "--seconds")?) {
        (Some(b), None) => crate::sender::Amount::Bytes(byte_count("--bytes", b)?),
        (None, Some(d)) => crate::sender::Amount::For(d),
        (Some(_), Some(_)) => return Err("--bytes and --seconds: give one, not both".into()),
        (None, None) => return Err("--bytes or --seconds is required".into()),
    };
    let rate = get(&f, "--rate-mbps")
        .map(|v| match v.parse::<f64>() {
            Ok(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Ok(Bps((r * 1e6).round() as u64)),
            _ => Err(format!("--rate-mbps: expected a rate in (0, 1e6] Mbit/s, got {v:?}")),
        })
        .transpose()?;
    let mss = match get(&f, "--mss") {
        None => default_mss(&to),
        Some(v) => match v.parse::<u32>() {
            Ok(m) if (64..=65_000).contains(&m) => m,
            _ => return Err(format!("--mss: expected payload bytes in 64..=65000, got {v:?}")),
        },
    };
    let flow_id = get(&f, "--flow-id")
        .map(|v| v.parse::<u32>().map_err(|_| format!("--flow-id: expected an integer in 0..=4294967295, got {v:?}")))
        .transpose()?;
    let tclass = get(&f, "--tclass")
        .map(|v| v.parse::<u8>().map_err(|_| format!("--tclass: expected 0..=255, got {v:?}")))
        .transpose()?;
    let startcp = get(&f, "--startcp").map(startcp).transpose()?;
    if startcp.is_some() && cc != "startcp" {
        return Err(format!("--startcp: the sender runs StarTCP only with --cc startcp (got --cc {cc})"));
    }
    Ok(SendArgs {
        to,
        cc,
        amount,
        json_interval: millis(&f, "--json-interval")?,
        rate,
        mss,
        recovery: get(&f, "--recovery").map_or(Ok(Recovery::linux()), recovery)?,
        timeout: seconds(&f, "--timeout")?,
        flow_id,
        tclass,
        startcp,
    })
}

fn parse_recv(args: &[String]) -> Result<RecvArgs, String> {
    let f =
        flags(args, &["--bind", "--out", "--json-interval", "--recovery", "--timeout", "--linger-ms", "--startcp"])?;
    let bind = addr(&f, "--bind")?;
    let out = PathBuf::from(get(&f, "--out").ok_or("--out is required")?);
    if out.as_os_str().is_empty() || out.is_dir() {
        return Err(format!("--out: {} is not a file name", out.display()));
    }
    let linger = match get(&f, "--linger-ms") {
        None => Duration::from_millis(1000),
        Some(v) => match v.parse::<u64>() {
            Ok(ms) if ms <= 600_000 => Duration::from_millis(ms),
            _ => return Err(format!("--linger-ms: expected whole milliseconds in 0..=600000, got {v:?}")),
        },
    };
    Ok(RecvArgs {
        bind,
        out,
        json_interval: millis(&f, "--json-interval")?,
        recovery: get(&f, "--recovery").map_or(Ok(Recovery::linux()), recovery)?,
        timeout: seconds(&f, "--timeout")?,
        linger,
        startcp: get(&f, "--startcp").map(startcp).transpose()?,
    })
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    match args.first().map(String::as_str) {
        Some("send") => parse_send(&args[1..]).map(Command::Send),
        Some("recv") => parse_recv(&args[1..]).map(Command::Recv),
        Some("leotp-serve") => crate::leotp::parse_serve(&args[1..]).map(Command::LeotpServe),
        Some("leotp-fetch") => crate::leotp::parse_fetch(&args[1..]).map(Command::LeotpFetch),
        Some("-h" | "--help" | "help") => Ok(Command::Help),
        Some(other) => Err(format!("unknown command {other:?} (send, recv, leotp-serve or leotp-fetch)")),
        None => Err("a command is required (send, recv, leotp-serve or leotp-fetch)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> Result<Command, String> {
        parse(&line.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn send_and_recv_parse() {
        let Ok(Command::Send(s)) =
            p("send --to [::1]:5000 --cc bbr --bytes 10M --json-interval 100 --recovery linux,tlp=off")
        else {
            panic!("send did not parse");
        };
        assert_eq!(s.amount, crate::sender::Amount::Bytes(10 << 20));
        assert_eq!(s.mss, 1426);
        assert!(!s.recovery.tlp && s.recovery.rack);
        assert_eq!(s.json_interval, Some(Duration::from_millis(100)));
        assert_eq!(s.tcp_config().header_bytes, 74);
        let Ok(Command::Send(s)) = p("send --to 127.0.0.1:9 --cc cubic --seconds 2.5 --rate-mbps 20") else {
            panic!("send did not parse");
        };
        assert_eq!(s.amount, crate::sender::Amount::For(Duration::from_millis(2500)));
        assert_eq!((s.mss, s.rate), (1446, Some(Bps(20_000_000))));
        let Ok(Command::Recv(r)) = p("recv --bind [::]:5000 --out /tmp/x.json --linger-ms 0") else {
            panic!("recv did not parse");
        };
        assert_eq!(r.linger, Duration::ZERO);
        assert_eq!(r.startcp, None);
        assert_eq!(p("--help"), Ok(Command::Help));
    }

    #[test]
    fn startcp_fields_are_the_scenario_sections() {
        let Ok(Command::Send(s)) = p("send --to [::1]:5000 --cc startcp --seconds 5 --startcp \
             period_s=10,kde_bandwidth_ms=20,min_events=1,probe_interval_ms=2,base_cc=cubic,policy=fixed,lead_ms=150")
        else {
            panic!("send did not parse");
        };
        let st = s.startcp.expect("--startcp");
        assert_eq!(st.config.period, Duration::from_secs(10));
        assert_eq!(st.config.kde_bandwidth, Duration::from_millis(20));
        assert_eq!(st.config.probe_interval, Duration::from_millis(2));
        assert_eq!((st.config.min_events, st.config.base_cc), (1, "cubic"));
        assert_eq!(st.policy, PolicyArg::Fixed(Duration::from_millis(150)));
        let Ok(Command::Recv(r)) = p("recv --bind [::]:5000 --out /tmp/x.json --startcp on") else {
            panic!("recv did not parse");
        };
        assert_eq!(r.startcp, Some(StartcpArgs { config: StartcpConfig::default(), policy: PolicyArg::Heuristic }));
        assert_eq!(
            startcp("policy=scripted,leads_ms=100:0:250.5").map(|s| s.policy),
            Ok(PolicyArg::Scripted(vec![Duration::from_millis(100), Duration::ZERO, Duration::from_micros(250_500)]))
        );
        assert_eq!(
            startcp("policy=learnt,weights=/x/w.json").map(|s| s.policy),
            Ok(PolicyArg::Learnt(PathBuf::from("/x/w.json")))
        );
    }

    #[test]
    fn every_error_names_its_flag_on_one_line() {
        for (line, flag) in [
            ("send --to nowhere --cc bbr --bytes 1", "--to"),
            ("send --to 127.0.0.1:0 --cc bbr --bytes 1", "--to"),
            ("send --to 127.0.0.1:9 --cc vegas --bytes 1", "--cc"),
            ("send --to 127.0.0.1:9 --bytes 1", "--cc"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 0", "--bytes"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 12X", "--bytes"),
            ("send --to 127.0.0.1:9 --cc bbr --seconds -1", "--seconds"),
            ("send --to 127.0.0.1:9 --cc bbr --seconds 1 --bytes 5", "--bytes and --seconds"),
            ("send --to 127.0.0.1:9 --cc bbr", "--bytes or --seconds"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --mss 10", "--mss"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --rate-mbps nan", "--rate-mbps"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --json-interval 0", "--json-interval"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --recovery bsd", "--recovery"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --recovery linux,foo=on", "--recovery"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --recovery linux,rack", "--recovery"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --tclass 256", "--tclass"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --flow-id x", "--flow-id"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --timeout 0", "--timeout"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --bogus 1", "--bogus"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes", "--bytes"),
            ("send --to 127.0.0.1:9 --cc bbr --cc cubic --bytes 1", "--cc"),
            ("recv --out /tmp/x.json", "--bind"),
            ("recv --bind [::]:1", "--out"),
            ("recv --bind [::]:1 --out /tmp", "--out"),
            ("recv --bind [::]:1 --out /tmp/x --linger-ms -3", "--linger-ms"),
            ("recv --bind [::]:1 --out /tmp/x --to 1.2.3.4:5", "--to"),
            ("send --to 127.0.0.1:9 --cc bbr --bytes 1 --startcp on", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp period=15", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp period_s=x", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp probe_interval_ms=20", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp min_events=1.5", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp base_cc=startcp", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp policy=fixed", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp policy=learnt", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp policy=magic", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp weights=/w.json", "--startcp"),
            ("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp lead_ms=-1", "--startcp"),
            ("recv --bind [::]:1 --out /tmp/x --startcp kde_bandwidth_ms=0", "--startcp"),
            ("serve", "serve"),
        ] {
            let e = p(line).expect_err(line);
            assert!(e.contains(flag) && !e.contains('\n'), "{line}: {e}");
        }
    }
}
