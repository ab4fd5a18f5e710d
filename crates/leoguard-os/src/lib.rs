//! leoguard-os: the few Linux calls std does not offer, for leoguard's real-packet programs (the
//! liquid tunnel and the emulator's data plane): TUN devices, entering network namespaces, ppoll,
//! epoll, timerfd on CLOCK_MONOTONIC, CPU pinning, timer slack, signal flags, socket readiness and
//! traffic class. This is the only crate with `unsafe` code; each block states why it is sound.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// A TUN device (layer 3, no packet-information prefix); it vanishes when the descriptor closes.
pub struct Tun {
    file: File,
    /// The kernel's name of the device.
    pub name: String,
}

impl Tun {
    /// Create (or attach to) TUN device `name`, non-blocking.
    pub fn open(name: &str) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")?;
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, which lives for the duration of the call.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req as *mut libc::ifreq) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let name = req.ifr_name.iter().take_while(|c| **c != 0).map(|c| *c as u8 as char).collect();
        Ok(Tun { file, name })
    }

    /// Read one packet; `WouldBlock` when none is queued.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        use std::io::Read;
        (&self.file).read(buf)
    }

    /// Write one packet.
    pub fn send(&self, pkt: &[u8]) -> io::Result<usize> {
        use std::io::Write;
        (&self.file).write(pkt)
    }
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// Wait until one of `fds` is readable or `timeout` passes (None: forever), with nanosecond timer
/// resolution (ppoll). Returns per-fd readiness; an interrupted wait (a signal) returns all false.
pub fn poll_readable(fds: &[RawFd], timeout: Option<std::time::Duration>) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `p` is a valid array of `p.len()` pollfd structs and `tsp` is null or points at `ts`,
    // both alive for the duration of the call; a null sigmask leaves the mask unchanged.
    let rc = unsafe { libc::ppoll(p.as_mut_ptr(), p.len() as libc::nfds_t, tsp, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0).collect())
}

/// Wait until `fd` is readable, or writable when `want_write`, or `timeout` passes (None: forever),
/// with nanosecond timer resolution (ppoll). Returns (readable, writable); an interrupted wait (a
/// signal) returns (false, false). Errors and hang-ups count as readable, so the next read reports them.
pub fn poll_socket(fd: RawFd, want_write: bool, timeout: Option<std::time::Duration>) -> io::Result<(bool, bool)> {
    let events = libc::POLLIN | if want_write { libc::POLLOUT } else { 0 };
    let mut p = [libc::pollfd { fd, events, revents: 0 }];
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `p` is one valid pollfd and `tsp` is null or points at `ts`, both alive for the call; a
    // null sigmask leaves the mask unchanged.
    let rc = unsafe { libc::ppoll(p.as_mut_ptr(), 1, tsp, std::ptr::null()) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok((false, false));
        }
        return Err(e);
    }
    let r = p[0].revents;
    Ok((r & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0, r & libc::POLLOUT != 0))
}

/// Sets the traffic class (IPv6) or TOS byte (IPv4) of what the socket `fd` sends: DSCP EF marks a
/// delay-sensitive flow (SATGUARD §3.5), as iperf3 -S does.
pub fn set_traffic_class(fd: RawFd, ipv6: bool, tc: u8) -> io::Result<()> {
    let v = libc::c_int::from(tc);
    let (level, opt) = if ipv6 { (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) } else { (libc::IPPROTO_IP, libc::IP_TOS) };
    // SAFETY: setsockopt reads one c_int from a valid pointer for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Set by SIGUSR1 (print counters).
pub static USR1: AtomicBool = AtomicBool::new(false);
/// Set by SIGTERM, SIGINT or SIGHUP (exit cleanly).
pub static TERM: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: an atomic store.
    if sig == libc::SIGUSR1 {
        USR1.store(true, Ordering::SeqCst);
    } else {
        TERM.store(true, Ordering::SeqCst);
    }
}

