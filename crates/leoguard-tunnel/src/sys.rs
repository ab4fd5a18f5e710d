//! The few OS calls std does not offer: a TUN device (ioctl TUNSETIFF on /dev/net/tun), poll(2) on
//! several descriptors, and signal flags. This is the only module with `unsafe` code.
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
