//! The command line of `leoguard-transport` (clap's derive; `--help` for the text): every bad argument
//! is a one-line error that names the flag ([`parse`] renders clap's errors so).
//!
//! Beyond the `--flag value` form, clap's conventions are accepted: `--flag=value`, and `--` (after
//! which every argument is an unexpected positional one). A flag's value is the next argument whatever
//! it looks like (`--linger-ms -3` is a bad `--linger-ms`, not an unknown flag `-3`).

use std::error::Error as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{value_parser, ArgGroup, Args, Parser};
use leoguard_core::{Bps, Duration};
use leoguard_proto::startcp::StartcpConfig;
use leoguard_proto::tcp::{Recovery, TcpConfig};

use crate::leotp::{FetchArgs, ServeArgs};
use crate::sender::Amount;

/// Bytes of the IP and UDP headers and the transport's data header on a datagram of `addr`'s family.
pub fn header_bytes(addr: &SocketAddr) -> u32 {
    let ip = if addr.is_ipv6() { 40 } else { 20 };
    ip + 8 + leoguard_wire::transport::DATA_HEADER_LEN as u32
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
        _ => Err(format!("{k} expects milliseconds in [0, 1e7), got {v:?}")),
    }
}

/// Parses `--startcp`: `on`, or `NAME=VALUE` pairs separated by commas, named as the scenario's
/// `[startcp]` fields.
pub fn startcp(spec: &str) -> Result<StartcpArgs, String> {
    let mut config = StartcpConfig::default();
    let (mut policy, mut lead, mut leads, mut weights) = (None, None, None, None);
    for part in spec.split(',').filter(|p| !p.is_empty() && *p != "on") {
        let (k, v) = part.split_once('=').ok_or_else(|| format!("expected NAME=VALUE, got {part:?}"))?;
        match k {
            "base_cc" => config.set_base_cc(v).map_err(|e| e.to_string())?,
            "policy" => policy = Some(v.to_string()),
            "lead_ms" => lead = Some(lead_ms(k, v)?),
            "leads_ms" => leads = Some(v.split(':').map(|x| lead_ms(k, x)).collect::<Result<Vec<_>, _>>()?),
            "weights" => weights = Some(PathBuf::from(v)),
            _ => {
                let Some(&(_, field, unit)) = STARTCP_FIELDS.iter().find(|f| f.0 == k) else {
                    let known: Vec<&str> = STARTCP_FIELDS.iter().map(|f| f.0).collect();
                    return Err(format!(
                        "unknown field {k:?} (known: base_cc, {}, policy, lead_ms, leads_ms, weights)",
                        known.join(", ")
                    ));
                };
                let x = v.parse::<f64>().map_err(|_| format!("{k} expects a number, got {v:?}"))?;
                config.set(field, x * unit).map_err(|e| format!("{k} = {v}: {e}"))?;
            }
        }
    }
    config.validate().map_err(|e| e.to_string())?;
    let need = |what: &str| format!("policy={} needs {what}", policy.as_deref().unwrap_or_default());
    let policy = match policy.as_deref() {
        None | Some("heuristic") => PolicyArg::Heuristic,
        Some("fixed") => PolicyArg::Fixed(lead.ok_or_else(|| need("lead_ms"))?),
        Some("scripted") => PolicyArg::Scripted(leads.take().ok_or_else(|| need("leads_ms"))?),
        Some("learnt") => PolicyArg::Learnt(weights.take().ok_or_else(|| need("weights (a JSON file)"))?),
        Some(other) => return Err(format!("policy={other:?}: expected heuristic, fixed, scripted or learnt")),
    };
    if weights.is_some() {
        return Err("weights is only read with policy=learnt".into());
    }
    if leads.is_some() {
        return Err("leads_ms is only read with policy=scripted".into());
    }
    Ok(StartcpArgs { config, policy })
}

