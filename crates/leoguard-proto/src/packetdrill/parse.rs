//! The packetdrill script grammar, line by line (google/packetdrill's `parser.y`, read for its
//! grammar, not copied): an optional time (`0.100`, `+0.1`, `*`, `0.1~0.2`, `+0~+0.2`), then an
//! inbound (`<`) or outbound (`>`) TCP packet, a system call `name(args) = ret`, a shell command in
//! backticks or a `%{ ... }%` code block. `//` and `/* */` are comments.

use super::{Failure, ScriptError};

/// When an event happens, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Time {
    /// At an absolute script time.
    Abs(i64),
    /// This long after the previous event.
    Rel(i64),
    /// Any time (`*`).
    Any,
    /// Within an absolute range.
    AbsRange(i64, i64),
    /// Within a range relative to the previous event.
    RelRange(i64, i64),
}

/// Direction of a packet line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// `<`: the script's peer sends it to the system under test.
    In,
    /// `>`: the system under test must send it.
    Out,
}

/// A TCP option as the script writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpOpt {
    /// `nop`.
    Nop,
    /// `eol`.
    Eol,
    /// `mss N`.
    Mss(u32),
    /// `sackOK`.
    SackOk,
    /// `wscale N`.
    Wscale(u8),
    /// `TS val V ecr E`.
    Ts(u32, u32),
    /// `sack a:b c:d ...` (script-relative sequence numbers).
    Sack(Vec<(u32, u32)>),
}

/// Flags of a packet line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// SYN.
    pub syn: bool,
    /// FIN.
    pub fin: bool,
    /// RST.
    pub rst: bool,
    /// PSH.
    pub psh: bool,
    /// ACK (`.`).
    pub ack: bool,
}

impl std::fmt::Display for Flags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (on, c) in [(self.syn, 'S'), (self.fin, 'F'), (self.rst, 'R'), (self.psh, 'P'), (self.ack, '.')] {
            if on {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// A packet line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// `<` or `>`.
    pub dir: Dir,
    /// Flags.
    pub flags: Flags,
    /// First sequence number (script-relative).
    pub start: u32,
    /// End sequence number.
    pub end: u32,
    /// `ack N`, if given.
    pub ack: Option<u32>,
    /// `win N`, if given.
    pub win: Option<u32>,
    /// The `<...>` options, if given.
    pub opts: Option<Vec<TcpOpt>>,
}

/// What a syscall line expects back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Syscall {
    /// `write`, `setsockopt`, ...
    pub name: String,
    /// Arguments, as written, split at top-level commas.
    pub args: Vec<String>,
    /// Expected return value.
    pub ret: i64,
    /// Expected errno name (`EINPROGRESS`), if any.
    pub errno: Option<String>,
}

/// What an event does.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// A packet line.
    Packet(Packet),
    /// A system call.
    Syscall(Syscall),
    /// A shell command in backticks.
    Command(String),
    /// A `%{ ... }%` code block.
    Code(String),
}

/// One line (or block) of a script.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Line number (1-based) where the event starts.
    pub line: usize,
    /// Its time.
    pub time: Time,
    /// What it does.
    pub action: Action,
    /// The line's text, for messages.
    pub text: String,
}

fn syntax(line: usize, token: &str, expected: &str) -> ScriptError {
    let token = if token.is_empty() { "end of line".to_string() } else { format!("'{token}'") };
    ScriptError::Fail(Failure { line, expected: expected.to_string(), got: token, syntax: true })
}

