//! Tambur (Rudow et al., NSDI'23): a streaming code over video frames, sans-IO.
//!
//! Each frame `i` carries data symbols `D[i]`, split into a first part `U[i]` and the rest `V[i]`.
//! The parity symbols `P[i]` sent with frame `i` are linear combinations of `V[i-tau..=i]`, `U[i-tau]`
//! and `U[i]` (REFERENCE.md "Baselines"; US patent 11489620: "parity symbols P[i] based on V[i-tau]
//! through V[i-1], U[i-tau], and D[i]"). A frame's data therefore appears in parities `i..=i+tau`:
//! a lost frame is recovered within `tau` frames or not at all (the decoding delay), and a parity
//! never reaches back more than `tau` frames, so the decoder needs a window of `2·tau + 1` frames.
//! The split follows the Martinian–Sundberg burst construction Tambur builds on: `U` is the share
//! `b/tau` of a frame that a burst of `b` frames can only recover from the parity `tau` frames later
//! (we take `b = 1`, so `U` is a third of the frame at `tau = 3`); Tambur adapts the split per frame
//! from its loss predictions, which is not reproduced.
//!
//! Coefficients are Cauchy: parity symbol `p` weights data symbol `d` by `1 / (x_p + y_d)` over
//! GF(2^16) (see [`gf`]). The decoder ([`Decoder`]) solves the received equations over the lost
//! symbols by Gaussian elimination; with payloads it reconstructs the bytes, without (the simulator's
//! packets carry none) the very same elimination on the coefficients tells which symbols the received
//! equations determine.
//!
//! Redundancy ([`RedundancyPolicy`]): parity worth 50 % of the frame if any feedback of the last 2 s
//! reported loss, else none (REFERENCE.md "Baselines", Tambur's policy as the SATGUARD paper used it).

pub mod gf;

use leoguard_core::{Duration, Instant};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Most data (or parity) symbols one decoding window may hold: the Cauchy points wrap after 2^15.
pub const MAX_WINDOW_SYMBOLS: u64 = gf::HALF;

/// Parameters of the code and of its redundancy policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TamburConfig {
    /// Decoding delay in frames (Tambur: 3).
    pub tau: u32,
    /// Share of each frame's data symbols in the `U` part (rounded up; default 1/3 = b/tau, b = 1).
    pub u_fraction: f64,
    /// Parity symbols per data symbol while loss was reported recently (Tambur policy: 0.5).
    pub parity_ratio: f64,
    /// How long a loss report keeps the parity on (Tambur policy: 2 s).
    pub loss_memory: Duration,
}

impl Default for TamburConfig {
    fn default() -> Self {
        TamburConfig { tau: 3, u_fraction: 1.0 / 3.0, parity_ratio: 0.5, loss_memory: Duration::from_secs(2) }
    }
}

/// A configuration the code cannot run with.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TamburError {
    /// A parameter is out of range.
    #[error("tambur {field} = {value}: {reason}")]
    Invalid {
        /// The parameter.
        field: &'static str,
        /// Its value.
        value: String,
        /// The rule.
        reason: &'static str,
    },
}

impl TamburConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), TamburError> {
        let bad = |field, value: String, reason| Err(TamburError::Invalid { field, value, reason });
        if !(1..=30).contains(&self.tau) {
            return bad("tau", self.tau.to_string(), "must be in [1, 30] frames");
        }
        if !(0.0..=1.0).contains(&self.u_fraction) {
            return bad("u_fraction", self.u_fraction.to_string(), "must be in [0, 1]");
        }
        if !(0.0..=4.0).contains(&self.parity_ratio) {
            return bad("parity_ratio", self.parity_ratio.to_string(), "must be in [0, 4]");
        }
        if self.loss_memory == Duration::ZERO {
            return bad("loss_memory_s", "0".into(), "must be > 0");
        }
        Ok(())
    }

    /// Symbols of a frame of `n` data symbols that form its `U` part.
    pub fn u_count(&self, n: u32) -> u32 {
        ((f64::from(n) * self.u_fraction).ceil() as u32).min(n)
    }
}

/// Where one frame's symbols sit in the stream (what Tambur's packet headers tell the receiver).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameLayout {
    /// Frame number (consecutive from 0).
    pub frame: u64,
    /// Number of the frame's first data symbol (data symbols are numbered consecutively).
    pub first: u64,
    /// Data symbols.
    pub n: u32,
    /// Of which the first `n_u` are the `U` part.
    pub n_u: u32,
    /// Number of the frame's first parity symbol.
    pub parity_first: u64,
    /// Parity symbols.
    pub n_parity: u32,
}

