//! The script's syscalls and `%{ }%` blocks on the runner: commands, socket calls mapped onto the
//! model's sender (`write`, `setsockopt`, `close`), and the TCP_INFO-like snapshot the blocks read.

use super::*;

impl Runner {
    pub(super) fn command(&mut self, line: usize, cmd: &str) -> Result<(), ScriptError> {
        if self.conn.is_some() {
            return Err(unsupported(line, format!("command `{cmd}` after the connection started")));
        }
        self.set.command(cmd).map_err(|f| unsupported(line, f))
    }

    fn int_arg(line: usize, s: &Syscall, i: usize) -> Result<i64, ScriptError> {
        let a = s.args.get(i).map(String::as_str).unwrap_or("");
        a.trim_matches(|c| c == '[' || c == ']').parse().map_err(|_| {
            ScriptError::Fail(Failure {
                line,
                expected: format!("an integer as argument {} of {}()", i + 1, s.name),
                got: format!("'{a}'"),
                syntax: true,
            })
        })
    }

    fn check_ret(line: usize, s: &Syscall, got: i64) -> Result<(), ScriptError> {
        if s.ret != got || s.errno.is_some() {
            let e = s.errno.as_deref().map(|e| format!(" {e}")).unwrap_or_default();
            return Err(fail(line, format!("{}() = {}{e}", s.name, s.ret), format!("{}() = {got}", s.name)));
        }
        Ok(())
    }

    pub(super) fn syscall(&mut self, line: usize, s: &Syscall) -> Result<(), ScriptError> {
        let arg = |i: usize| s.args.get(i).map(String::as_str).unwrap_or("");
        match s.name.as_str() {
            "socket" => {
                if !s.args.iter().any(|a| a == "SOCK_STREAM") {
                    return Err(unsupported(line, "a socket other than SOCK_STREAM"));
                }
                if s.ret < 0 {
                    return Err(fail(line, format!("socket() = {}", s.ret), "a socket"));
                }
                self.fds.insert(s.ret);
                Ok(())
            }
            "bind" => Self::check_ret(line, s, 0),
            "listen" => {
                self.phase = Phase::Listening;
                Self::check_ret(line, s, 0)
            }
            "fcntl" => {
                if arg(1) == "F_SETFL" || arg(1) == "F_GETFL" {
                    return Ok(());
                }
                Err(unsupported(line, format!("fcntl {}", arg(1))))
            }
            "setsockopt" => self.setsockopt(line, s),
            "accept" => {
                if self.phase != Phase::Established {
                    return Err(unsupported(line, "accept() before the handshake completed (blocking accept)"));
                }
                if s.ret < 0 {
                    return Err(fail(line, format!("accept() = {}", s.ret), "a connected socket"));
                }
                self.fds.insert(s.ret);
                self.conn_fd = Some(s.ret);
                Ok(())
            }
            "connect" => {
                if self.phase != Phase::Closed {
                    return Err(unsupported(line, "connect() on a socket that is not closed"));
                }
                let fd = Self::int_arg(line, s, 0)?;
                self.conn_fd = Some(fd);
                self.phase = Phase::SynSent(self.now);
                self.pending.push_back((self.now, Out::Syn));
                // Non-blocking: -1 EINPROGRESS; blocking: 0 once established (the script's later lines
                // check the handshake).
                match (s.ret, s.errno.as_deref()) {
                    (-1, Some("EINPROGRESS")) | (0, None) => Ok(()),
                    _ => Err(fail(line, format!("connect() = {}", s.ret), "connect() = -1 EINPROGRESS")),
                }
            }
            "write" | "send" => {
                let fd = Self::int_arg(line, s, 0)?;
                let n = Self::int_arg(line, s, 2)?;
                if Some(fd) != self.conn_fd || self.conn.is_none() {
                    return Err(unsupported(
                        line,
                        format!("{}() on fd {fd}, which is not an established connection", s.name),
                    ));
                }
                if s.name == "send" && !matches!(arg(3), "0" | "") {
                    return Err(unsupported(line, format!("send() flags {}", arg(3))));
                }
                if n <= 0 {
                    return Err(unsupported(line, format!("{}() of {n} bytes", s.name)));
                }
                let n = n as u64;
                if self.sndbuf.is_some_and(|b| n > 2 * b) {
                    return Err(unsupported(line, "a write larger than the send buffer (partial writes)"));
                }
                let nodelay = self.nodelay;
                let c = self.conn.as_mut().unwrap_or_else(|| unreachable!("checked above"));
                if !nodelay && (c.written + n) % u64::from(c.mss) != 0 {
                    return Err(unsupported(
                        line,
                        "a write that leaves a partial segment without TCP_NODELAY (Nagle is not modelled)",
                    ));
                }
                c.written += n;
                c.write_ends.insert(c.written);
                c.sender.write(n);
                Self::check_ret(line, s, n as i64)
            }
            "close" => {
                let fd = Self::int_arg(line, s, 0)?;
                if !self.fds.remove(&fd) {
                    return Err(fail(line, format!("close({fd}) = {}", s.ret), "close() = -1 EBADF"));
                }
                Self::check_ret(line, s, 0)
            }
            other => Err(unsupported(line, format!("system call {other}()"))),
        }
    }