/// Strips comments and splits the script into statements: (line, text). Code blocks and backtick
/// commands may span lines.
fn statements(text: &str) -> Result<Vec<(usize, String)>, ScriptError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut cur_line = 1;
    let mut line = 1;
    let mut chars = text.chars().peekable();
    // Inside: a code block, a backtick command, a block comment.
    let (mut in_code, mut in_cmd, mut in_comment) = (false, false, false);
    let mut comment_line = 0;
    while let Some(c) = chars.next() {
        if in_comment {
            if c == '*' && chars.peek() == Some(&'/') {
                chars.next();
                in_comment = false;
            } else if c == '\n' {
                line += 1;
            }
            continue;
        }
        if in_code {
            if c == '}' && chars.peek() == Some(&'%') {
                chars.next();
                cur.push_str("}%");
                in_code = false;
                continue;
            }
            if c == '\n' {
                line += 1;
            }
            cur.push(c);
            continue;
        }
        if in_cmd {
            if c == '`' {
                in_cmd = false;
            }
            if c == '\n' {
                line += 1;
            }
            cur.push(c);
            continue;
        }
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        break;
                    }
                }
                push_stmt(&mut out, &mut cur, cur_line);
                line += 1;
                cur_line = line;
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                in_comment = true;
                comment_line = line;
            }
            '%' if chars.peek() == Some(&'{') => {
                chars.next();
                cur.push_str("%{");
                in_code = true;
            }
            '`' => {
                cur.push(c);
                in_cmd = true;
            }
            '\n' => {
                push_stmt(&mut out, &mut cur, cur_line);
                line += 1;
                cur_line = line;
            }
            _ => {
                if cur.trim().is_empty() && !c.is_whitespace() {
                    cur.clear();
                    cur_line = line;
                }
                cur.push(c);
            }
        }
    }
    if in_comment {
        return Err(syntax(comment_line, "/*", "'*/' closing the comment"));
    }
    if in_code {
        return Err(syntax(cur_line, "%{", "'}%' closing the code block"));
    }
    if in_cmd {
        return Err(syntax(cur_line, "`", "'`' closing the command"));
    }
    push_stmt(&mut out, &mut cur, cur_line);
    Ok(out)
}

fn push_stmt(out: &mut Vec<(usize, String)>, cur: &mut String, line: usize) {
    let t = cur.trim();
    if !t.is_empty() {
        out.push((line, t.to_string()));
    }
    cur.clear();
}

/// Parses a decimal number of seconds into microseconds (exactly, no float).
pub(crate) fn parse_secs(s: &str) -> Option<i64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 6
    {
        return None;
    }
    let i: i64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let f: i64 = if frac.is_empty() { 0 } else { format!("{frac:0<6}").parse().ok()? };
    i.checked_mul(1_000_000)?.checked_add(f)
}

/// Splits off the leading time; returns the time and the rest.
fn parse_time(line: usize, s: &str) -> Result<(Time, &str), ScriptError> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix('*') {
        return Ok((Time::Any, rest));
    }
    let starts_number = |t: &str| {
        let mut c = t.chars();
        match c.next() {
            Some(d) if d.is_ascii_digit() => true,
            Some('.') => c.next().is_some_and(|d| d.is_ascii_digit()),
            _ => false,
        }
    };
    let (rel, body) = match s.strip_prefix('+') {
        Some(b) => (true, b),
        None if starts_number(s) => (false, s),
        None => return Ok((Time::Rel(0), s)),
    };
    let take = |t: &str| -> (String, usize) {
        let n: String = t.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        let len = n.len();
        (n, len)
    };
    let (num, len) = take(body);
    let a = parse_secs(&num).ok_or_else(|| syntax(line, &num, "a time in seconds"))?;
    let rest = &body[len..];
    if let Some(r) = rest.strip_prefix('~') {
        let r = r.strip_prefix('+').unwrap_or(r);
        let (num2, len2) = take(r);
        let b = parse_secs(&num2).ok_or_else(|| syntax(line, &num2, "the end of a time range"))?;
        if b < a {
            return Err(syntax(line, &num2, "a range end not before its start"));
        }
        let t = if rel { Time::RelRange(a, b) } else { Time::AbsRange(a, b) };
        return Ok((t, &r[len2..]));
    }
    if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
        let tok: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
        return Err(syntax(line, &tok, "whitespace after the time"));
    }
    Ok((if rel { Time::Rel(a) } else { Time::Abs(a) }, rest))
}

/// Parses a whole script.
pub fn parse(text: &str) -> Result<Vec<Event>, ScriptError> {
    let mut events = Vec::new();
    for (line, stmt) in statements(text)? {
        let (time, rest) = parse_time(line, &stmt)?;
        let rest = rest.trim();
        let action = if let Some(r) = rest.strip_prefix('<') {
            Action::Packet(parse_packet(line, Dir::In, r)?)
        } else if let Some(r) = rest.strip_prefix('>') {
            Action::Packet(parse_packet(line, Dir::Out, r)?)
        } else if let Some(r) = rest.strip_prefix("%{") {
            let body = r.strip_suffix("}%").ok_or_else(|| syntax(line, rest, "a code block '%{ ... }%'"))?;
            Action::Code(body.to_string())
        } else if let Some(r) = rest.strip_prefix('`') {
            let body = r.strip_suffix('`').ok_or_else(|| syntax(line, rest, "a command in backticks"))?;
            Action::Command(body.trim().to_string())
        } else if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            Action::Syscall(parse_syscall(line, rest)?)
        } else {
            let tok: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
            return Err(syntax(line, &tok, "a packet ('<' or '>'), a system call, a `command` or a %{ code }% block"));
        };
        events.push(Event { line, time, action, text: stmt.clone() });
    }
    Ok(events)
}

