//! Feeds arbitrary bytes to LEOTP's header and datagram parsers (leoguard-wire `leotp`); whatever
//! parses must emit to the same bytes and parse back to the same value. The body is shared with the
//! stable smoke test crates/leoguard-wire/tests/leotp_fuzz_smoke.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;

mod body {
    include!("../../crates/leoguard-wire/tests/leotp_fuzz_body/mod.rs");
}

fuzz_target!(|data: &[u8]| body::check(data));
