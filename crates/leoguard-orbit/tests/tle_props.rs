//! Property tests of the TLE parser: any text gives satellites or an error, never a panic, and every
//! error names the line it is about.

use leoguard_orbit::tle::{parse_tle, tle_checksum};
use proptest::prelude::*;

const ISS: [&str; 3] = [
    "ISS (ZARYA)",
    "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927",
    "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Arbitrary text (control characters, non-ASCII, odd line counts) never panics.
    #[test]
    fn arbitrary_text_never_panics(text in "(?s).{0,400}") {
        let _ = parse_tle(&text, "file f.tle");
    }

    /// One column of line 1 or 2 changed to any printable ASCII, checksum repaired so the change reaches
    /// the element parser and the orbit checks: a satellite or an error naming the file, never a panic.
    #[test]
    fn edited_columns_never_panic(which in 1usize..3, col in 2usize..68, c in 0x20u8..0x7f) {
        let mut lines = ISS.map(str::to_string);
        let l = &mut lines[which];
        l.replace_range(col..col + 1, &(c as char).to_string());
        let sum = tle_checksum(l);
        l.replace_range(68..69, &sum.to_string());
        if let Err(e) = parse_tle(&lines.join("\n"), "file f.tle") {
            prop_assert!(e.to_string().contains("file f.tle"), "{e}");
        }
    }
}
