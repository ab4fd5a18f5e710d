//! 16-bit sequence numbers with serial-number arithmetic (RFC 1982): comparisons are meaningful for
//! numbers less than 2^15 apart, so HSeq/FSeq/LinkGuardian sequence numbers keep working across wrap.

/// A 16-bit sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seq16(pub u16);

impl Seq16 {
    /// The next number (wraps).
    #[inline]
    pub fn next(self) -> Seq16 {
        Seq16(self.0.wrapping_add(1))
    }

    /// `self + n` (wraps).
    #[inline]
    pub fn plus(self, n: u16) -> Seq16 {
        Seq16(self.0.wrapping_add(n))
    }

    /// Signed distance from `other` to `self` (positive when `self` is after `other`), in
    /// [-2^15, 2^15).
    #[inline]
    pub fn diff(self, other: Seq16) -> i32 {
        i32::from(self.0.wrapping_sub(other.0) as i16)
    }

    /// Whether `self` comes strictly after `other` (RFC 1982; undefined at exactly 2^15 apart, where
    /// this says false).
    #[inline]
    pub fn after(self, other: Seq16) -> bool {
        self.diff(other) > 0
    }

    /// Whether `self` comes strictly before `other`.
    #[inline]
    pub fn before(self, other: Seq16) -> bool {
        self.diff(other) < 0
    }

    /// Whether `self` lies in the inclusive window [`lo`, `hi`] taken forwards from `lo`.
    #[inline]
    pub fn within(self, lo: Seq16, hi: Seq16) -> bool {
        self.0.wrapping_sub(lo.0) <= hi.0.wrapping_sub(lo.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_survives_wrap() {
        assert!(Seq16(1).after(Seq16(65_535)));
        assert!(Seq16(65_535).before(Seq16(3)));
        assert_eq!(Seq16(2).diff(Seq16(65_534)), 4);
        assert_eq!(Seq16(65_534).diff(Seq16(2)), -4);
        assert_eq!(Seq16(65_535).next(), Seq16(0));
        assert!(Seq16(0).within(Seq16(65_530), Seq16(5)));
        assert!(!Seq16(6).within(Seq16(65_530), Seq16(5)));
        assert!(Seq16(100).after(Seq16(100 + 32_767 + 2)), "more than 2^15 apart reads the other way");
    }
}
