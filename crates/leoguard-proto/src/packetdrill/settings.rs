//! The system settings a script may change with shell commands in backticks (`sysctl`, `echo N >
//! /proc/sys/...`, the cubic module's `hystart` parameter, packetdrill's `defaults.sh`), mapped onto
//! the model's switches. An unknown setting, or a value the model cannot take, is unsupported.

use crate::tcp::Recovery;

/// The settings in force (packetdrill's Linux defaults until a command changes them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// The model's loss-recovery switches.
    pub rec: Recovery,
    /// Congestion control (the model's registry name).
    pub cc: String,
    /// `tcp_sack`.
    pub sack: bool,
    /// `tcp_timestamps`.
    pub timestamps: bool,
    /// `tcp_window_scaling`.
    pub wscale: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { rec: Recovery::linux(), cc: "cubic".into(), sack: true, timestamps: true, wscale: true }
    }
}

/// Linux congestion-control names and the model's.
pub fn cc_name(linux: &str) -> Option<&'static str> {
    match linux {
        "cubic" => Some("cubic"),
        "reno" => Some("newreno"),
        "bbr" => Some("bbr"),
        "hybla" => Some("hybla"),
        _ => None,
    }
}

impl Settings {
    /// Runs one backtick command (several may be joined by `;`, `&&` or new lines); `Err` names
    /// what is unsupported.
    pub fn command(&mut self, cmd: &str) -> Result<(), String> {
        for part in cmd.split(['\n', ';']).flat_map(|p| p.split("&&")) {
            let words: Vec<&str> = part.split_whitespace().collect();
            match words.as_slice() {
                [] => {}
                [path, ..] if path.ends_with("defaults.sh") => *self = Settings::default(),
                ["sysctl", rest @ ..] => {
                    let assigns: Vec<&&str> = rest.iter().filter(|w| !w.starts_with('-')).collect();
                    if assigns.is_empty() {
                        return Err(format!("command `{}`", part.trim()));
                    }
                    for a in assigns {
                        let (k, v) = a.split_once('=').ok_or_else(|| format!("command `{}`", part.trim()))?;
                        self.sysctl(k.trim(), v.trim().trim_matches('"'))?;
                    }
                }
                ["echo", v, ">", path] => {
                    if let Some(k) = path.strip_prefix("/proc/sys/") {
                        self.sysctl(&k.replace('/', "."), v.trim_matches('"'))?;
                    } else if *path == "/sys/module/tcp_cubic/parameters/hystart" {
                        self.rec.hystart = parse_bool(v).ok_or_else(|| format!("hystart={v}"))?;
                    } else {
                        return Err(format!("command `{}`", part.trim()));
                    }
                }
                _ => return Err(format!("command `{}`", part.trim())),
            }
        }
        Ok(())
    }

    /// One sysctl.
    fn sysctl(&mut self, key: &str, v: &str) -> Result<(), String> {
        let bad = || format!("sysctl {key}={v}");
        let n: Option<i64> = v.parse().ok();
        match key {
            "net.ipv4.tcp_sack" => match n {
                Some(1) => self.sack = true,
                // The model is SACK-based; Reno's duplicate-ACK counting is not modelled.
                _ => return Err(bad()),
            },
            "net.ipv4.tcp_timestamps" => self.timestamps = parse_bool(v).ok_or_else(bad)?,
            "net.ipv4.tcp_window_scaling" => self.wscale = parse_bool(v).ok_or_else(bad)?,
            // Bit 0x1: RACK loss detection; the other bits (static window, no reordering
            // heuristics) are not modelled.
            "net.ipv4.tcp_recovery" => match n {
                Some(0) => self.rec.rack = false,
                Some(1) => self.rec.rack = true,
                _ => return Err(bad()),
            },
            // Since Linux 4.18: 3 and 4 enable TLP, 0-2 disable it.
            "net.ipv4.tcp_early_retrans" => match n {
                Some(0..=2) => self.rec.tlp = false,
                Some(3 | 4) => self.rec.tlp = true,
                _ => return Err(bad()),
            },
            // Linux's switch makes its receiver send DSACKs; the model's `dsack` also gates how its
            // sender reads them (which RACK and undo use regardless).
            "net.ipv4.tcp_dsack" => self.rec.dsack = parse_bool(v).ok_or_else(bad)?,
            "net.ipv4.tcp_frto" => match n {
                Some(0) => self.rec.frto = false,
                Some(1 | 2) => self.rec.frto = true,
                _ => return Err(bad()),
            },
            "net.ipv4.tcp_congestion_control" => self.cc = cc_name(v).ok_or_else(bad)?.to_string(),
            // Values equal to what the model does are accepted; others are unsupported.
            "net.ipv4.tcp_reordering" if n == Some(3) => {}
            "net.ipv4.tcp_max_reordering" if n == Some(300) => {}
            "net.ipv4.tcp_min_rtt_wlen" if n == Some(300) => {}
            "net.ipv4.tcp_ecn" | "net.ipv4.tcp_mtu_probing" | "net.ipv4.tcp_fastopen" if n == Some(0) => {}
            "net.ipv4.tcp_no_metrics_save" | "net.ipv4.tcp_moderate_rcvbuf" | "net.ipv4.tcp_abort_on_overflow"
                if n.is_some() => {}
            // The model never restarts the window after idle (Linux `tcp_cwnd_restart`).
            "net.ipv4.tcp_slow_start_after_idle" if n == Some(0) => {}
            _ => return Err(bad()),
        }
        Ok(())
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "0" | "N" => Some(false),
        "1" | "Y" => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctls_map_onto_switches() {
        let mut s = Settings::default();
        s.command("sysctl -q net.ipv4.tcp_recovery=0 net.ipv4.tcp_early_retrans=0; sysctl -q net.ipv4.tcp_frto=0")
            .unwrap();
        assert!(!s.rec.rack && !s.rec.tlp && !s.rec.frto);
        s.command("echo 0 > /sys/module/tcp_cubic/parameters/hystart").unwrap();
        assert!(!s.rec.hystart);
        s.command("../common/defaults.sh").unwrap();
        assert_eq!(s, Settings::default());
        assert!(s.command("sysctl -q net.ipv4.tcp_foo=1").is_err());
        assert!(s.command("tc qdisc add dev tun0 root fq").is_err());
        s.command("echo 1 > /proc/sys/net/ipv4/tcp_recovery").unwrap();
    }
}