impl FrameLayout {
    /// Data symbol numbers of the `U` part.
    pub fn u(&self) -> std::ops::Range<u64> {
        self.first..self.first + u64::from(self.n_u)
    }

    /// Data symbol numbers of the `V` part.
    pub fn v(&self) -> std::ops::Range<u64> {
        self.first + u64::from(self.n_u)..self.first + u64::from(self.n)
    }

    /// All data symbol numbers.
    pub fn data(&self) -> std::ops::Range<u64> {
        self.first..self.first + u64::from(self.n)
    }

    /// The symbol numbers its `U` and `V` parts name: its data, or more where a corrupt header claims
    /// more `U` symbols than the frame has.
    pub fn span(&self) -> std::ops::Range<u64> {
        self.first..self.first + u64::from(self.n.max(self.n_u))
    }
}

/// The data symbols the parity of frame `f` combines, given the layouts of frames `f-tau..=f`
/// (`get(g)`); None if one of those layouts is unknown.
pub fn covered(tau: u32, f: u64, get: impl Fn(u64) -> Option<FrameLayout>) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    covered_ranges(tau, f, get, |r| out.extend(r)).then_some(out)
}

/// What [`covered`] lists, as ranges of symbol numbers handed to `each` in number order; false, with
/// nothing handed on, if one of the layouts is unknown.
pub fn covered_ranges(
    tau: u32,
    f: u64,
    get: impl Fn(u64) -> Option<FrameLayout>,
    mut each: impl FnMut(std::ops::Range<u64>),
) -> bool {
    let lo = f.saturating_sub(u64::from(tau));
    // Two look-ups per frame rather than a vector of layouts per call: this runs once per parity
    // in the decoder's solve, and `get` is a look-up in a handful of frames.
    if (lo..=f).any(|g| get(g).is_none()) {
        return false;
    }
    for g in lo..=f {
        let Some(l) = get(g) else { return false };
        if g == f || (g == lo && f >= u64::from(tau)) {
            each(l.u());
        }
        // A corrupt header can claim more `U` symbols than the frame has: then `V` is empty.
        if l.n_u < l.n {
            each(l.v());
        }
    }
    true
}

/// The sender's side of the numbering: hands out symbol numbers frame by frame and remembers the
/// last `tau` layouts (used alone by the simulator, whose packets carry no payload).
#[derive(Clone, Debug)]
pub struct StreamLayout {
    cfg: TamburConfig,
    window: VecDeque<FrameLayout>,
    next_frame: u64,
    next_data: u64,
    next_parity: u64,
}

impl StreamLayout {
    /// A stream starting at frame 0.
    pub fn new(cfg: TamburConfig) -> Self {
        StreamLayout { cfg, window: VecDeque::new(), next_frame: 0, next_data: 0, next_parity: 0 }
    }

    /// Lays out the next frame with `n` data and `n_parity` parity symbols; returns it and the data
    /// symbols its parity covers.
    pub fn next(&mut self, n: u32, n_parity: u32) -> (FrameLayout, Vec<u64>) {
        let l = self.next_layout(n, n_parity);
        let cov = covered(self.cfg.tau, l.frame, |g| self.get(g)).unwrap_or_default();
        (l, cov)
    }

    /// [`StreamLayout::next`] without listing what the parity covers (see [`StreamLayout::covered`]).
    pub fn next_layout(&mut self, n: u32, n_parity: u32) -> FrameLayout {
        let l = FrameLayout {
            frame: self.next_frame,
            first: self.next_data,
            n,
            n_u: self.cfg.u_count(n),
            parity_first: self.next_parity,
            n_parity,
        };
        self.next_frame += 1;
        self.next_data += u64::from(n);
        self.next_parity += u64::from(n_parity);
        self.window.push_back(l);
        while self.window.len() > self.cfg.tau as usize + 1 {
            self.window.pop_front();
        }
        l
    }

    /// The data symbols the parity of `frame` (still in the window) covers; empty if it is not.
    pub fn covered(&self, frame: u64) -> Vec<u64> {
        covered(self.cfg.tau, frame, |g| self.get(g)).unwrap_or_default()
    }

    /// Lays out `k` frames without data or parity: the state `k` calls of `next_layout(0, 0)` leave,
    /// in at most `tau + 1` of them (an idle stream's frames, caught up at once).
    pub fn skip_empty(&mut self, k: u64) {
        let direct = k.saturating_sub(u64::from(self.cfg.tau) + 1);
        if direct > 0 {
            self.window.clear();
            self.next_frame += direct;
        }
        for _ in direct..k {
            self.next_layout(0, 0);
        }
    }