/// Install the handlers for SIGUSR1, SIGTERM, SIGINT and SIGHUP (without SA_RESTART, so poll wakes).
pub fn install_signal_handlers() -> io::Result<()> {
    for sig in [libc::SIGUSR1, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: sigaction is plain old data; the handler only stores to atomics (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// CPU seconds (user + system) this process has used.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Ask for `bytes` of socket send and receive buffer (the kernel caps it at net.core.[rw]mem_max).
pub fn set_socket_buffers(fd: RawFd, bytes: i32) {
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: setsockopt reads one c_int from a valid pointer; failure only leaves the default.
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                &bytes as *const i32 as *const libc::c_void,
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds (the clock timerfd, ppoll and Python's `time.monotonic_ns` use).
pub fn monotonic_ns() -> u64 {
    // SAFETY: clock_gettime writes one timespec it is given.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The calling thread runs in the network namespace at `path` (e.g. `/run/netns/NAME`) until the
/// guard is dropped, when it returns to the namespace it came from. Sockets and TUN devices opened
/// meanwhile stay in the namespace they were opened in.
pub struct NetnsGuard {
    home: File,
}

impl NetnsGuard {
    /// Enters the namespace at `path`.
    pub fn enter(path: &std::path::Path) -> io::Result<NetnsGuard> {
        let home = File::open("/proc/thread-self/ns/net")?;
        let target = File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("network namespace {}: {e}", path.display())))?;
        // SAFETY: setns takes two valid descriptors and changes only this thread's namespace.
        if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(NetnsGuard { home })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // SAFETY: as in `enter`; failing to go back is not recoverable here, and the data plane's
        // thread only ever opens devices while a guard is alive, so it is reported by the next open.
        unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) };
    }
}

/// A timerfd on CLOCK_MONOTONIC, armed at absolute times, non-blocking.
pub struct TimerFd {
    fd: std::os::fd::OwnedFd,
}

impl TimerFd {
    /// A new, disarmed timer.
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor this function owns.
        Ok(TimerFd { fd: unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) } })
    }

    /// Fires once at CLOCK_MONOTONIC time `at_ns` (0 disarms).
    pub fn arm_at(&self, at_ns: u64) -> io::Result<()> {
        let at = at_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec for the duration of the call; the old value is not read.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads (and so clears) the expiry count; 0 when it has not fired.
    pub fn clear(&self) -> u64 {
        let mut n = 0u64;
        // SAFETY: reads at most 8 bytes into `n`, which has 8.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), (&mut n as *mut u64).cast::<libc::c_void>(), 8) };
        if r == 8 {
            n
        } else {
            0
        }
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An epoll set; each registered descriptor carries a caller-chosen token.
pub struct Epoll {
    fd: std::os::fd::OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new epoll set with room for `max_events` readiness reports per wait.
    pub fn new(max_events: usize) -> io::Result<Epoll> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor this function owns.
        let fd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
        Ok(Epoll { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; max_events.max(1)] })
    }

    /// Watches `fd` for input (level-triggered) under `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: `ev` is valid for the call; the kernel copies it.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` (-1: forever, 0: poll) and returns the ready tokens; a signal
    /// interrupting the wait returns none.
    pub fn wait(&mut self, timeout_ms: i32, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        // SAFETY: `events` has room for `events.len()` entries, which the kernel fills at most.
        let n = unsafe {
            libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), self.events.len() as i32, timeout_ms)
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(()) } else { Err(e) };
        }
        ready.extend(self.events[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

/// Pins the calling thread to CPU `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain old data; CPU_SET writes inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sets the calling thread's timer slack (Linux adds up to 50 us by default to every timed wait).
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the calling thread's nice value (-20..=19): at -20 an ordinary process sharing its CPU gets
/// about 1 % of it. (SCHED_FIFO is no better for a thread that spins: real-time throttling then stops
/// it for 50 ms of every second.)
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no arguments; setpriority takes plain integers (a thread id is a PRIO_PROCESS
    // target on Linux).
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Hints the CPU to bring the cache line holding `value` into its caches (a no-op where the
/// architecture has no prefetch instruction). The data plane calls it for the packet its next event
/// will touch: a packet that waited a millisecond in a delay line is cold, and its header is read
/// first thing on arrival.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: a prefetch is a hint; it never faults and never changes memory, and the pointer
        // comes from a live reference anyway.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(value as *const T as *const i8) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
