//! Feeds arbitrary bytes to the transport parser (leoguard's TCP over UDP) and its options area;
//! whatever parses must emit to the same bytes and parse back to the same value. The body is shared
//! with the stable smoke test crates/leoguard-wire/tests/transport_fuzz_smoke.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

mod body {
    include!("../../crates/leoguard-wire/tests/transport_fuzz_body/mod.rs");
}

fuzz_target!(|data: &[u8]| body::check(data));