/// Parses a recovery spec: `linux` or `legacy`, then `,name=on|off` switches.
pub fn recovery(spec: &str) -> Result<Recovery, String> {
    let mut parts = spec.split(',');
    let mut r = match parts.next().unwrap_or_default() {
        "linux" => Recovery::linux(),
        "legacy" => Recovery::legacy(),
        other => return Err(format!("expected linux or legacy first, got {other:?}")),
    };
    for p in parts {
        let (name, on) = match p.split_once('=') {
            Some((n, "on" | "1" | "true")) => (n, true),
            Some((n, "off" | "0" | "false")) => (n, false),
            _ => return Err(format!("expected NAME=on|off, got {p:?}")),
        };
        if !r.set(name, on) {
            return Err(format!("unknown switch {name:?} (known: {})", Recovery::NAMES.join(", ")));
        }
    }
    Ok(r)
}

// Value parsers: their errors say what was wrong; `one_line` puts the flag in front.

/// `ADDR:PORT`.
pub(crate) fn addr(v: &str) -> Result<SocketAddr, String> {
    v.parse().map_err(|_| format!("expected ADDR:PORT ([v6]:port for IPv6), got {v:?}"))
}

/// The `ADDR:PORT` of a peer: neither port 0 nor the unspecified address.
pub(crate) fn peer(v: &str) -> Result<SocketAddr, String> {
    let a = addr(v)?;
    if a.port() == 0 || a.ip().is_unspecified() {
        return Err(format!("{a} is not a destination"));
    }
    Ok(a)
}

/// Seconds in (0, 1e6], fractions allowed.
pub(crate) fn seconds(v: &str) -> Result<Duration, String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s <= 1e6 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("expected seconds in (0, 1e6], got {v:?}")),
    }
}

/// A positive byte count, suffixes K, M and G for powers of 1024.
pub(crate) fn byte_count(v: &str) -> Result<u64, String> {
    let (num, mult) = match v.char_indices().last() {
        Some((i, 'K' | 'k')) => (&v[..i], 1u64 << 10),
        Some((i, 'M' | 'm')) => (&v[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&v[..i], 1 << 30),
        _ => (v, 1),
    };
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult)) {
        Some(n) if n > 0 && n < 1 << 62 => Ok(n),
        _ => Err(format!("expected a positive byte count (suffix K, M or G allowed), got {v:?}")),
    }
}

/// A file to write (not empty, not a directory).
pub(crate) fn out_file(v: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(v);
    if p.as_os_str().is_empty() || p.is_dir() {
        return Err(format!("{v:?} is not a file name"));
    }
    Ok(p)
}

fn cc_name(v: &str) -> Result<String, String> {
    leoguard_proto::cc::build(v, 1448, 10).map_err(|e| e.to_string())?;
    Ok(v.to_string())
}

fn rate_mbps(v: &str) -> Result<Bps, String> {
    match v.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= 1e6 => Ok(Bps((r * 1e6).round() as u64)),
        _ => Err(format!("expected a rate in (0, 1e6] Mbit/s, got {v:?}")),
    }
}

/// Whole milliseconds in `LO..=HI`.
fn millis<const LO: u64, const HI: u64>() -> impl TypedValueParser<Value = Duration> {
    value_parser!(u64).range(LO..=HI).map(Duration::from_millis)
}

