use super::*;

#[test]
fn header_sizes_come_from_the_wire_format() {
    // docs/satguard.md and docs/wire.md: HSeq + FSeq options in 16 bytes, a HAck packet 56 bytes.
    assert_eq!(hbh_bytes(), 16);
    assert_eq!(hack_bytes(), 56);
}