    fn setsockopt(&mut self, line: usize, s: &Syscall) -> Result<(), ScriptError> {
        let opt = s.args.get(2).map(String::as_str).unwrap_or("");
        match opt {
            "SO_REUSEADDR" | "SO_REUSEPORT" => {}
            "TCP_NODELAY" => self.nodelay = Self::int_arg(line, s, 3)? != 0,
            "SO_SNDBUF" => self.sndbuf = Some(Self::int_arg(line, s, 3)?.max(0) as u64),
            "TCP_CONGESTION" => {
                let now = self.now;
                let name = s.args.get(3).map(|a| a.trim_matches('"')).unwrap_or("");
                let model = cc_name(name).ok_or_else(|| unsupported(line, format!("TCP_CONGESTION \"{name}\"")))?;
                self.set.cc = model.to_string();
                if let Some(c) = &mut self.conn {
                    if c.written > 0 {
                        return Err(unsupported(line, "TCP_CONGESTION after data was written"));
                    }
                    let cc = cc::build(model, u64::from(c.mss), 10)
                        .map_err(|e| unsupported(line, format!("congestion control: {e}")))?;
                    let srtt = c.sender.srtt();
                    let cfg = TcpConfig {
                        mss: c.mss,
                        header_bytes: 40 + if c.ts { 12 } else { 0 },
                        rwnd: c.rwnd,
                        recovery: self.set.rec,
                        ..TcpConfig::default()
                    };
                    c.sender = TcpSender::new(cfg, cc, Some(0));
                    if let Some(r) = srtt {
                        c.sender.on_handshake_rtt(inst(now), r);
                    }
                }
            }
            other => return Err(unsupported(line, format!("setsockopt {other}"))),
        }
        Self::check_ret(line, s, 0)
    }

    /// The TCP_INFO snapshot a code block sees now.
    pub(super) fn snapshot(&self, line: usize) -> Result<BTreeMap<String, Value>, ScriptError> {
        let c = self.conn.as_ref().ok_or_else(|| unsupported(line, "TCP_INFO before the connection exists"))?;
        let i = c.sender.info();
        let n = |x: u64| Value::Int(x as i64);
        let mut v = BTreeMap::new();
        for (k, x) in [
            ("tcpi_snd_cwnd", i.snd_cwnd),
            ("tcpi_snd_ssthresh", i.snd_ssthresh),
            ("tcpi_snd_mss", i.snd_mss),
            ("tcpi_unacked", i.unacked),
            ("tcpi_sacked", i.sacked),
            ("tcpi_lost", i.lost),
            ("tcpi_retrans", i.retrans),
            ("tcpi_total_retrans", i.total_retrans),
            ("tcpi_reordering", i.reordering),
            ("tcpi_rtt", i.rtt_us),
            ("tcpi_rttvar", i.rttvar_us),
            ("tcpi_min_rtt", i.min_rtt_us),
            ("tcpi_rto", i.rto_us),
            ("tcpi_ca_state", i.ca_state as u64),
        ] {
            v.insert(k.to_string(), n(x));
        }
        if let Some(r) = i.pacing_rate {
            v.insert("tcpi_pacing_rate".into(), n(r));
        }
        for (k, s) in [
            ("TCP_CA_Open", CaState::Open),
            ("TCP_CA_Disorder", CaState::Disorder),
            ("TCP_CA_CWR", CaState::Cwr),
            ("TCP_CA_Recovery", CaState::Recovery),
            ("TCP_CA_Loss", CaState::Loss),
        ] {
            v.insert(k.to_string(), n(s as u64));
        }
        v.insert("leoguard_cc_state".into(), Value::Str(i.cc_state.to_string()));
        Ok(v)
    }
}
