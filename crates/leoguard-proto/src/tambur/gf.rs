//! Arithmetic in GF(2^16) with log/exp tables, and Cauchy coefficients.
//!
//! Tambur (NSDI'23 §5) computes over GF(2^32) in 256-byte stripes; we use GF(2^16) (two-byte words):
//! the field only has to hold distinct Cauchy points for the symbols of one decoding window
//! (`2·tau + 1` frames), and 32 768 points per side is far above what a window of video frames or
//! 33 ms time slots holds. Any square submatrix of a Cauchy matrix is invertible over any field, so
//! the choice of field does not change which loss patterns one parity block can recover.

use std::sync::OnceLock;

/// Primitive polynomial x^16 + x^12 + x^3 + x + 1 (a standard choice for GF(2^16)).
const POLY: u32 = 0x1_100B;
/// Multiplicative group order.
const ORDER: usize = 65_535;

struct Tables {
    exp: Vec<u16>,
    log: Vec<u16>,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut exp = vec![0u16; 2 * ORDER];
        let mut log = vec![0u16; ORDER + 1];
        let mut x: u32 = 1;
        for (i, e) in exp.iter_mut().enumerate().take(ORDER) {
            *e = x as u16;
            log[x as usize] = i as u16;
            x <<= 1;
            if x & 0x1_0000 != 0 {
                x ^= POLY;
            }
        }
        for i in ORDER..2 * ORDER {
            exp[i] = exp[i - ORDER];
        }
        Tables { exp, log }
    })
}

/// a · b.
#[inline]
pub fn mul(a: u16, b: u16) -> u16 {
    if a == 0 || b == 0 {
        return 0;
    }
    let t = tables();
    t.exp[t.log[a as usize] as usize + t.log[b as usize] as usize]
}

/// 1 / a (a != 0; `inv(0)` returns 0, which callers never use as a pivot).
#[inline]
pub fn inv(a: u16) -> u16 {
    if a == 0 {
        return 0;
    }
    let t = tables();
    t.exp[ORDER - t.log[a as usize] as usize]
}

/// Half of the field: parity symbols take Cauchy points x in [0, 2^15), data symbols y in [2^15, 2^16).
pub const HALF: u64 = 1 << 15;

/// The Cauchy coefficient 1 / (x_p + y_d) of data symbol `data` in parity symbol `parity` (global
/// symbol numbers; the points wrap every 2^15 symbols, so a window must hold fewer than that).
#[inline]
pub fn cauchy(parity: u64, data: u64) -> u16 {
    let x = (parity % HALF) as u16;
    let y = (HALF + data % HALF) as u16;
    inv(x ^ y)
}

/// dst ^= c · src over field elements (slices of equal length).
pub fn addmul(dst: &mut [u16], c: u16, src: &[u16]) {
    if c == 0 {
        return;
    }
    let t = tables();
    let lc = t.log[c as usize] as usize;
    for (d, &s) in dst.iter_mut().zip(src) {
        if s != 0 {
            *d ^= t.exp[lc + t.log[s as usize] as usize];
        }
    }
}

/// dst ^= c · src over two-byte little-endian words (both of even, equal length).
pub fn axpy(dst: &mut [u8], c: u16, src: &[u8]) {
    if c == 0 {
        return;
    }
    for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
        let v = mul(c, u16::from_le_bytes([s[0], s[1]]));
        let o = u16::from_le_bytes([d[0], d[1]]) ^ v;
        d.copy_from_slice(&o.to_le_bytes());
    }
}

/// v *= c over two-byte words.
pub fn scale(v: &mut [u8], c: u16) {
    for d in v.chunks_exact_mut(2) {
        let o = mul(c, u16::from_le_bytes([d[0], d[1]]));
        d.copy_from_slice(&o.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_axioms_on_samples() {
        // x · x^-1 = 1 for every nonzero element; distributivity on a grid of samples.
        for a in 1..=u16::MAX {
            assert_eq!(mul(a, inv(a)), 1, "a = {a}");
        }
        for a in (0..=u16::MAX).step_by(997) {
            for b in (0..=u16::MAX).step_by(1009) {
                let c = 0x1234u16;
                assert_eq!(mul(a, b ^ c), mul(a, b) ^ mul(a, c));
                assert_eq!(mul(a, b), mul(b, a));
            }
        }
        // Hand-checked: x · x^15 = x^16 = x^12 + x^3 + x + 1.
        assert_eq!(mul(2, 0x8000), 0x100B);
    }
}
