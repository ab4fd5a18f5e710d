//! The tunnel's TOML configuration and the pre-shared key file.
//!
//! ```toml
//! name = "lg0"                  # TUN device name (1-15 bytes)
//! address = "10.99.0.1/30"      # address/prefix given to the TUN device
//! mtu = 1400                    # TUN MTU
//! local = "192.0.2.1:7000"      # UDP address to bind
//! peer = "198.51.100.7:7000"    # UDP address of the other end
//! key_file = "/etc/leoguard/tunnel.key"   # 32 bytes raw, or 64 hex digits
//! stats_file = "/run/leoguard/lg0.json"   # optional: counters as JSON, rewritten every stats_interval_ms
//! stats_interval_ms = 1000
//!
//! [fec]
//! mode = "liquid"               # "liquid" (RaptorQ coding) or "off" (encrypted IP-in-UDP, no coding)
//! symbol_size = 1280            # the remaining keys map onto leoguard_proto::liquid::LiquidConfig
//! block_time_ms = 5.0
//! idle_time_ms = 1.0
//! repair_ratio = 0.10
//! adaptive = false
//! abandon_after_ms = 1000.0
//! in_order = true              # (the library default is false; TCP prefers order)
//! max_block_packets = 1024
//! adaptive_target = 0.001
//! feedback_delay_ms = 6.0        # default: block_time_ms + 1 (see below)
//! feedback_interval_ms = 20.0
//! feedback_retry_ms = 100.0
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use leoguard_core::Duration;
use leoguard_proto::liquid::{LiquidConfig, LiquidError};
use serde::Deserialize;

/// A configuration or key-file error; `field` names the offending key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A field has a bad value.
    #[error("invalid `{field}` = {value}: {reason}")]
    Invalid {
        /// The TOML key (dotted path).
        field: String,
        /// The value as written (never key material).
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// The file is not valid TOML for this schema (unknown key, wrong type, missing key).
    #[error("{path}: {msg}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's message (names the key and line).
        msg: String,
    },
}

fn invalid(field: &str, value: impl std::fmt::Display, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field: field.into(), value: value.to_string(), reason: reason.into() }
}

/// How packets cross the tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FecMode {
    /// Liquid data: RaptorQ source blocks with proactive and feedback-driven repair.
    Liquid,
    /// No coding: each IP packet is one sealed datagram (the fair baseline: same path, same crypto).
    Off,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFec {
    mode: Option<FecMode>,
    symbol_size: Option<u16>,
    block_time_ms: Option<f64>,
    idle_time_ms: Option<f64>,
    repair_ratio: Option<f64>,
    adaptive: Option<bool>,
    abandon_after_ms: Option<f64>,
    in_order: Option<bool>,
    max_block_packets: Option<u32>,
    adaptive_target: Option<f64>,
    feedback_delay_ms: Option<f64>,
    feedback_interval_ms: Option<f64>,
    feedback_retry_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    address: String,
    mtu: Option<u32>,
    local: String,
    peer: String,
    key_file: PathBuf,
    stats_file: Option<PathBuf>,
    stats_interval_ms: Option<u64>,
    fec: Option<RawFec>,
}

/// A validated tunnel configuration.
#[derive(Clone, Debug)]
pub struct TunnelConfig {
    /// TUN device name.
    pub name: String,
    /// TUN address and prefix length, as written ("10.99.0.1/30").
    pub address: String,
    /// TUN MTU.
    pub mtu: u32,
    /// Local UDP address.
    pub local: SocketAddr,
    /// Peer UDP address.
    pub peer: SocketAddr,
    /// Key file path.
    pub key_file: PathBuf,
    /// Where counters are written periodically.
    pub stats_file: Option<PathBuf>,
    /// Period of the stats file.
    pub stats_interval: std::time::Duration,
    /// Coding on or off.
    pub mode: FecMode,
    /// The liquid state machine's parameters (used when `mode` is Liquid).
    pub liquid: LiquidConfig,
}

fn ms(field: &str, v: f64) -> Result<Duration, ConfigError> {
    if !v.is_finite() || v < 0.0 {
        return Err(invalid(field, v, "must be a finite number of milliseconds >= 0"));
    }
    Ok(Duration::from_secs_f64(v / 1000.0))
}