/// `send`: a sender to `--to` (`--help` for the flags).
#[derive(Args, Clone, Debug, PartialEq)]
#[command(group(ArgGroup::new("amount").required(true).args(["bytes", "seconds"])))]
pub struct SendArgs {
    /// The receiver, ADDR:PORT ([v6]:port for IPv6).
    #[arg(long, value_name = "ADDR:PORT", value_parser = peer)]
    pub to: SocketAddr,
    /// A congestion controller of leoguard-proto's registry (newreno, reno, cubic, bbr, satcp, startcp).
    #[arg(long, value_name = "NAME", value_parser = cc_name)]
    pub cc: String,
    /// A transfer of N bytes (suffixes K, M, G: powers of 1024).
    #[arg(long, value_name = "N", value_parser = byte_count)]
    pub bytes: Option<u64>,
    /// Write for S seconds, then finish what was written.
    #[arg(long, value_name = "S", value_parser = seconds)]
    pub seconds: Option<Duration>,
    /// Per-interval telemetry on stdout every MS milliseconds.
    #[arg(long, value_name = "MS", value_parser = millis::<1, 3_600_000>())]
    pub json_interval: Option<Duration>,
    /// Application rate in Mbit/s (default: as fast as the controller allows).
    #[arg(long = "rate-mbps", value_name = "R", value_parser = rate_mbps)]
    pub rate: Option<Bps>,
    /// Payload bytes per datagram (default: a 1500-byte path: 1426 over IPv6, 1446 over IPv4).
    #[arg(long, value_name = "BYTES", value_parser = value_parser!(u32).range(64..=65_000))]
    pub mss: Option<u32>,
    /// Loss recovery: linux or legacy, then switches: linux,rack=off,tlp=on (rack tlp dsack undo frto
    /// prr cwnd_limited quickack hystart).
    #[arg(long, value_name = "SPEC", value_parser = recovery, default_value = "linux")]
    pub recovery: Recovery,
    /// Give up after S seconds (default: S + 10 with --seconds, none with --bytes).
    #[arg(long, value_name = "S", value_parser = seconds)]
    pub timeout: Option<Duration>,
    /// Connection id (default: random).
    #[arg(long, value_name = "N")]
    pub flow_id: Option<u32>,
    /// IP traffic class / TOS byte of the datagrams.
    #[arg(long, value_name = "TC")]
    pub tclass: Option<u8>,
    /// StarTCP's [startcp] fields as NAME=VALUE,... (`on` for the defaults), with --cc startcp: the
    /// scenario's names (a wrong one's error lists them), and policy (heuristic, fixed, scripted,
    /// learnt) with lead_ms, leads_ms (MS:MS:...) or weights (a JSON file).
    #[arg(long, value_name = "SPEC", value_parser = startcp)]
    pub startcp: Option<StartcpArgs>,
}

/// `recv`: a receiver on `--bind` that writes a JSON report to `--out`.
#[derive(Args, Clone, Debug, PartialEq)]
pub struct RecvArgs {
    /// Address to bind, ADDR:PORT ([v6]:port for IPv6).
    #[arg(long, value_name = "ADDR:PORT", value_parser = addr)]
    pub bind: SocketAddr,
    /// Where the JSON report goes.
    #[arg(long, value_name = "FILE.json", value_parser = out_file)]
    pub out: PathBuf,
    /// Interval of the report's delivery series, in milliseconds.
    #[arg(long, value_name = "MS", value_parser = millis::<1, 3_600_000>())]
    pub json_interval: Option<Duration>,
    /// Loss recovery, the receiver's switches (dsack, quickack): as send's --recovery.
    #[arg(long, value_name = "SPEC", value_parser = recovery, default_value = "linux")]
    pub recovery: Recovery,
    /// Give up after S seconds (default: none).
    #[arg(long, value_name = "S", value_parser = seconds)]
    pub timeout: Option<Duration>,
    /// How long to stay after the transfer completed, answering repeated FINs, in milliseconds.
    #[arg(long = "linger-ms", value_name = "MS", value_parser = millis::<0, 600_000>(), default_value = "1000")]
    pub linger: Duration,
    /// Run StarTCP's Handover Manager with these [startcp] fields (as send's --startcp).
    #[arg(long, value_name = "SPEC", value_parser = startcp)]
    pub startcp: Option<StartcpArgs>,
}

