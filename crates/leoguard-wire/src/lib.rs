//! leoguard-wire: packet formats (parse/emit with byte-exact test vectors, fuzzed parsers).
