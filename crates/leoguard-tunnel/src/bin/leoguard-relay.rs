//! `leoguard-relay`: a UDP relay between two sides that drops (and optionally delays) datagrams.
//!
//! ```text
//! leoguard-relay --a-listen ADDR --b-listen ADDR [--a-peer ADDR] [--b-peer ADDR]
//!                [--loss none|bernoulli:P|ge:P,R,LOSS_BAD[,LOSS_GOOD]] [--delay-ms MS] [--seed N]
//!                [--stats-file PATH]
//! ```
//! A datagram received on the A socket goes out of the B socket to the B peer, and vice versa. A peer
//! not given is learned from the last datagram received on its side. Each direction draws from its own
//! seeded random stream ("relay/a->b", "relay/b->a"). Counters as a JSON line on SIGUSR1 and at exit.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use leoguard_core::{stream, RngStream};
use leoguard_tunnel::loss::LossModel;
use leoguard_tunnel::sys;

struct Dir {
    name: &'static str,
    model: LossModel,
    rng: RngStream,
    queue: VecDeque<(Instant, Vec<u8>)>,
    received: u64,
    dropped: u64,
    forwarded: u64,
    send_errors: u64,
}

struct Args {
    a_listen: SocketAddr,
    b_listen: SocketAddr,
    a_peer: Option<SocketAddr>,
    b_peer: Option<SocketAddr>,
    loss: LossModel,
    delay: Duration,
    seed: u64,
    stats_file: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut get = std::collections::BTreeMap::new();
    let mut it = argv.iter();
    while let Some(k) = it.next() {
        let known =
            ["--a-listen", "--b-listen", "--a-peer", "--b-peer", "--loss", "--delay-ms", "--seed", "--stats-file"];
        if !known.contains(&k.as_str()) {
            return Err(format!("unknown flag {k:?}"));
        }
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        get.insert(k.as_str(), v.clone());
    }
    let addr = |k: &str| -> Result<Option<SocketAddr>, String> {
        get.get(k).map(|v| v.parse().map_err(|_| format!("{k}: expected IP:PORT, got {v:?}"))).transpose()
    };
    let delay_ms: f64 = match get.get("--delay-ms") {
        Some(v) => v.parse().map_err(|_| format!("--delay-ms: not a number: {v:?}"))?,
        None => 0.0,
    };
    if !delay_ms.is_finite() || !(0.0..=10_000.0).contains(&delay_ms) {
        return Err(format!("--delay-ms: must be in 0..=10000, got {delay_ms}"));
    }
    Ok(Args {
        a_listen: addr("--a-listen")?.ok_or("--a-listen is required")?,
        b_listen: addr("--b-listen")?.ok_or("--b-listen is required")?,
        a_peer: addr("--a-peer")?,
        b_peer: addr("--b-peer")?,
        loss: LossModel::parse(get.get("--loss").map_or("none", String::as_str)).map_err(|e| format!("--loss: {e}"))?,
        delay: Duration::from_secs_f64(delay_ms / 1000.0),
        seed: match get.get("--seed") {
            Some(v) => v.parse().map_err(|_| format!("--seed: not an unsigned integer: {v:?}"))?,
            None => 1,
        },
        stats_file: get.get("--stats-file").cloned(),
    })
}

fn stats(dirs: &[Dir; 2], event: &str) -> String {
    let mut m = serde_json::Map::new();
    m.insert("event".into(), event.into());
    for d in dirs {
        m.insert(
            d.name.into(),
            serde_json::json!({"received": d.received, "dropped": d.dropped, "forwarded": d.forwarded,
                               "send_errors": d.send_errors}),
        );
    }
    serde_json::Value::Object(m).to_string()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("leoguard-relay: {e}");
            return ExitCode::from(2);
        }
    };
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("leoguard-relay: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(args: Args) -> std::io::Result<()> {
    sys::install_signal_handlers()?;
    let socks = [UdpSocket::bind(args.a_listen)?, UdpSocket::bind(args.b_listen)?];
    for s in &socks {
        s.set_nonblocking(true)?;
        sys::set_socket_buffers(s.as_raw_fd(), 4 << 20);
    }
    let mut peers = [args.a_peer, args.b_peer];
    let mk = |name, label| Dir {
        name,
        model: args.loss.clone(),
        rng: stream(args.seed, label),
        queue: VecDeque::new(),
        received: 0,
        dropped: 0,
        forwarded: 0,
        send_errors: 0,
    };
    // dirs[0]: received on A, sent to B; dirs[1]: received on B, sent to A.
    let mut dirs = [mk("a_to_b", "relay/a->b"), mk("b_to_a", "relay/b->a")];
    let fds = [socks[0].as_raw_fd(), socks[1].as_raw_fd()];
    let mut buf = vec![0u8; 65536];
    let mut next_stats = Instant::now();
    eprintln!("leoguard-relay: {} <-> {}, loss {:?}, delay {:?}", args.a_listen, args.b_listen, args.loss, args.delay);
    while !sys::TERM.load(Ordering::SeqCst) {
        if sys::USR1.swap(false, Ordering::SeqCst) {
            println!("{}", stats(&dirs, "usr1"));
        }
        let now = Instant::now();
        let next = dirs.iter().filter_map(|d| d.queue.front().map(|q| q.0)).min();
        let timeout = next.map_or(Duration::from_millis(500), |t| t.saturating_duration_since(now));
        let ready = sys::poll_readable(&fds, Some(timeout))?;
        for side in 0..2 {
            if !ready[side] {
                continue;
            }
            for _ in 0..256 {
                match socks[side].recv_from(&mut buf) {
                    Ok((n, from)) => {
                        if args_peer_learnable(side, &args) {
                            peers[side] = Some(from);
                        }
                        let d = &mut dirs[side];
                        d.received += 1;
                        if d.model.drop_next(&mut d.rng) {
                            d.dropped += 1;
                        } else {
                            d.queue.push_back((Instant::now() + args.delay, buf[..n].to_vec()));
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => break,
                    Err(_) => break,
                }
            }
        }
        let now = Instant::now();
        for (side, d) in dirs.iter_mut().enumerate() {
            let out = 1 - side;
            while d.queue.front().is_some_and(|q| q.0 <= now) {
                let (_, pkt) = d.queue.pop_front().expect("front exists");
                match peers[out] {
                    Some(p) if socks[out].send_to(&pkt, p).is_ok() => d.forwarded += 1,
                    _ => d.send_errors += 1,
                }
            }
        }
        if let Some(f) = &args.stats_file {
            if now >= next_stats {
                std::fs::write(f, stats(&dirs, "periodic")).ok();
                next_stats = now + Duration::from_secs(1);
            }
        }
    }
    let line = stats(&dirs, "exit");
    if let Some(f) = &args.stats_file {
        std::fs::write(f, &line).ok();
    }
    println!("{line}");
    Ok(())
}

fn args_peer_learnable(side: usize, args: &Args) -> bool {
    if side == 0 {
        args.a_peer.is_none()
    } else {
        args.b_peer.is_none()
    }
}
