//! Trace-driven loss: per-second loss-rate replay and exact drop lists.

use leoguard_core::{Instant, RngStream};

use super::{check_prob, LossError, LossModel, SECOND_NS};

/// Parses a per-second loss-rate CSV in the format of SATGUARD's Fig 5 measurement.
///
/// Format: a `Time,PLR` header, then one `second,rate` row per second with seconds 1, 2, 3, ... in
/// order and rates (any float syntax, e.g. `1.20E-02`) in [0, 1]. Blank lines are ignored. Row
/// `Time = k` becomes element `k - 1`, the rate for `[k - 1, k)` s of the replay.
pub fn parse_plr_csv(text: &str) -> Result<Vec<f64>, LossError> {
    const WHAT: &str = "PLR CSV";
    let err = |line: usize, problem: String| LossError::Parse { what: WHAT, line, problem };
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim().trim_start_matches('\u{feff}')))
        .filter(|(_, l)| !l.is_empty());
    match lines.next() {
        Some((_, l)) if l.replace(' ', "") == "Time,PLR" => {}
        Some((n, l)) => {
            return Err(err(n, format!("missing header `Time,PLR` (found `{l}`)")));
        }
        None => return Err(err(1, "missing header `Time,PLR` (empty input)".into())),
    }
    let mut rates = Vec::new();
    let mut last_line = 1;
    for (n, l) in lines {
        last_line = n;
        let mut fields = l.split(',').map(str::trim);
        let (Some(t), Some(r), None) = (fields.next(), fields.next(), fields.next()) else {
            return Err(err(n, format!("expected 2 fields `Time,PLR`, found `{l}`")));
        };
        let want = rates.len() as u64 + 1;
        let t_ok = t.parse::<u64>().ok().or_else(|| {
            // Accept `3.0` style integral floats as well.
            t.parse::<f64>().ok().filter(|x| x.fract() == 0.0 && *x >= 0.0).map(|x| x as u64)
        });
        match t_ok {
            Some(v) if v == want => {}
            Some(v) => return Err(err(n, format!("Time = {v}: expected {want} (seconds start at 1, one row each)"))),
            None => return Err(err(n, format!("Time `{t}` is not a whole number"))),
        }
        let rate: f64 = r.parse().map_err(|_| err(n, format!("PLR `{r}` is not a number")))?;
        if !(0.0..=1.0).contains(&rate) {
            return Err(err(n, format!("PLR = {rate} is outside [0, 1]")));
        }
        rates.push(rate);
    }
    if rates.is_empty() {
        return Err(err(last_line, "no data rows after the header".into()));
    }
    Ok(rates)
}

/// Replays a per-second loss-rate trace: a packet entering in second `k` (k = floor(now / 1 s)) is lost
/// with probability `rates[k]`. After the trace ends it starts over when `looping`, else there is no
/// loss. Works for any order of `now`; one uniform is drawn per packet in a second with a nonzero rate.
#[derive(Debug, Clone)]
pub struct TracePerSecond {
    rates: Vec<f64>,
    looping: bool,
}

impl TracePerSecond {
    /// Builds from per-second rates (each in [0, 1], at least one).
    pub fn new(rates: Vec<f64>, looping: bool) -> Result<Self, LossError> {
        if rates.is_empty() {
            return Err(LossError::invalid("trace_per_second.rates", "[]", "must hold at least one second"));
        }
        for (i, &r) in rates.iter().enumerate() {
            check_prob(&format!("trace_per_second.rates[{i}]"), r)?;
        }
        Ok(TracePerSecond { rates, looping })
    }

    /// Parses `text` with [`parse_plr_csv`] and builds the replay.
    pub fn from_csv(text: &str, looping: bool) -> Result<Self, LossError> {
        Self::new(parse_plr_csv(text)?, looping)
    }

