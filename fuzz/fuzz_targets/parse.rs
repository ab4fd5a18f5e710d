//! Feeds arbitrary bytes to every leoguard-wire parser (IPv6 packet and header, Hop-by-Hop header,
//! single leoguard option, UDP, Traffic Class helpers); whatever parses must emit and parse back to
//! the same value. The body is shared with the stable smoke test in crates/leoguard-wire/tests.
#![no_main]

use libfuzzer_sys::fuzz_target;

mod body {
    include!("../../crates/leoguard-wire/tests/fuzz_body/mod.rs");
}

fuzz_target!(|data: &[u8]| body::check(data));