    /// The layout of a frame still in the window.
    pub fn get(&self, frame: u64) -> Option<FrameLayout> {
        let first = self.window.front()?.frame;
        self.window.get(frame.checked_sub(first)? as usize).copied()
    }

    /// Layouts of frames `f-tau..=f` (what a parity packet's header lists).
    pub fn window(&self) -> impl Iterator<Item = &FrameLayout> {
        self.window.iter()
    }
}

/// The encoder over real payloads: symbols are padded to `symbol_len` bytes (even).
#[derive(Clone, Debug)]
pub struct Encoder {
    layout: StreamLayout,
    symbol_len: usize,
    payloads: BTreeMap<u64, Vec<u8>>,
}

impl Encoder {
    /// An encoder with fixed symbol length (rounded up to even: GF(2^16) words).
    pub fn new(cfg: TamburConfig, symbol_len: usize) -> Self {
        Encoder { layout: StreamLayout::new(cfg), symbol_len: symbol_len.div_ceil(2) * 2, payloads: BTreeMap::new() }
    }

    /// Encodes the next frame: its data symbols (each at most `symbol_len` bytes) and the number of
    /// parity symbols; returns the layout and the parity payloads.
    pub fn encode(&mut self, data: &[&[u8]], n_parity: u32) -> (FrameLayout, Vec<Vec<u8>>) {
        let (l, cov) = self.layout.next(data.len() as u32, n_parity);
        for (i, d) in data.iter().enumerate() {
            let mut s = d.to_vec();
            s.resize(self.symbol_len, 0);
            self.payloads.insert(l.first + i as u64, s);
        }
        let oldest = self.layout.window().next().map_or(0, |w| w.first);
        self.payloads = self.payloads.split_off(&oldest);
        let mut parity = Vec::with_capacity(n_parity as usize);
        for k in 0..u64::from(n_parity) {
            let pid = l.parity_first + k;
            let mut p = vec![0u8; self.symbol_len];
            for &d in &cov {
                gf::axpy(&mut p, gf::cauchy(pid, d), &self.payloads[&d]);
            }
            parity.push(p);
        }
        (l, parity)
    }
}

/// A received parity symbol: its number and (payload mode) its bytes.
type ParitySymbol = (u64, Option<Vec<u8>>);

/// The decoder: received data and parity symbols in, lost data symbols recovered when the received
/// equations determine them. Works with payloads (bytes reconstructed) or without (the same
/// Most unknown data symbols one decode solves for (see [`Decoder::solve`]).
pub const MAX_UNKNOWNS: usize = 256;

/// elimination on the coefficients only: the simulator's recoverability check).
#[derive(Clone, Debug)]
pub struct Decoder {
    tau: u32,
    symbol_len: Option<usize>,
    layouts: BTreeMap<u64, FrameLayout>,
    /// Known data symbols (received or recovered), with payload in payload mode.
    known: BTreeMap<u64, Option<Vec<u8>>>,
    /// The symbols the known layouts name (`FrameLayout::span`) that are not known: what a solve's columns are drawn
    /// from, kept as symbols come and go (a solve looks up the few it needs, not every covered one).
    missing: BTreeSet<u64>,
    /// Parity symbols per frame.
    parity: BTreeMap<u64, Vec<ParitySymbol>>,
    /// Symbols recovered so far.
    pub recovered_total: u64,
    /// Solves that left older frames out to stay within [`MAX_UNKNOWNS`].
    pub capped_solves: u64,
}

impl Decoder {
    /// A decoder for delay `tau`; `symbol_len` Some(len) to work on payloads.
    pub fn new(tau: u32, symbol_len: Option<usize>) -> Self {
        Decoder {
            tau,
            symbol_len: symbol_len.map(|s| s.div_ceil(2) * 2),
            layouts: BTreeMap::new(),
            known: BTreeMap::new(),
            missing: BTreeSet::new(),
            parity: BTreeMap::new(),
            recovered_total: 0,
            capped_solves: 0,
        }
    }