    /// The loss rate in force at `now`.
    pub fn rate_at(&self, now: Instant) -> f64 {
        let sec = now.0 / SECOND_NS;
        let len = self.rates.len() as u64;
        let idx = if self.looping {
            sec % len
        } else if sec < len {
            sec
        } else {
            return 0.0;
        };
        // `idx < len` by construction, and `len` fits in usize since it came from a Vec length.
        self.rates[idx as usize]
    }
}

impl LossModel for TracePerSecond {
    fn drop_packet(&mut self, now: Instant, rng: &mut RngStream) -> bool {
        let r = self.rate_at(now);
        r > 0.0 && rng.bernoulli(r)
    }

    fn name(&self) -> &'static str {
        "trace_per_second"
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        let mean = self.rates.iter().sum::<f64>() / self.rates.len() as f64;
        vec![("seconds", self.rates.len() as f64), ("mean_rate", mean), ("looping", f64::from(u8::from(self.looping)))]
    }
}

/// Parses a drop list: one 0-based packet index per line, strictly increasing; blank lines and lines
/// starting with `#` are ignored.
pub fn parse_drop_list(text: &str) -> Result<Vec<u64>, LossError> {
    let mut out: Vec<u64> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let err = |problem: String| LossError::Parse { what: "drop list", line: i + 1, problem };
        let v: u64 = l.parse().map_err(|_| err(format!("`{l}` is not a non-negative integer packet index")))?;
        if let Some(&prev) = out.last() {
            if v <= prev {
                return Err(err(format!("index {v} is not greater than the previous index {prev}")));
            }
        }
        out.push(v);
    }
    Ok(out)
}

/// Drops exactly the packets whose 0-based index (the count of packets offered to this model before
/// them) is listed. Draws no randomness; time is ignored.
#[derive(Debug, Clone)]
pub struct DropList {
    indices: Vec<u64>,
    cursor: usize,
    offered: u64,
}

impl DropList {
    /// Builds from strictly increasing indices.
    pub fn new(indices: Vec<u64>) -> Result<Self, LossError> {
        for (i, pair) in indices.windows(2).enumerate() {
            if pair[1] <= pair[0] {
                return Err(LossError::invalid(
                    format!("drop_list.indices[{}]", i + 1),
                    pair[1],
                    &format!("must be greater than indices[{i}] = {}", pair[0]),
                ));
            }
        }
        Ok(DropList { indices, cursor: 0, offered: 0 })
    }

    /// Parses `text` with [`parse_drop_list`] and builds the model.
    pub fn from_text(text: &str) -> Result<Self, LossError> {
        Self::new(parse_drop_list(text)?)
    }
}

impl LossModel for DropList {
    fn drop_packet(&mut self, _now: Instant, _rng: &mut RngStream) -> bool {
        let idx = self.offered;
        self.offered += 1;
        if self.indices.get(self.cursor) == Some(&idx) {
            self.cursor += 1;
            true
        } else {
            false
        }
    }

    fn name(&self) -> &'static str {
        "drop_list"
    }

    fn params(&self) -> Vec<(&'static str, f64)> {
        vec![("count", self.indices.len() as f64)]
    }
}

#[cfg(test)]
mod tests {
    use super::super::measured_plr;
    use super::*;
    use leoguard_core::stream;

    #[test]
    fn parses_the_measurement() {
        let r = measured_plr();
        assert_eq!(r.len(), 103);
        assert_eq!(r[5], 0.012);
        assert_eq!(r[89], 0.155);
        let mean = r.iter().sum::<f64>() / 103.0;
        assert!((mean - 0.008_987).abs() < 1e-5, "{mean}");
    }

