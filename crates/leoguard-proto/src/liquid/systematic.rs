//! Decoding a block with few source symbols missing without solving for all of RaptorQ's
//! intermediate symbols.
//!
//! RaptorQ (RFC 6330) is systematic and linear over GF(256), the same coefficients for every byte of
//! a symbol: repair symbol `e` of a block of K source symbols is `r_e = sum_i G[e][i] * s_i`. A
//! generator row `G[e]` depends on K and `e` only. The crate's decoder solves for the L (about K +
//! 10 %) intermediate symbols from every received symbol and then rebuilds the source, so a block
//! missing 5 % of its source costs about as much as one missing all of it. Here, with `M` the `m`
//! missing source symbols and `R` the received ones, each received repair symbol gives one equation
//! in the missing ones only:
//!
//! `r_e + sum_{i in R} G[e][i] * s_i = sum_{j in M} G[e][j] * s_j`
//!
//! `m` independent such rows are picked by elimination on the `m`-column coefficients (bytes, no
//! symbols), their left sides computed (`m * |R|` symbol multiply-adds), and the `m` x `m` system
//! inverted. The missing symbols are determined exactly when the crate's decoder can decode: the
//! received symbols fix the intermediate symbols if and only if they fix the source (the systematic
//! matrix is invertible), so both succeed and fail on the same inputs, and a solution is unique.
//!
//! The generator rows come from the crate itself: encoding the identity block (K symbols of K bytes,
//! symbol `i` all zero but byte `i`) makes repair symbol `e` equal to `G[e]`. That encoding is done
//! once per block size and kept (a few sizes, most recent first).

use raptorq::{ObjectTransmissionInformation, Octet, SourceBlockEncoder, Symbol};
use std::collections::HashMap;

/// Largest block (source symbols) decoded this way: its identity block takes K^2 bytes to encode.
pub(crate) const MAX_K: u32 = 1024;

/// Block sizes whose generator is kept.
const SIZES_KEPT: usize = 8;

/// Generator rows kept per block size (a row per distinct repair ESI seen; more are computed and
/// not kept, so bogus ESIs cannot grow the cache).
const ROWS_KEPT: usize = 1024;

/// The generator of one block size.
struct Generator {
    k: u32,
    /// Encoder of the identity block: its repair symbol `e` is row `G[e]`.
    enc: SourceBlockEncoder,
    rows: HashMap<u32, Box<[u8]>>,
}

impl Generator {
    fn new(k: u32) -> Generator {
        let n = k as usize;
        let mut identity = vec![0u8; n * n];
        for i in 0..n {
            identity[i * n + i] = 1;
        }
        // k <= MAX_K fits the u16 symbol size.
        let oti = ObjectTransmissionInformation::new((n * n) as u64, k as u16, 1, 1, 1);
        Generator { k, enc: SourceBlockEncoder::new(0, &oti, &identity), rows: HashMap::new() }
    }

    /// Row `G[esi]` (K coefficients) of a repair symbol (`esi >= k`).
    fn row(&mut self, esi: u32) -> Box<[u8]> {
        if let Some(r) = self.rows.get(&esi) {
            return r.clone();
        }
        let r: Box<[u8]> = self
            .enc
            .repair_packets(esi - self.k, 1)
            .pop()
            .map_or_else(|| vec![0; self.k as usize].into_boxed_slice(), |p| p.split().1.into_boxed_slice());
        if self.rows.len() < ROWS_KEPT {
            self.rows.insert(esi, r.clone());
        }
        r
    }
}

/// Block sizes that get a generator on their first block (see [`SystematicDecoder::takes`]).
const BUILD_AT_ONCE_K: u32 = 256;

/// Block sizes remembered as decoded lately.
const SIZES_SEEN: usize = 32;