    /// Learns a frame's layout (from any packet header that lists it).
    pub fn add_layout(&mut self, l: FrameLayout) {
        match self.layouts.insert(l.frame, l) {
            Some(old) if old == l => {}
            None => {
                let known = &self.known;
                self.missing.extend(l.span().filter(|d| !known.contains_key(d)));
            }
            // A frame's layout changed (a corrupt header): work the missing symbols out anew.
            Some(_) => {
                let known = &self.known;
                self.missing =
                    self.layouts.values().flat_map(|l| l.span()).filter(|d| !known.contains_key(d)).collect();
            }
        }
    }

    /// A data symbol arrived.
    pub fn add_data(&mut self, id: u64, payload: Option<&[u8]>) {
        let p = self.symbol_len.map(|len| {
            let mut v = payload.unwrap_or_default().to_vec();
            v.resize(len, 0);
            v
        });
        self.known.entry(id).or_insert(p);
        self.missing.remove(&id);
    }

    /// A parity symbol of frame `frame` arrived.
    pub fn add_parity(&mut self, frame: u64, id: u64, payload: Option<&[u8]>) {
        let p = self.symbol_len.map(|len| {
            let mut v = payload.unwrap_or_default().to_vec();
            v.resize(len, 0);
            v
        });
        let e = self.parity.entry(frame).or_default();
        if !e.iter().any(|x| x.0 == id) {
            e.push((id, p));
        }
    }

    /// Whether data symbol `id` is known (received or recovered).
    pub fn has(&self, id: u64) -> bool {
        self.known.contains_key(&id)
    }

    /// The payload of a known data symbol (payload mode).
    pub fn payload(&self, id: u64) -> Option<&[u8]> {
        self.known.get(&id).and_then(|p| p.as_deref())
    }

    /// Data symbols of `frame` not known yet (None if its layout is unknown).
    pub fn missing(&self, frame: u64) -> Option<u32> {
        let l = self.layouts.get(&frame)?;
        Some(l.data().filter(|d| !self.known.contains_key(d)).count() as u32)
    }

    /// Forgets frames older than `newest - 2·tau` (nothing newer than `newest` can refer to them).
    pub fn expire(&mut self, newest: u64) {
        let keep = newest.saturating_sub(2 * u64::from(self.tau));
        self.layouts = self.layouts.split_off(&keep);
        self.parity = self.parity.split_off(&keep);
        let first = self.layouts.values().next().map(|l| l.first);
        let Some(first) = first else {
            self.missing.clear();
            return;
        };
        self.known = self.known.split_off(&first);
        // Only the kept layouts' symbols can be missing. A stream's frames number their symbols in
        // order, so those all lie from `first` on; a kept layout below it (a corrupt header) has just
        // lost its known symbols below `first`, which are missing again.
        let low = self.layouts.values().map(|l| l.first).min().unwrap_or(first);
        self.missing = self.missing.split_off(&low);
        for l in self.layouts.values().filter(|l| l.first < first) {
            self.missing.extend(l.first..l.span().end.min(first));
        }
    }