    #[test]
    fn bad_csv_names_line_and_problem() {
        let cases = [
            ("", "PLR CSV line 1: missing header"),
            ("1,0.0\n", "PLR CSV line 1: missing header"),
            ("Time,PLR\n1,0\n2,abc\n", "PLR CSV line 3: PLR `abc` is not a number"),
            ("Time,PLR\n1,1.5\n", "PLR CSV line 2: PLR = 1.5 is outside [0, 1]"),
            ("Time,PLR\n1,-0.1\n", "PLR CSV line 2: PLR = -0.1 is outside [0, 1]"),
            ("Time,PLR\n1,NaN\n", "PLR CSV line 2: PLR = NaN is outside [0, 1]"),
            ("Time,PLR\n1,0\n3,0\n", "PLR CSV line 3: Time = 3: expected 2"),
            ("Time,PLR\nx,0\n", "PLR CSV line 2: Time `x` is not a whole number"),
            ("Time,PLR\n1\n", "PLR CSV line 2: expected 2 fields"),
            ("Time,PLR\n1,0,0\n", "PLR CSV line 2: expected 2 fields"),
            ("Time,PLR\n\n", "PLR CSV line 1: no data rows"),
        ];
        for (text, want) in cases {
            let got = parse_plr_csv(text).expect_err(text).to_string();
            assert!(got.starts_with(want), "{text:?}: got {got:?}, want {want:?}");
        }
        assert_eq!(parse_plr_csv("\u{feff}Time,PLR\r\n1,1.20E-02\r\n2,0\r\n\r\n"), Ok(vec![0.012, 0.0]));
    }

    #[test]
    fn replay_reproduces_each_seconds_rate() {
        let trace = measured_plr();
        let mut m = TracePerSecond::new(trace.clone(), false).expect("valid");
        let mut rng = stream(8, "trace");
        let per_sec = 20_000u64;
        let step = SECOND_NS / per_sec;
        for (k, &want) in trace.iter().enumerate() {
            let lost = (0..per_sec)
                .filter(|&j| m.drop_packet(Instant(k as u64 * SECOND_NS + j * step), &mut rng))
                .count() as f64;
            let n = per_sec as f64;
            let sigma = (n * want * (1.0 - want)).sqrt();
            assert!((lost - n * want).abs() <= 5.0 * sigma, "second {}: {lost} lost of {n}, trace rate {want}", k + 1);
        }
        // Not looping: silent after the end.
        let end = trace.len() as u64 * SECOND_NS;
        assert!((0..10_000).all(|j| !m.drop_packet(Instant(end + j * 1_000_000), &mut rng)));
    }

    #[test]
    fn looping_replay_wraps_around() {
        let m = TracePerSecond::new(vec![0.0, 1.0, 0.25], true).expect("valid");
        let at = |s: u64| m.rate_at(Instant(s * SECOND_NS + 5));
        assert_eq!([at(0), at(1), at(2), at(3), at(4), at(302)], [0.0, 1.0, 0.25, 0.0, 1.0, 0.25]);
        let once = TracePerSecond::new(vec![0.0, 1.0], false).expect("valid");
        assert_eq!(once.rate_at(Instant(3 * SECOND_NS)), 0.0);
    }

    #[test]
    fn drop_list_drops_exactly_the_listed_indices() {
        let text = "# lost packets\n0\n3\n\n4\n  10 \n999\n";
        let idx = parse_drop_list(text).expect("valid");
        assert_eq!(idx, vec![0, 3, 4, 10, 999]);
        let mut m = DropList::new(idx.clone()).expect("sorted");
        let mut rng = stream(1, "dl");
        let before = rng.clone().next_u64();
        let dropped: Vec<u64> = (0..2_000u64)
            // Time is irrelevant, even when it goes backwards.
            .filter(|&i| m.drop_packet(Instant(5_000 - i), &mut rng))
            .collect();
        assert_eq!(dropped, idx);
        assert_eq!(rng.next_u64(), before, "drop list must not draw randomness");
    }

    #[test]
    fn bad_drop_list_names_line() {
        let e = parse_drop_list("1\n2\nx3\n").expect_err("bad").to_string();
        assert_eq!(e, "drop list line 3: `x3` is not a non-negative integer packet index");
        let e = parse_drop_list("1\n# c\n-2\n").expect_err("bad").to_string();
        assert!(e.starts_with("drop list line 3:"), "{e}");
        let e = parse_drop_list("5\n5\n").expect_err("bad").to_string();
        assert_eq!(e, "drop list line 2: index 5 is not greater than the previous index 5");
    }
}