impl TunnelConfig {
    /// Parse and validate TOML text (`path` is only used in messages).
    pub fn from_toml(text: &str, path: &str) -> Result<TunnelConfig, ConfigError> {
        let raw: Raw =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: path.into(), msg: e.to_string() })?;
        if raw.name.is_empty()
            || raw.name.len() > 15
            || !raw.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            return Err(invalid("name", &raw.name, "1-15 characters from [A-Za-z0-9-_.]"));
        }
        let (ip, prefix) =
            raw.address.split_once('/').ok_or_else(|| invalid("address", &raw.address, "expected ADDRESS/PREFIX"))?;
        let ip: std::net::IpAddr = ip.parse().map_err(|_| invalid("address", &raw.address, "not an IP address"))?;
        let max_prefix = if ip.is_ipv4() { 32 } else { 128 };
        match prefix.parse::<u8>() {
            Ok(p) if p <= max_prefix => {}
            _ => return Err(invalid("address", &raw.address, format!("prefix must be 0..={max_prefix}"))),
        }
        let mtu = raw.mtu.unwrap_or(1400);
        if !(576..=9000).contains(&mtu) {
            return Err(invalid("mtu", mtu, "must be in 576..=9000"));
        }
        let local: SocketAddr = raw.local.parse().map_err(|_| invalid("local", &raw.local, "expected IP:PORT"))?;
        let peer: SocketAddr = raw.peer.parse().map_err(|_| invalid("peer", &raw.peer, "expected IP:PORT"))?;
        if peer.port() == 0 || peer.ip().is_unspecified() {
            return Err(invalid("peer", peer, "needs a specific address and a non-zero port"));
        }
        if local.is_ipv4() != peer.is_ipv4() {
            return Err(invalid("peer", peer, "must be the same address family as `local`"));
        }
        let stats_interval_ms = raw.stats_interval_ms.unwrap_or(1000);
        if stats_interval_ms == 0 {
            return Err(invalid("stats_interval_ms", 0, "must be > 0"));
        }
        let fec = raw.fec.unwrap_or(RawFec {
            mode: None,
            symbol_size: None,
            block_time_ms: None,
            idle_time_ms: None,
            repair_ratio: None,
            adaptive: None,
            abandon_after_ms: None,
            in_order: None,
            max_block_packets: None,
            adaptive_target: None,
            feedback_delay_ms: None,
            feedback_interval_ms: None,
            feedback_retry_ms: None,
        });
        // TCP inside the tunnel suffers from reordering, so packets leave in order unless asked otherwise.
        let mut liquid = LiquidConfig { in_order: true, ..LiquidConfig::default() };
        if let Some(v) = fec.symbol_size {
            liquid.symbol_size = v;
        }
        if let Some(v) = fec.block_time_ms {
            liquid.block_time = ms("fec.block_time_ms", v)?;
        }
        if let Some(v) = fec.idle_time_ms {
            liquid.idle_time = ms("fec.idle_time_ms", v)?;
        }
        if let Some(v) = fec.repair_ratio {
            liquid.repair_ratio = v;
        }
        if let Some(v) = fec.adaptive {
            liquid.adaptive = v;
        }
        if let Some(v) = fec.abandon_after_ms {
            liquid.abandon_after = ms("fec.abandon_after_ms", v)?;
        }
        if let Some(v) = fec.in_order {
            liquid.in_order = v;
        }
        if let Some(v) = fec.max_block_packets {
            liquid.max_block_packets = v;
        }
        if let Some(v) = fec.adaptive_target {
            liquid.adaptive_target = v;
        }
        // The decoder reports a block short after `feedback_delay` without a symbol of it, even while
        // the encoder still holds it open (its size not yet sent); the encoder then counts the symbols
        // not yet sent as lost and answers with repair. A block closes at most `block_time` after it
        // opened, so waiting block_time + 1 ms avoids such false reports on a jitter-free path
        // (measured in docs/tunnel.md: zero-loss repair overhead 50 % -> 18 %).
        liquid.feedback_delay = match fec.feedback_delay_ms {
            Some(v) => ms("fec.feedback_delay_ms", v)?,
            None => liquid.block_time + Duration::from_millis(1),
        };
        if let Some(v) = fec.feedback_interval_ms {
            liquid.feedback_interval = ms("fec.feedback_interval_ms", v)?;
        }
        if let Some(v) = fec.feedback_retry_ms {
            liquid.feedback_retry = ms("fec.feedback_retry_ms", v)?;
        }
        let mode = fec.mode.unwrap_or(FecMode::Liquid);
        if mode == FecMode::Liquid {
            liquid.validate().map_err(|e| match e {
                // Durations are written in milliseconds in the file.
                LiquidError::Invalid { field, value, reason } => {
                    let is_time = [
                        "block_time",
                        "idle_time",
                        "abandon_after",
                        "feedback_delay",
                        "feedback_interval",
                        "feedback_retry",
                    ]
                    .contains(&field);
                    let key = if is_time { format!("fec.{field}_ms") } else { format!("fec.{field}") };
                    invalid(&key, value, reason)
                }
                other => invalid("fec", "", other.to_string()),
            })?;
        }
        Ok(TunnelConfig {
            name: raw.name,
            address: raw.address,
            mtu,
            local,
            peer,
            key_file: raw.key_file,
            stats_file: raw.stats_file,
            stats_interval: std::time::Duration::from_millis(stats_interval_ms),
            mode,
            liquid,
        })
    }

    /// Read and validate a configuration file.
    pub fn load(path: &Path) -> Result<TunnelConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Parse { path: path.display().to_string(), msg: e.to_string() })?;
        Self::from_toml(&text, &path.display().to_string())
    }
}

/// A key file that can be read by anyone other than its owner (a warning, not a refusal, when only
/// group-readable; world-readable files are refused).
#[derive(Debug, PartialEq, Eq)]
pub enum KeyPerm {
    /// Mode 0600 or stricter.
    Private,
    /// Group may read it.
    GroupReadable,
}