    /// Solves the received equations; returns the data symbols newly recovered (in number order).
    /// The dense solve is cubic in the unknowns: a video frame has tens, but a 33 ms slot of a fast TCP
    /// flow (the baseline applied to TCP) can leave hundreds unknown across its window, so a system is
    /// cut at [`MAX_UNKNOWNS`] columns, newest frames kept (counted in `capped_solves`).
    pub fn solve(&mut self) -> Vec<u64> {
        // Equations: one per received parity symbol whose covered layouts are known and that involves
        // at least one unknown data symbol.
        let mut cols: BTreeMap<u64, usize> = BTreeMap::new();
        let mut rows: Vec<(u64, Vec<u64>, Option<Vec<u8>>)> = Vec::new();
        // Newest frames first; a system beyond MAX_UNKNOWNS columns leaves the older frames out.
        for (&f, ps) in self.parity.iter().rev() {
            let mut unknown: Vec<u64> = Vec::new();
            let (missing, layouts) = (&self.missing, &self.layouts);
            if !covered_ranges(self.tau, f, |g| layouts.get(&g).copied(), |r| unknown.extend(missing.range(r))) {
                continue;
            }
            if unknown.is_empty() {
                continue;
            }
            let new = unknown.iter().filter(|u| !cols.contains_key(u)).count();
            if cols.len() + new > MAX_UNKNOWNS {
                self.capped_solves += 1;
                break;
            }
            for u in &unknown {
                let n = cols.len();
                cols.entry(*u).or_insert(n);
            }
            // Payload mode: the right-hand sides take the known symbols out.
            let cov = if self.symbol_len.is_some() {
                covered(self.tau, f, |g| self.layouts.get(&g).copied()).unwrap_or_default()
            } else {
                Vec::new()
            };
            // Rows of one frame share their columns and any `unknown.len()` of them are independent
            // (Cauchy): more add no rank, only work (a slot of a fast TCP flow has thousands).
            for (pid, pay) in ps.iter().take(unknown.len()) {
                let rhs = pay.as_ref().map(|p| {
                    let mut r = p.clone();
                    for d in &cov {
                        if let Some(Some(v)) = self.known.get(d) {
                            gf::axpy(&mut r, gf::cauchy(*pid, *d), v);
                        }
                    }
                    r
                });
                rows.push((*pid, unknown.clone(), rhs));
            }
        }
        if rows.is_empty() {
            return Vec::new();
        }
        // Dense matrix over the unknowns (column order = symbol number order after renumbering).
        let ids: Vec<u64> = cols.keys().copied().collect();
        let index: BTreeMap<u64, usize> = ids.iter().enumerate().map(|(i, &d)| (d, i)).collect();
        let nc = ids.len();
        let mut m: Vec<Vec<u16>> = Vec::with_capacity(rows.len());
        let mut rhs: Vec<Option<Vec<u8>>> = Vec::with_capacity(rows.len());
        for (pid, unk, r) in rows {
            let mut row = vec![0u16; nc];
            for u in unk {
                row[index[&u]] = gf::cauchy(pid, u);
            }
            m.push(row);
            rhs.push(r);
        }
        // Reduced row echelon form.
        let mut pivots = Vec::new();
        let mut r = 0;
        for c in 0..nc {
            let Some(p) = (r..m.len()).find(|&i| m[i][c] != 0) else { continue };
            m.swap(r, p);
            rhs.swap(r, p);
            let s = gf::inv(m[r][c]);
            // The pivot row is zero left of `c` (those columns are eliminated, or zero in every row
            // left), and beyond its last non-zero entry: the row operations skip both stretches.
            let hi = m[r].iter().rposition(|&x| x != 0).map_or(c, |j| j + 1);
            for x in m[r][c..hi].iter_mut() {
                *x = gf::mul(*x, s);
            }
            if let Some(v) = rhs[r].as_mut() {
                gf::scale(v, s);
            }
            for i in 0..m.len() {
                if i != r && m[i][c] != 0 {
                    let f = m[i][c];
                    let (src, dst) = if i < r {
                        let (a, b) = m.split_at_mut(r);
                        (&b[0], &mut a[i])
                    } else {
                        let (a, b) = m.split_at_mut(i);
                        (&a[r], &mut b[0])
                    };
                    gf::addmul(&mut dst[c..hi], f, &src[c..hi]);
                    if rhs[r].is_some() {
                        let src = rhs[r].clone().unwrap_or_default();
                        if let Some(v) = rhs[i].as_mut() {
                            gf::axpy(v, f, &src);
                        }
                    }
                }
            }
            pivots.push((r, c));
            r += 1;
            if r == m.len() {
                break;
            }
        }
        // An unknown is determined iff its unit vector is a row of the reduced form.
        let mut out = Vec::new();
        for (row, c) in pivots {
            if m[row].iter().enumerate().all(|(j, &x)| j == c || x == 0) {
                let id = ids[c];
                self.known.insert(id, rhs[row].take());
                self.missing.remove(&id);
                out.push(id);
            }
        }
        self.recovered_total += out.len() as u64;
        out
    }
}

/// Tambur's redundancy policy: parity worth `parity_ratio` of the frame while any feedback of the
/// last `loss_memory` reported loss, none otherwise.
#[derive(Clone, Debug)]
pub struct RedundancyPolicy {
    cfg: TamburConfig,
    last_loss: Option<Instant>,
}

impl RedundancyPolicy {
    /// A policy that starts with no loss reported.
    pub fn new(cfg: TamburConfig) -> Self {
        RedundancyPolicy { cfg, last_loss: None }
    }

    /// A feedback report arrived at `now`; `loss` whether it reported any loss.
    pub fn on_feedback(&mut self, now: Instant, loss: bool) {
        if loss {
            self.last_loss = Some(self.last_loss.map_or(now, |t| t.max(now)));
        }
    }

    /// Parity symbols for a frame of `n` data symbols sent at `now`.
    pub fn parity_count(&self, now: Instant, n: u32) -> u32 {
        match self.last_loss {
            Some(t) if now.saturating_duration_since(t) <= self.cfg.loss_memory && n > 0 => {
                (f64::from(n) * self.cfg.parity_ratio).ceil() as u32
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests;