/// Decodes blocks with few source symbols missing (module docs); keeps the generators of the last
/// few block sizes.
#[derive(Default)]
pub(crate) struct SystematicDecoder {
    /// Most recently used first.
    generators: Vec<Generator>,
    /// Sizes of the blocks lately offered without a generator, most recent last.
    seen: std::collections::VecDeque<u32>,
    /// Blocks decoded here (tests check that the tunnel's runs use this solver).
    #[cfg(test)]
    pub(crate) decoded: u64,
    /// Every block to the crate's decoder (tests compare the two solvers through the tunnel).
    #[cfg(test)]
    pub(crate) off: bool,
}

fn mul(a: u8, b: u8) -> u8 {
    (Octet::new(a) * Octet::new(b)).byte()
}

fn div(a: u8, b: u8) -> u8 {
    (Octet::new(a) / Octet::new(b)).byte()
}

/// `acc += c * x` over GF(256), symbol-wide.
fn fma(acc: &mut Symbol, x: &Symbol, c: u8) {
    match c {
        0 => {}
        1 => *acc += x,
        _ => acc.fused_addassign_mul_scalar(x, &Octet::new(c)),
    }
}

impl SystematicDecoder {
    /// Whether a block of `k` source symbols with `missing` of them lost is decoded here rather than by
    /// the crate's decoder (`docs/performance.md`, "FEC: the missing symbols only"). Its cost is about
    /// `missing * k` symbol multiply-adds (about 36 ns each at 1280 bytes here) plus about
    /// `missing^3` byte operations of the elimination (about 1.4 ns each); the crate's about 2.2-2.7 us
    /// per source symbol whatever is missing. Both grow with `missing`, so the rule is monotone: it
    /// takes a block while `missing * k + missing^3 / 32 <= 48 * k` (the estimate at most about 0.8x
    /// the crate's time; k = 235: up to 39 missing; k = 20: all of them).
    pub(crate) fn applies(k: u32, missing: u32) -> bool {
        let (k, m) = (u64::from(k), u64::from(missing));
        k <= u64::from(MAX_K) && m > 0 && m <= k && m * k + m * m * m / 32 <= 48 * k
    }

    /// Whether to decode this block here: it [`applies`](Self::applies), and its size is at most
    /// `BUILD_AT_ONCE_K`, has a generator or was offered lately. Building a generator costs 0.01-0.13
    /// ms up to k = 235 (a block decoded here with a fresh generator still takes 0.26-0.68x the
    /// crate's time) but 1.25 ms at k = 800 (1.12x with 40 missing), so a larger size gets one on its
    /// second block: sizes that never recur (blocks closed by time at a varying rate) cost no
    /// identity encoding.
    pub(crate) fn takes(&mut self, k: u32, missing: u32) -> bool {
        #[cfg(test)]
        if self.off {
            return false;
        }
        if !Self::applies(k, missing) {
            return false;
        }
        if k <= BUILD_AT_ONCE_K || self.generators.iter().any(|g| g.k == k) || self.seen.contains(&k) {
            return true;
        }
        if self.seen.len() == SIZES_SEEN {
            self.seen.pop_front();
        }
        self.seen.push_back(k);
        false
    }

    fn generator(&mut self, k: u32) -> &mut Generator {
        match self.generators.iter().position(|g| g.k == k) {
            Some(i) => {
                let g = self.generators.remove(i);
                self.generators.insert(0, g);
            }
            None => {
                self.generators.truncate(SIZES_KEPT - 1);
                self.generators.insert(0, Generator::new(k));
            }
        }
        &mut self.generators[0]
    }