fn num<T: std::str::FromStr>(line: usize, tok: &str, what: &str) -> Result<T, ScriptError> {
    tok.parse().map_err(|_| syntax(line, tok, what))
}

fn parse_packet(line: usize, dir: Dir, s: &str) -> Result<Packet, ScriptError> {
    let (head, opts) = match s.find('<') {
        Some(i) => {
            let o = s[i + 1..].trim_end();
            let o = o.strip_suffix('>').ok_or_else(|| syntax(line, &s[i..], "options '<...>' closed by '>'"))?;
            (&s[..i], Some(parse_opts(line, o)?))
        }
        None => (s, None),
    };
    let mut toks = head.split_whitespace();
    let ftok = toks.next().unwrap_or("");
    if ftok == "udp" || ftok == "icmp" || ftok.starts_with('[') {
        return Err(ScriptError::Unsupported { line, feature: format!("{ftok} packets") });
    }
    let mut flags = Flags::default();
    if ftok.is_empty() {
        return Err(syntax(line, ftok, "TCP flags (S . P F R)"));
    }
    for c in ftok.chars() {
        match c {
            'S' => flags.syn = true,
            'F' => flags.fin = true,
            'R' => flags.rst = true,
            'P' => flags.psh = true,
            '.' => flags.ack = true,
            'E' | 'W' | 'U' => {
                return Err(ScriptError::Unsupported { line, feature: format!("TCP flag {c} (ECN/URG)") })
            }
            _ => return Err(syntax(line, ftok, "TCP flags (S . P F R)")),
        }
    }
    let seq = toks.next().unwrap_or("");
    let bad_seq = || syntax(line, seq, "a sequence range start:end(len)");
    let (a, rest) = seq.split_once(':').ok_or_else(bad_seq)?;
    let (b, rest) = rest.split_once('(').ok_or_else(bad_seq)?;
    let len = rest.strip_suffix(')').ok_or_else(bad_seq)?;
    let start: u32 = a.parse().map_err(|_| bad_seq())?;
    let end: u32 = b.parse().map_err(|_| bad_seq())?;
    let len: u32 = len.parse().map_err(|_| bad_seq())?;
    if end.wrapping_sub(start) != len {
        return Err(syntax(line, seq, "a length equal to end - start"));
    }
    let mut p = Packet { dir, flags, start, end, ack: None, win: None, opts };
    while let Some(k) = toks.next() {
        let v = toks.next().unwrap_or("");
        match k {
            "ack" => p.ack = Some(num(line, v, "an ack number")?),
            "win" => p.win = Some(num(line, v, "a window")?),
            "urg" => return Err(ScriptError::Unsupported { line, feature: "urgent pointer".into() }),
            _ => return Err(syntax(line, k, "'ack N', 'win N' or '<options>'")),
        }
    }
    Ok(p)
}

