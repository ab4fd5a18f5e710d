//! leoguard's real liquid-data tunnel (REFERENCE.md "Liquid data transport"): IP packets from a TUN
//! device are erasure-coded by the sans-IO `leoguard_proto::liquid` state machines, sealed with
//! XChaCha20-Poly1305 and carried over UDP; `leoguard-relay` is the lossy UDP stage used in tests and
//! the emulator. See docs/tunnel.md.

pub mod config;
pub mod crypto;
pub mod engine;
pub mod loss;
/// The OS calls (they live in leoguard-os, shared with the emulator).
pub use leoguard_os as sys;

/// A fresh sending session: wall-clock milliseconds in the high 48 bits of its id (so a restarted end's
/// session is larger than its previous one, which the peer requires), 16 random bits below, and 16
/// random bits of salt.
pub fn new_session() -> std::io::Result<crypto::Session> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| std::io::Error::other("system clock before 1970"))?
        .as_millis() as u64;
    let mut r = [0u8; 4];
    random_bytes(&mut r)?;
    let id = (ms << 16) | u64::from(u16::from_be_bytes([r[0], r[1]]));
    Ok(crypto::Session { id, salt: u16::from_be_bytes([r[2], r[3]]) })
}

/// Fill `buf` from the kernel's random source.
pub fn random_bytes(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}