    /// The missing source symbols of a block: `symbols` are its `k` source symbols (`None`: not
    /// received), all `t` bytes long, `repair` its received repair symbols (ESI >= `k`, `t` bytes).
    /// Returns each missing symbol with its index (none if none is missing), or `None` when the
    /// received symbols do not determine them (too few, or dependent: the crate's decoder fails on
    /// the same inputs).
    pub(crate) fn decode(
        &mut self,
        k: u32,
        t: usize,
        symbols: &mut [Option<Vec<u8>>],
        repair: &[(u32, Vec<u8>)],
    ) -> Option<Vec<(usize, Vec<u8>)>> {
        let missing: Vec<usize> = (0..k as usize).filter(|&i| symbols.get(i).is_none_or(Option::is_none)).collect();
        let m = missing.len();
        if m == 0 {
            return Some(Vec::new());
        }
        if repair.len() < m || k > MAX_K || symbols.len() < k as usize {
            return None;
        }
        let g = self.generator(k);
        // Pick m repair rows independent on the missing columns, in arrival order: each row's
        // coefficients on M are reduced against the rows kept so far (kept in echelon form).
        let mut chosen: Vec<(usize, Box<[u8]>)> = Vec::with_capacity(m);
        let mut echelon: Vec<(usize, Vec<u8>)> = Vec::with_capacity(m); // (pivot column, reduced row)
        for (n, (esi, _)) in repair.iter().enumerate() {
            if *esi < k {
                continue;
            }
            let row = g.row(*esi);
            let mut red: Vec<u8> = missing.iter().map(|&j| row[j]).collect();
            for (p, e) in &echelon {
                let c = red[*p];
                if c != 0 {
                    for (x, y) in red.iter_mut().zip(e) {
                        *x ^= mul(c, *y);
                    }
                }
            }
            if let Some(p) = red.iter().position(|&x| x != 0) {
                let inv = div(1, red[p]);
                red.iter_mut().for_each(|x| *x = mul(*x, inv));
                echelon.push((p, red));
                chosen.push((n, row));
                if chosen.len() == m {
                    break;
                }
            }
        }
        if chosen.len() < m {
            return None;
        }
        // B = G[chosen][M], inverted by Gauss-Jordan (it has full rank by construction).
        let mut b: Vec<Vec<u8>> = chosen.iter().map(|(_, row)| missing.iter().map(|&j| row[j]).collect()).collect();
        let mut inv: Vec<Vec<u8>> = (0..m).map(|r| (0..m).map(|c| u8::from(r == c)).collect()).collect();
        for col in 0..m {
            let p = (col..m).find(|&r| b[r][col] != 0)?;
            b.swap(col, p);
            inv.swap(col, p);
            let s = div(1, b[col][col]);
            b[col].iter_mut().for_each(|x| *x = mul(*x, s));
            inv[col].iter_mut().for_each(|x| *x = mul(*x, s));
            for r in 0..m {
                let c = b[r][col];
                if r != col && c != 0 {
                    for i in 0..m {
                        let (bv, iv) = (b[col][i], inv[col][i]);
                        b[r][i] ^= mul(c, bv);
                        inv[r][i] ^= mul(c, iv);
                    }
                }
            }
        }
        // The left sides: each chosen repair symbol plus the received source symbols' share of it.
        // Source symbol by source symbol, so each is read once into the m sums.
        let mut sums: Vec<Symbol> = chosen.iter().map(|(n, _)| Symbol::new(repair[*n].1.clone())).collect();
        if sums.iter().any(|s| s.len() != t) {
            return None;
        }
        for (i, slot) in symbols.iter_mut().enumerate().take(k as usize) {
            let Some(v) = slot.take() else { continue };
            if v.len() != t {
                *slot = Some(v);
                return None;
            }
            let x = Symbol::new(v);
            for (sum, (_, row)) in sums.iter_mut().zip(&chosen) {
                fma(sum, &x, row[i]);
            }
            *slot = Some(x.into_bytes());
        }
        // s_M = B^-1 * sums.
        let mut out = Vec::with_capacity(m);
        for (r, &j) in missing.iter().enumerate() {
            let mut acc = Symbol::zero(t);
            for (c, sum) in sums.iter().enumerate() {
                fma(&mut acc, sum, inv[r][c]);
            }
            out.push((j, acc.into_bytes()));
        }
        #[cfg(test)]
        {
            self.decoded += 1;
        }
        Some(out)
    }
}
