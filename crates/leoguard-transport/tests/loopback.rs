//! The real binary over loopback UDP: a clean transfer over IPv4, a timed BBR flow over IPv6 through a
//! lossy relay (every byte that was written arrives, checked byte for byte by the receiver), clean exits
//! on SIGINT/SIGTERM, and one-line errors for bad arguments. Bounds are generous: these run on a loaded
//! 2-core machine.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use leoguard_core::stream;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_leoguard-transport");

fn free_port(ip: &str) -> u16 {
    let s = UdpSocket::bind(format!("{ip}:0")).expect("bind");
    s.local_addr().expect("addr").port()
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("leoguard-transport-{}-{name}", std::process::id()))
}

fn recv(bind: &str, out: &Path, extra: &[&str]) -> Child {
    Command::new(BIN)
        .args(["recv", "--bind", bind, "--out"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv")
}

fn wait_bound(port: u16) {
    // The receiver is up once its port is taken.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let taken = ["127.0.0.1", "[::1]"].iter().any(|ip| UdpSocket::bind(format!("{ip}:{port}")).is_err());
        if taken {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("the receiver did not bind port {port}");
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().expect("wait").is_none() {
        let _ = child.kill();
        panic!("process still running after {limit:?}");
    }
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    child.stdout.take().map(|mut s| s.read_to_string(&mut out));
    child.stderr.take().map(|mut s| s.read_to_string(&mut err));
    let status = child.wait().expect("status");
    Output { status, stdout: out.into_bytes(), stderr: err.into_bytes() }
}

fn last_json(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line =
        text.lines().last().unwrap_or_else(|| panic!("no output; stderr: {}", String::from_utf8_lossy(&out.stderr)));
    serde_json::from_str(line).expect("JSON line")
}

fn report(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("report file")).expect("report JSON")
}

#[test]
fn a_clean_ipv4_transfer_delivers_every_byte() {
    let port = free_port("127.0.0.1");
    let out = tmp("clean.json");
    let mut r = recv(&format!("127.0.0.1:{port}"), &out, &["--linger-ms", "200", "--timeout", "60"]);
    wait_bound(port);
    let mut s = Command::new(BIN)
        .args(["send", "--to", &format!("127.0.0.1:{port}"), "--cc", "cubic", "--bytes", "20M", "--timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    let so = wait_timeout(&mut s, Duration::from_secs(70));
    let ro = wait_timeout(&mut r, Duration::from_secs(70));
    assert!(so.status.success() && ro.status.success(), "{so:?} {ro:?}");
    let sent = last_json(&so);
    let got = report(&out);
    assert_eq!(sent["bytes_acked"], 20 << 20);
    assert_eq!(sent["complete"], true);
    assert_eq!(sent["closed"], true);
    assert_eq!(got["bytes_delivered"], 20 << 20);
    assert_eq!(got["stream_end"], 20 << 20);
    assert_eq!(got["complete"], true);
    assert_eq!(got["counters"]["corrupt"], 0);
    assert_eq!(got["flow_id"], sent["flow_id"]);
    assert!(sent["goodput_bps"].as_f64().is_some_and(|g| g > 0.0));
    let _ = std::fs::remove_file(out);
}

/// A UDP relay between the sender (side A) and the receiver (side B) that drops `loss` of the
/// datagrams in each direction (seeded), the lossy shim of the test.
struct Relay {
    a: SocketAddr,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Relay {
    fn start(receiver: SocketAddr, loss: f64) -> Relay {
        let a = UdpSocket::bind("[::1]:0").expect("relay a");
        let b = UdpSocket::bind("[::1]:0").expect("relay b");
        for s in [&a, &b] {
            s.set_read_timeout(Some(Duration::from_millis(20))).expect("timeout");
        }
        let addr = a.local_addr().expect("addr");
        let (a, b) = (Arc::new(a), Arc::new(b));
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let sender: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
        let mut threads = Vec::new();
        for fwd in [true, false] {
            let (from, to) = if fwd { (a.clone(), b.clone()) } else { (b.clone(), a.clone()) };
            let (stop, dropped, sender) = (stop.clone(), dropped.clone(), sender.clone());
            threads.push(thread::spawn(move || {
                let mut rng = stream(7, if fwd { "relay/fwd" } else { "relay/rev" });
                let mut buf = vec![0u8; 65_536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, src)) = from.recv_from(&mut buf) else { continue };
                    let dst = if fwd {
                        *sender.lock().expect("lock") = Some(src);
                        Some(receiver)
                    } else {
                        *sender.lock().expect("lock")
                    };
                    if rng.bernoulli(loss) {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if let Some(d) = dst {
                        let _ = to.send_to(&buf[..n], d);
                    }
                }
            }));
        }
        Relay { a: addr, stop, dropped, threads }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().expect("relay thread");
        }
        self.dropped.load(Ordering::Relaxed)
    }
}

#[test]
fn a_timed_bbr_flow_over_ipv6_through_a_lossy_relay_delivers_every_byte_it_wrote() {
    let port = free_port("[::1]");
    let out = tmp("lossy.json");
    let mut r = recv(&format!("[::1]:{port}"), &out, &["--json-interval", "100", "--timeout", "60"]);
    wait_bound(port);
    let relay = Relay::start(format!("[::1]:{port}").parse().expect("addr"), 0.02);
    let mut s = Command::new(BIN)
        .args(["send", "--to", &relay.a.to_string(), "--cc", "bbr", "--seconds", "1", "--json-interval", "100"])
        .args(["--timeout", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    let so = wait_timeout(&mut s, Duration::from_secs(70));
    let ro = wait_timeout(&mut r, Duration::from_secs(70));
    let dropped = relay.finish();
    assert!(so.status.success() && ro.status.success(), "{so:?} {ro:?}");
    let sent = last_json(&so);
    let got = report(&out);
    let written = sent["bytes_written"].as_u64().expect("bytes_written");
    assert!(written > 100_000, "{sent}");
    assert_eq!(sent["bytes_acked"].as_u64(), Some(written));
    assert_eq!(got["bytes_delivered"].as_u64(), Some(written), "every byte written arrives: {got}");
    assert_eq!(got["stream_end"].as_u64(), Some(written));
    assert_eq!(got["counters"]["corrupt"], 0);
    assert!(dropped > 0, "the relay must have dropped something");
    assert!(sent["retransmissions"].as_u64().is_some_and(|n| n > 0), "{sent}");
    // Interval lines before the summary, with the telemetry fields.
    let text = String::from_utf8_lossy(&so.stdout);
    let intervals: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .filter(|v: &Value| v["event"] == "interval")
        .collect();
    assert!(intervals.len() >= 5, "{} interval lines", intervals.len());
    for k in ["goodput_bps", "cwnd_bytes", "srtt_ms", "retransmissions", "in_flight_bytes", "acked_bytes"] {
        assert!(intervals.iter().all(|v| v.get(k).is_some()), "{k}");
    }
    assert!(got["intervals"].as_array().is_some_and(|a| !a.is_empty()));
    let _ = std::fs::remove_file(out);
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().expect("kill").success();
    assert!(ok);
}

#[test]
fn sigterm_and_sigint_stop_both_ends_cleanly() {
    let port = free_port("127.0.0.1");
    let out = tmp("signal.json");
    let mut r = recv(&format!("127.0.0.1:{port}"), &out, &[]);
    wait_bound(port);
    let mut s = Command::new(BIN)
        .args(["send", "--to", &format!("127.0.0.1:{port}"), "--cc", "newreno", "--seconds", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn send");
    thread::sleep(Duration::from_millis(700));
    signal(&s, "-INT");
    let so = wait_timeout(&mut s, Duration::from_secs(10));
    assert!(so.status.success(), "{so:?}");
    let sent = last_json(&so);
    assert_eq!(sent["interrupted"], true);
    assert!(sent["bytes_acked"].as_u64().is_some_and(|b| b > 0), "{sent}");
    signal(&r, "-TERM");
    let ro = wait_timeout(&mut r, Duration::from_secs(10));
    assert!(ro.status.success(), "{ro:?}");
    let got = report(&out);
    assert_eq!(got["interrupted"], true);
    assert_eq!(got["complete"], false);
    assert!(got["bytes_delivered"].as_u64() >= sent["bytes_acked"].as_u64());
    let _ = std::fs::remove_file(out);
}

#[test]
fn bad_arguments_exit_2_with_one_line_naming_the_flag() {
    for (args, flag) in [
        (&["send", "--to", "127.0.0.1:9", "--cc", "vegas", "--bytes", "1"][..], "--cc"),
        (&["send", "--to", "localhost", "--cc", "bbr", "--bytes", "1"][..], "--to"),
        (&["send", "--to", "127.0.0.1:9", "--cc", "bbr"][..], "--bytes or --seconds"),
        (&["recv", "--bind", "[::1]:9"][..], "--out"),
        (&["jump"][..], "jump"),
    ] {
        let o = Command::new(BIN).args(args).output().expect("run");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    // A port another process holds is a runtime failure (1) naming --bind.
    let held = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let port = held.local_addr().expect("addr").port();
    let o = Command::new(BIN)
        .args(["recv", "--bind", &format!("127.0.0.1:{port}"), "--out", "/tmp/never.json"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--bind"));
}