/// Load the 32-byte key: exactly 32 raw bytes, or 64 hex digits (surrounding whitespace allowed).
/// Errors never contain key material.
pub fn load_key(path: &Path) -> Result<([u8; 32], KeyPerm), ConfigError> {
    use std::os::unix::fs::PermissionsExt;
    let field = "key_file";
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| invalid(field, &shown, e.to_string()))?;
    let mode = meta.permissions().mode();
    if mode & 0o004 != 0 {
        return Err(invalid(field, &shown, format!("is world-readable (mode {:o}); chmod 600 it", mode & 0o777)));
    }
    let perm = if mode & 0o040 != 0 { KeyPerm::GroupReadable } else { KeyPerm::Private };
    let bytes = std::fs::read(path).map_err(|e| invalid(field, &shown, e.to_string()))?;
    Ok((parse_key(&bytes).map_err(|r| invalid(field, &shown, r))?, perm))
}

/// Decode key bytes (raw 32, or 64 hex digits with optional surrounding whitespace).
pub fn parse_key(bytes: &[u8]) -> Result<[u8; 32], &'static str> {
    if bytes.len() == 32 {
        let mut k = [0u8; 32];
        k.copy_from_slice(bytes);
        return Ok(k);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "must hold 32 raw bytes or 64 hex digits")?.trim();
    if text.len() != 64 {
        return Err("must hold 32 raw bytes or 64 hex digits");
    }
    let mut k = [0u8; 32];
    for (i, k) in k.iter_mut().enumerate() {
        *k = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| "contains a non-hex character")?;
    }
    if k == [0u8; 32] {
        return Err("is all zeros");
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "lg0"
address = "10.99.0.1/30"
local = "10.0.0.1:7000"
peer = "10.0.0.2:7000"
key_file = "/tmp/k"
[fec]
mode = "off"
"#;

    fn err_of(text: &str) -> String {
        TunnelConfig::from_toml(text, "t.toml").expect_err("should fail").to_string()
    }

    #[test]
    fn good_config_and_defaults() {
        let c = TunnelConfig::from_toml(GOOD, "t.toml").expect("valid");
        assert_eq!(c.mtu, 1400);
        assert_eq!(c.mode, FecMode::Off);
        assert_eq!(c.stats_interval, std::time::Duration::from_secs(1));
        assert_eq!(c.liquid.feedback_delay, Duration::from_millis(6));
        assert!(c.liquid.in_order);
        let c = TunnelConfig::from_toml(&GOOD.replace("mode = \"off\"", "block_time_ms = 10.0"), "t").expect("valid");
        assert_eq!(c.liquid.feedback_delay, Duration::from_millis(11));
    }

    #[test]
    fn bad_fields_are_named() {
        assert!(err_of(&GOOD.replace("lg0", "a-name-that-is-too-long")).contains("`name`"));
        assert!(err_of(&GOOD.replace("10.99.0.1/30", "10.99.0.1/33")).contains("`address`"));
        assert!(err_of(&GOOD.replace("10.99.0.1/30", "10.99.0.1")).contains("`address`"));
        assert!(err_of(&GOOD.replace("10.0.0.2:7000", "10.0.0.2")).contains("`peer`"));
        assert!(err_of(&GOOD.replace("10.0.0.1:7000", "nowhere")).contains("`local`"));
        assert!(err_of(&format!("mtu = 100\n{GOOD}")).contains("`mtu`"));
        assert!(err_of(&GOOD.replace("mode = \"off\"", "mode = \"liquid\"\nblock_time_ms = -1.0"))
            .contains("fec.block_time_ms"));
        // Unknown keys and wrong types: the parser names the key.
        assert!(err_of(&GOOD.replace("mode = \"off\"", "mode = \"off\"\nrepair = 1")).contains("repair"));
        assert!(err_of(&GOOD.replace("mode = \"off\"", "mode = \"maybe\"")).contains("mode"));
    }

    #[test]
    fn key_parsing() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
        let k = parse_key(hex.as_bytes()).expect("hex key");
        assert_eq!(k[1], 0x11);
        assert_eq!(k[31], 0xff);
        assert_eq!(parse_key(&[9u8; 32]), Ok([9u8; 32]));
        assert!(parse_key(b"abc").is_err());
        assert!(parse_key(&hex.replace('a', "g").into_bytes()).is_err());
        assert!(parse_key(&[b'0'; 64]).is_err());
    }

    #[test]
    fn key_file_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("lgkey-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("k");
        std::fs::write(&p, [5u8; 32]).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let e = load_key(&p).expect_err("world-readable");
        assert!(e.to_string().contains("world-readable"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        assert_eq!(load_key(&p).expect("ok").1, KeyPerm::GroupReadable);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let (k, perm) = load_key(&p).expect("ok");
        assert_eq!((k, perm), ([5u8; 32], KeyPerm::Private));
        std::fs::remove_dir_all(&dir).ok();
    }
}