impl SendArgs {
    /// How much to send: `--bytes` or `--seconds` (clap requires exactly one).
    pub fn amount(&self) -> Amount {
        // Never zero: clap requires --seconds without --bytes.
        self.bytes.map_or(Amount::For(self.seconds.unwrap_or_default()), Amount::Bytes)
    }

    /// Payload bytes per segment: `--mss`, or what fills a 1500-byte path.
    pub fn effective_mss(&self) -> u32 {
        self.mss.unwrap_or(1500 - header_bytes(&self.to))
    }

    /// The TCP parameters these arguments give.
    pub fn tcp_config(&self) -> TcpConfig {
        TcpConfig {
            mss: self.effective_mss(),
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

/// leoguard-transport's commands: leoguard's own TCP (leoguard-proto's sans-IO sender and receiver)
/// and LEOTP over UDP, between two hosts (docs/transport.md, docs/leotp.md).
#[derive(Parser, Clone, Debug, PartialEq)]
#[command(name = "leoguard-transport", arg_required_else_help = false)]
// A flag's value is the next argument, whatever it looks like.
#[command(mut_subcommands = |c: clap::Command| c.mut_args(|a| a.allow_hyphen_values(true)))]
pub enum Command {
    /// A sender of leoguard's TCP.
    Send(SendArgs),
    /// A receiver of leoguard's TCP.
    Recv(RecvArgs),
    /// A LEOTP producer of N pattern bytes to every consumer.
    LeotpServe(ServeArgs),
    /// A LEOTP consumer: fetches [0, N) (or as much as S seconds allow), checks every byte, prints a
    /// JSON summary (docs/leotp.md, "On real packets").
    LeotpFetch(FetchArgs),
    /// `--help`, `-h` or `help` (of the program or of a command): the text to print.
    #[command(skip)]
    Help(String),
}

/// A clap error as one line that names the flag: "--flag: why" for a bad value, clap's first line for
/// the rest (its others are the usage and a tip).
fn one_line(e: &clap::Error) -> String {
    let ctx = |k| match e.get(k) {
        Some(ContextValue::String(s)) => vec![s.clone()],
        Some(ContextValue::Strings(v)) => v.clone(),
        _ => vec![],
    };
    // "--cc <NAME>" is --cc; the group "<--bytes <N>|--seconds <S>>" is "--bytes or --seconds".
    let flag = |s: &String| {
        let alts = s.trim_start_matches('<').split('|').map(|a| a.split(' ').next().unwrap_or_default());
        alts.collect::<Vec<_>>().join(" or ")
    };
    let args: Vec<String> = ctx(ContextKind::InvalidArg).iter().map(flag).collect();
    match (e.kind(), e.source()) {
        (ErrorKind::ValueValidation, Some(why)) => {
            let (why, value) = (why.to_string(), ctx(ContextKind::InvalidValue).concat());
            let got = if why.contains(&value) { String::new() } else { format!(", got {value:?}") };
            format!("{}: {why}{got}", args.concat())
        }
        (ErrorKind::MissingRequiredArgument, _) => {
            format!("{} {} required", args.join(", "), if args.len() > 1 { "are" } else { "is" })
        }
        (ErrorKind::MissingSubcommand, _) => "a command is required (send, recv, leotp-serve or leotp-fetch)".into(),
        _ => e.render().to_string().lines().next().unwrap_or_default().replacen("error: ", "", 1),
    }
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let argv = std::iter::once("leoguard-transport").chain(args.iter().map(String::as_str));
    let cmd = match Command::try_parse_from(argv) {
        Ok(cmd) => cmd,
        Err(e) if e.kind() == ErrorKind::DisplayHelp => return Ok(Command::Help(e.render().to_string())),
        Err(e) => return Err(one_line(&e)),
    };
    // The checks that involve two flags.
    match &cmd {
        Command::Send(a) if a.startcp.is_some() && a.cc != "startcp" => {
            Err(format!("--startcp: the sender runs StarTCP only with --cc startcp (got --cc {})", a.cc))
        }
        Command::LeotpFetch(a) if a.bind.is_some_and(|b| b.is_ipv6() != a.from.is_ipv6()) => {
            Err("--bind: must be of --from's address family".into())
        }
        _ => Ok(cmd),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> Result<Command, String> {
        parse(&line.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    fn send(line: &str) -> SendArgs {
        match p(&format!("send {line}")) {
            Ok(Command::Send(s)) => s,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn recv(line: &str) -> RecvArgs {
        match p(&format!("recv {line}")) {
            Ok(Command::Recv(r)) => r,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn command_lines_parse_with_their_defaults() {
        let s = send("--to [::1]:5000 --cc bbr --bytes 10M --json-interval 100 --recovery linux,tlp=off");
        assert_eq!((s.amount(), s.tcp_config().mss, s.tcp_config().header_bytes), (Amount::Bytes(10 << 20), 1426, 74));
        assert!(!s.recovery.tlp && s.recovery.rack);
        assert_eq!((s.json_interval, s.rate, s.timeout), (Some(Duration::from_millis(100)), None, None));
        assert_eq!((s.flow_id, s.tclass, s.startcp), (None, None, None));
        let s = send("--to=127.0.0.1:9 --cc cubic --seconds 2.5 --rate-mbps 20 --mss 1000");
        assert_eq!((s.amount(), s.recovery), (Amount::For(Duration::from_millis(2500)), Recovery::linux()));
        assert_eq!((s.tcp_config().mss, s.rate), (1000, Some(Bps(20_000_000))));
        assert_eq!(send("--to 127.0.0.1:9 --cc reno --bytes 1").effective_mss(), 1446);
        let r = recv("--bind [::]:5000 --out /tmp/x.json");
        assert_eq!((r.linger, r.recovery, r.timeout), (Duration::from_millis(1000), Recovery::linux(), None));
        assert_eq!((r.json_interval, r.startcp), (None, None));
        assert_eq!(recv("--bind [::]:5000 --out /tmp/x.json --linger-ms 0").linger, Duration::ZERO);
        for line in ["--help", "-h", "help", "send --help", "recv -h", "help leotp-fetch"] {
            assert!(matches!(p(line), Ok(Command::Help(t)) if t.contains("Usage:")), "{line}");
        }
    }

    #[test]
    fn startcp_fields_are_the_scenario_sections() {
        let s = send(
            "--to [::1]:5000 --cc startcp --seconds 5 --startcp \
             period_s=10,kde_bandwidth_ms=20,min_events=1,probe_interval_ms=2,base_cc=cubic,policy=fixed,lead_ms=150",
        );
        let st = s.startcp.expect("--startcp");
        assert_eq!(st.config.period, Duration::from_secs(10));
        assert_eq!(st.config.kde_bandwidth, Duration::from_millis(20));
        assert_eq!(st.config.probe_interval, Duration::from_millis(2));
        assert_eq!((st.config.min_events, st.config.base_cc), (1, "cubic"));
        assert_eq!(st.policy, PolicyArg::Fixed(Duration::from_millis(150)));
        let r = recv("--bind [::]:5000 --out /tmp/x.json --startcp on");
        assert_eq!(r.startcp, Some(StartcpArgs { config: StartcpConfig::default(), policy: PolicyArg::Heuristic }));
        assert_eq!(
            startcp("policy=scripted,leads_ms=100:0:250.5").map(|s| s.policy),
            Ok(PolicyArg::Scripted(vec![Duration::from_millis(100), Duration::ZERO, Duration::from_micros(250_500)]))
        );
        assert_eq!(
            startcp("policy=learnt,weights=/x/w.json").map(|s| s.policy),
            Ok(PolicyArg::Learnt(PathBuf::from("/x/w.json")))
        );
        for spec in
            ["period=15", "period_s=x", "probe_interval_ms=20", "min_events=1.5", "base_cc=startcp", "policy=fixed"]
                .into_iter()
                .chain(["policy=learnt", "policy=magic", "weights=/w.json", "lead_ms=-1", "kde_bandwidth_ms=0"])
        {
            let e = p(&format!("send --to 127.0.0.1:9 --cc startcp --bytes 1 --startcp {spec}")).expect_err(spec);
            assert!(e.starts_with("--startcp: ") && !e.contains('\n'), "{spec}: {e}");
        }
    }

    #[test]
    fn every_error_is_one_line_naming_its_flag() {
        for (line, want) in [
            ("send --to nowhere --cc bbr --bytes 1", "--to: expected ADDR:PORT"),
            ("send --to 127.0.0.1:0 --cc bbr --bytes 1", "--to: 127.0.0.1:0 is not a destination"),
            ("send --to 127.0.0.1:9 --cc vegas --bytes 1", "--cc: "),
            ("S --bytes 0", "--bytes: expected a positive byte count"),
            ("S --bytes 12X", "--bytes: "),
            ("S --seconds -1", "--seconds: expected seconds in (0, 1e6]"),
            ("S --bytes 1 --mss 10", "--mss: 10 is not in 64..=65000"),
            ("S --bytes 1 --mss x", "--mss: invalid digit found in string, got \"x\""),
            ("S --bytes 1 --rate-mbps nan", "--rate-mbps: "),
            ("S --bytes 1 --json-interval 0", "--json-interval: 0 is not in 1..=3600000"),
            ("S --bytes 1 --recovery bsd", "--recovery: "),
            ("S --bytes 1 --recovery linux,foo=on", "--recovery: unknown switch"),
            ("S --bytes 1 --recovery linux,rack", "--recovery: expected NAME=on|off"),
            ("S --bytes 1 --tclass 256", "--tclass: 256 is not in 0..=255"),
            ("S --bytes 1 --flow-id x", "--flow-id: "),
            ("S --bytes 1 --timeout 0", "--timeout: "),
            ("S --bytes 1 --startcp on", "--startcp: the sender runs StarTCP only"),
            ("recv --bind [::]:1 --out /tmp", "--out: \"/tmp\" is not a file name"),
            (
                "recv --bind [::]:1 --out /tmp/x --linger-ms -3",
                "--linger-ms: invalid digit found in string, got \"-3\"",
            ),
            ("send --to 127.0.0.1:9 --bytes 1", "--cc is required"),
            ("send --bytes 1", "--to, --cc are required"),
            ("S", "--bytes or --seconds is required"),
            ("recv --out /tmp/x.json", "--bind is required"),
            ("recv --bind [::]:1", "--out is required"),
            ("S --seconds 1 --bytes 5", "the argument '--seconds <S>' cannot be used with '--bytes <N>'"),
            ("S --bytes 1 --bogus 1", "unexpected argument '--bogus' found"),
            ("recv --bind [::]:1 --out /tmp/x --to 1.2.3.4:5", "unexpected argument '--to' found"),
            ("S --bytes 1 extra", "unexpected argument 'extra' found"),
            ("S --bytes 1 -- x", "unexpected argument 'x' found"),
            ("S --bytes", "a value is required for '--bytes <N>'"),
            ("S --cc cubic --bytes 1", "the argument '--cc <NAME>' cannot be used multiple times"),
            // As before clap, a flag's value is the next argument: "--seconds" is --bytes's.
            ("S --bytes --seconds 1", "unexpected argument '1' found"),
            ("serve", "unrecognized subcommand 'serve'"),
            ("", "a command is required (send, recv, leotp-serve or leotp-fetch)"),
        ] {
            let e = p(&line.replacen('S', "send --to 127.0.0.1:9 --cc bbr", 1)).expect_err(line);
            assert!(e.starts_with(want) && !e.contains('\n'), "{line}: {e}");
        }
    }
}
