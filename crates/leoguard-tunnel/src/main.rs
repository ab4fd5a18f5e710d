//! `leoguard-tunnel`: one end of the liquid-data tunnel (docs/tunnel.md).
//!
//! ```text
//! leoguard-tunnel CONFIG [--stats-file PATH]   run until SIGTERM/SIGINT (counters on SIGUSR1 and exit)
//! leoguard-tunnel --check CONFIG               validate the configuration and key file, then exit
//! leoguard-tunnel genkey                       print a fresh 256-bit key as 64 hex digits
//! ```
//! Exit codes: 0 clean exit, 1 runtime failure (TUN, socket), 2 bad command line, configuration or key.

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::atomic::Ordering;

use leoguard_core::Instant;
use leoguard_tunnel::config::{load_key, KeyPerm, TunnelConfig};
use leoguard_tunnel::engine::TunnelEnd;
use leoguard_tunnel::sys::{self, Tun};

const USAGE: &str = "usage: leoguard-tunnel CONFIG [--stats-file PATH] | --check CONFIG | genkey";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("genkey") if args.len() == 1 => {
            let mut k = [0u8; 32];
            if let Err(e) = leoguard_tunnel::random_bytes(&mut k) {
                eprintln!("leoguard-tunnel: cannot read /dev/urandom: {e}");
                return ExitCode::from(1);
            }
            println!("{}", k.iter().map(|b| format!("{b:02x}")).collect::<String>());
            ExitCode::SUCCESS
        }
        Some("--check") if args.len() == 2 => match load(&PathBuf::from(&args[1])) {
            Ok(_) => {
                println!("ok");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("leoguard-tunnel: {e}");
                ExitCode::from(2)
            }
        },
        Some(cfg) if !cfg.starts_with('-') && (args.len() == 1 || (args.len() == 3 && args[1] == "--stats-file")) => {
            let (mut c, key) = match load(&PathBuf::from(cfg)) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("leoguard-tunnel: {e}");
                    return ExitCode::from(2);
                }
            };
            if args.len() == 3 {
                c.stats_file = Some(PathBuf::from(&args[2]));
            }
            match run(&c, &key) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("leoguard-tunnel: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn load(path: &std::path::Path) -> Result<(TunnelConfig, [u8; 32]), leoguard_tunnel::config::ConfigError> {
    let c = TunnelConfig::load(path)?;
    let (key, perm) = load_key(&c.key_file)?;
    if perm == KeyPerm::GroupReadable {
        eprintln!("leoguard-tunnel: warning: key_file {} is group-readable; chmod 600 it", c.key_file.display());
    }
    Ok((c, key))
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if !out.status.success() {
        anyhow::bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

fn stats_json(c: &TunnelConfig, end: &TunnelEnd, event: &str, started: std::time::Instant) -> String {
    let mut v = serde_json::to_value(&end.counters).unwrap_or_default();
    if let Some(m) = v.as_object_mut() {
        m.insert("event".into(), event.into());
        m.insert("name".into(), c.name.clone().into());
        m.insert("mode".into(), format!("{:?}", c.mode).to_lowercase().into());
        m.insert("uptime_s".into(), started.elapsed().as_secs_f64().into());
        m.insert("cpu_s".into(), sys::cpu_seconds().into());
        m.insert("pid".into(), std::process::id().into());
        if let Some((e, d)) = end.liquid_stats() {
            m.insert("liquid_encoder".into(), e.into());
            m.insert("liquid_decoder".into(), d.into());
        }
    }
    v.to_string()
}

fn write_stats(c: &TunnelConfig, line: &str) {
    if let Some(p) = &c.stats_file {
        // Write then rename, so a reader never sees a half-written file.
        let tmp = p.with_extension("tmp");
        if std::fs::write(&tmp, format!("{line}\n")).and_then(|_| std::fs::rename(&tmp, p)).is_err() {
            eprintln!("leoguard-tunnel: cannot write stats_file {}", p.display());
        }
    }
}

fn run(c: &TunnelConfig, key: &[u8; 32]) -> anyhow::Result<()> {
    sys::install_signal_handlers()?;
    let session = leoguard_tunnel::new_session()?;
    let mut end = TunnelEnd::new(key, session, c.mode, &c.liquid)?;
    let tun = Tun::open(&c.name).map_err(|e| anyhow::anyhow!("opening TUN device {}: {e}", c.name))?;
    ip(&["addr", "replace", &c.address, "dev", &tun.name])?;
    ip(&["link", "set", "dev", &tun.name, "mtu", &c.mtu.to_string(), "up"])?;
    let sock = UdpSocket::bind(c.local).map_err(|e| anyhow::anyhow!("binding local {}: {e}", c.local))?;
    sock.set_nonblocking(true)?;
    sys::set_socket_buffers(sock.as_raw_fd(), 4 << 20);
    eprintln!(
        "leoguard-tunnel: {} up ({}), {} <-> {}, fec {:?}, mtu {}",
        tun.name, c.address, c.local, c.peer, c.mode, c.mtu
    );

    let started = std::time::Instant::now();
    let now = || Instant(started.elapsed().as_nanos() as u64);
    let mut next_stats = started + c.stats_interval;
    let mut buf = vec![0u8; 65536];
    let fds = [tun.as_raw_fd(), sock.as_raw_fd()];
    let mut send_errors = 0u64;
    let mut tun_write_errors = 0u64;
    loop {
        if sys::TERM.load(Ordering::SeqCst) {
            break;
        }
        if sys::USR1.swap(false, Ordering::SeqCst) {
            println!("{}", stats_json(c, &end, "usr1", started));
        }
        let wall = std::time::Instant::now();
        if wall >= next_stats {
            write_stats(c, &stats_json(c, &end, "periodic", started));
            next_stats = wall + c.stats_interval;
        }
        let mut timeout = next_stats.saturating_duration_since(wall);
        if let Some(t) = end.poll_timeout() {
            timeout = timeout.min(std::time::Duration::from_nanos(t.0.saturating_sub(now().0)));
        }
        let ready = sys::poll_readable(&fds, Some(timeout))?;
        let t = now();
        if end.poll_timeout().is_some_and(|d| d <= t) {
            end.handle_timeout(t);
        }
        // Drain both descriptors in bounded batches so neither direction starves the other.
        if ready[0] {
            for _ in 0..256 {
                match tun.recv(&mut buf) {
                    Ok(n) if n > 0 => end.from_tun(t, &buf[..n]),
                    Ok(_) => break,
                    Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                    Err(e) => return Err(anyhow::anyhow!("reading TUN device: {e}")),
                }
                flush_udp(&mut end, &sock, c, t, &mut send_errors);
            }
        }
        if ready[1] {
            for _ in 0..256 {
                match sock.recv_from(&mut buf) {
                    Ok((n, _from)) => end.from_udp(t, &buf[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                    // ICMP errors surfaced on the socket (e.g. peer port unreachable): keep running.
                    Err(_) => {
                        send_errors += 1;
                        break;
                    }
                }
            }
        }
        flush_udp(&mut end, &sock, c, t, &mut send_errors);
        while let Some(p) = end.poll_tun() {
            if tun.send(&p).is_err() {
                tun_write_errors += 1;
            }
        }
    }
    let line = stats_json(c, &end, "exit", started);
    write_stats(c, &line);
    println!("{line}");
    if send_errors + tun_write_errors > 0 {
        eprintln!("leoguard-tunnel: {send_errors} socket errors, {tun_write_errors} TUN write errors");
    }
    Ok(())
}

fn flush_udp(end: &mut TunnelEnd, sock: &UdpSocket, c: &TunnelConfig, t: Instant, errors: &mut u64) {
    while let Some(d) = end.poll_udp(t) {
        if sock.send_to(&d, c.peer).is_err() {
            // A full send buffer or an unreachable peer: the datagram is lost like any other loss.
            *errors += 1;
        }
    }
}
