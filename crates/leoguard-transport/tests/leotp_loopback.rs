//! `leotp-serve` and `leotp-fetch` on loopback, as the real binary: a 5 MB transfer delivers every
//! byte exactly once with the right content, directly and through a relay that drops 1 % of the
//! datagrams each way; a fetch from a port nobody serves fails with a clear message.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const N: u64 = 5 << 20;
const MSS: u64 = 1453;

fn exe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_leoguard-transport"))
}

/// A loopback UDP port free a moment ago.
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()).map(|a| a.port()).expect("a free port")
}

/// Kills the producer when the test ends, however it ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A producer on a free port, and the port. The port is free when chosen but only bound when the
/// producer starts: another test running beside this one (a fetch, a relay) may take it first, and the
/// producer then exits at once (bind fails). So a producer that is gone after its start-up is started
/// again on another port.
fn serve() -> (Serve, u16) {
    for _ in 0..10 {
        let port = free_port();
        let child = exe()
            .args([
                "leotp-serve",
                "--bind",
                &format!("127.0.0.1:{port}"),
                "--bytes",
                &N.to_string(),
                "--timeout",
                "120",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("leotp-serve starts");
        // Its socket is bound within milliseconds; an Interest sent before that is lost and resent.
        thread::sleep(Duration::from_millis(200));
        let mut s = Serve(child);
        if s.0.try_wait().expect("leotp-serve's status").is_none() {
            return (s, port);
        }
    }
    panic!("leotp-serve could not bind a free port in 10 tries");
}

fn fetch(to: SocketAddr, extra: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let out = exe().args(["leotp-fetch", "--from", &to.to_string()]).args(extra).output().expect("leotp-fetch runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let last = stdout.lines().last().unwrap_or("null").to_string();
    let v = serde_json::from_str(&last).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, String::from_utf8_lossy(&out.stderr).to_string())
}

fn check_exactly_once(v: &serde_json::Value) {
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["content_ok"], true, "{v}");
    assert_eq!(v["bad_bytes"], 0, "{v}");
    assert_eq!(v["bytes_delivered"], N, "{v}");
    assert_eq!(v["consumer"]["delivered_bytes"], N, "{v}");
    // Each segment was accepted exactly once; any second copy was dropped as a duplicate.
    assert_eq!(v["consumer"]["data_received"], N.div_ceil(MSS), "{v}");
    let per_second: u64 =
        v["per_second"].as_array().expect("series").iter().map(|s| s["bytes"].as_u64().unwrap_or(0)).sum();
    assert_eq!(per_second, N, "the per-second series adds up: {v}");
}

#[test]
fn five_megabytes_arrive_exactly_once() {
    let (_p, port) = serve();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let (rc, v, err) = fetch(to, &["--bytes", "5M", "--timeout", "60"]);
    assert_eq!(rc, Some(0), "{err}\n{v}");
    check_exactly_once(&v);
    assert!(v["rtt_from_ts_ms"]["samples"].as_u64().unwrap_or(0) >= N / MSS, "{v}");
}

/// Forwards between a consumer and the producer, dropping about `per_mille` of every thousand
/// datagrams in each direction (a seeded generator per direction).
struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    dropped: Arc<AtomicU64>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Relay {
    fn start(producer: SocketAddr, per_mille: u64) -> Relay {
        let front = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let back = UdpSocket::bind("127.0.0.1:0").expect("bind");
        back.connect(producer).expect("connect");
        for s in [&front, &back] {
            s.set_read_timeout(Some(Duration::from_millis(50))).expect("timeout");
        }
        let addr = front.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let consumer: Arc<Mutex<Option<SocketAddr>>> = Arc::new(Mutex::new(None));
        let (front2, back2) = (front.try_clone().expect("clone"), back.try_clone().expect("clone"));
        let mut threads = Vec::new();
        for upward in [true, false] {
            let (stop, dropped, consumer) = (stop.clone(), dropped.clone(), consumer.clone());
            let (rx, tx) =
                if upward { (front.try_clone(), back.try_clone()) } else { (back2.try_clone(), front2.try_clone()) };
            let (rx, tx) = (rx.expect("clone"), tx.expect("clone"));
            threads.push(thread::spawn(move || {
                let mut x: u64 = if upward { 0x9E37_79B9_7F4A_7C15 } else { 0xD1B5_4A32_D192_ED03 };
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    let (n, from) = match rx.recv_from(&mut buf) {
                        Ok(r) => r,
                        Err(_) => continue,
                    };
                    // xorshift64
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 1000 < per_mille {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if upward {
                        *consumer.lock().expect("lock") = Some(from);
                        let _ = tx.send(&buf[..n]);
                    } else if let Some(c) = *consumer.lock().expect("lock") {
                        let _ = tx.send_to(&buf[..n], c);
                    }
                }
            }));
        }
        Relay { addr, stop, dropped, threads }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        self.dropped.load(Ordering::Relaxed)
    }
}

#[test]
fn five_megabytes_arrive_through_one_percent_loss() {
    let (_p, port) = serve();
    let relay = Relay::start(format!("127.0.0.1:{port}").parse().expect("addr"), 10);
    let (rc, v, err) = fetch(relay.addr, &["--bytes", "5M", "--timeout", "90"]);
    let dropped = relay.finish();
    assert_eq!(rc, Some(0), "{err}\n{v}");
    check_exactly_once(&v);
    assert!(dropped >= 20, "the relay dropped {dropped} datagrams");
    // Lost Data and lost Interests were both recovered by the consumer's timeouts.
    assert!(v["retransmissions"].as_u64().unwrap_or(0) >= dropped / 2, "{dropped} dropped: {v}");
    assert!(v["timeouts"].as_u64().unwrap_or(0) > 0, "{v}");
}

#[test]
fn no_producer_is_a_clear_failure() {
    let port = free_port();
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let (rc, v, err) = fetch(to, &["--bytes", "1M", "--timeout", "1"]);
    assert_eq!(rc, Some(1), "{err}");
    assert!(err.contains("timed out") && err.contains("no producer answered"), "{err}");
    assert_eq!((v["bytes_delivered"].as_u64(), v["timed_out"].as_bool()), (Some(0), Some(true)), "{v}");
    let bad = exe().args(["leotp-fetch", "--from", "127.0.0.1:9", "--bytes", "5G"]).output().expect("runs");
    let msg = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{msg}");
    assert!(msg.contains("--bytes") && msg.contains("32-bit"), "{msg}");
}