fn parse_opts(line: usize, s: &str) -> Result<Vec<TcpOpt>, ScriptError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let w: Vec<&str> = part.split_whitespace().collect();
        let o = match w.as_slice() {
            ["nop"] => TcpOpt::Nop,
            ["eol"] => TcpOpt::Eol,
            ["sackOK"] => TcpOpt::SackOk,
            ["mss", n] => TcpOpt::Mss(num(line, n, "an MSS")?),
            ["wscale", n] => {
                let v: u8 = num(line, n, "a window scale")?;
                if v > 14 {
                    return Err(syntax(line, n, "a window scale <= 14"));
                }
                TcpOpt::Wscale(v)
            }
            ["TS", "val", v, "ecr", e] => TcpOpt::Ts(num(line, v, "a TS value")?, num(line, e, "a TS echo")?),
            ["sack", blocks @ ..] if !blocks.is_empty() => {
                let mut bl = Vec::new();
                for b in blocks {
                    let (x, y) = b.split_once(':').ok_or_else(|| syntax(line, b, "a SACK block a:b"))?;
                    bl.push((num(line, x, "a SACK block a:b")?, num(line, y, "a SACK block a:b")?));
                }
                TcpOpt::Sack(bl)
            }
            [kind, ..]
                if ["FO", "md5", "exp", "mptcp", "tcpao", "ao", "FOEXP", "ecn"]
                    .iter()
                    .any(|k| kind.eq_ignore_ascii_case(k)) =>
            {
                return Err(ScriptError::Unsupported { line, feature: format!("TCP option {kind}") })
            }
            _ => return Err(syntax(line, part.trim(), "a TCP option (mss, sackOK, nop, eol, wscale, TS, sack)")),
        };
        out.push(o);
    }
    Ok(out)
}

/// Splits `s` at top-level commas (brackets, braces, parentheses and quotes nest).
fn split_args(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote = false;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '"' => quote = !quote,
            '(' | '[' | '{' if !quote => depth += 1,
            ')' | ']' | '}' if !quote => depth -= 1,
            ',' if !quote && depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() || !out.is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn parse_syscall(line: usize, s: &str) -> Result<Syscall, ScriptError> {
    let name: String = s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    let rest = s[name.len()..].trim_start();
    let rest = rest.strip_prefix('(').ok_or_else(|| {
        let tok: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
        syntax(line, &tok, "'(' after the system call's name")
    })?;
    // The matching close parenthesis.
    let mut depth = 1i32;
    let mut quote = false;
    let mut close = None;
    for (i, c) in rest.char_indices() {
        match c {
            '"' => quote = !quote,
            '(' | '[' | '{' if !quote => depth += 1,
            ')' | ']' | '}' if !quote => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close.ok_or_else(|| syntax(line, "", "')' closing the arguments"))?;
    let args = split_args(&rest[..close]);
    let after = rest[close + 1..].trim();
    let after = after.strip_prefix('=').ok_or_else(|| {
        let tok: String = after.chars().take_while(|c| !c.is_whitespace()).collect();
        syntax(line, &tok, "'= <return value>'")
    })?;
    let mut toks = after.split_whitespace();
    let r = toks.next().unwrap_or("");
    let ret: i64 = num(line, r, "a return value")?;
    let errno = toks.next().map(str::to_string);
    if let Some(e) = &errno {
        if !e.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) {
            return Err(syntax(line, e, "an errno name such as EINPROGRESS"));
        }
    }
    Ok(Syscall { name, args, ret, errno })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_packets() {
        let ev = parse("0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n+.1 < S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>\n*  > S. 0:0(0) ack 1 <mss 1460,nop,wscale 8>\n0.2~0.3 > P. 1:1001(1000) ack 1\n").unwrap();
        assert_eq!(ev.len(), 4);
        assert_eq!(ev[0].time, Time::Abs(0));
        assert_eq!(ev[1].time, Time::Rel(100_000));
        assert_eq!(ev[2].time, Time::Any);
        assert_eq!(ev[3].time, Time::AbsRange(200_000, 300_000));
        let Action::Packet(p) = &ev[1].action else { panic!() };
        assert_eq!(p.opts.as_ref().unwrap()[0], TcpOpt::Mss(1000));
        assert_eq!(p.win, Some(32792));
        let Action::Syscall(s) = &ev[0].action else { panic!() };
        assert_eq!(s.args, vec!["...", "SOCK_STREAM", "IPPROTO_TCP"]);
    }

    #[test]
    fn syntax_error_names_line_and_token() {
        let e = parse("0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\n+0 < S 0:0 win 100\n").unwrap_err();
        let ScriptError::Fail(f) = e else { panic!() };
        assert_eq!((f.line, f.got.as_str()), (3, "'0:0'"));
    }

    #[test]
    fn comments_and_blocks() {
        let ev = parse("// c\n/* a\nb */ 0 `sysctl -q net.ipv4.tcp_sack=1`\n+0 %{\nassert 1 == 1\n}%\n").unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].line, 3);
        assert_eq!(ev[1].line, 4);
        assert_eq!(parse_secs(".25"), Some(250_000));
    }
}
