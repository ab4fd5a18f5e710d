//! leoguard-wire: packet formats (parse/emit with byte-exact test vectors, fuzzed parsers).
//!
//! SATGUARD carries HSeq, HAck and FSeq, 16 bits each, in IPv6 Hop-by-Hop options (SATGUARD §3.6);
//! LinkGuardian's sequence numbers and ACKs travel the same way; StarTCP's signals ride in leoguard's
//! own TCP packets as an experimental TCP option ([`startcp`]); LEOTP's 19-byte header is [`leotp`]. leoguard's own TCP travels over UDP in
//! the `transport` format (`leoguard-transport`). Every format is a validated `Repr`
//! with `parse(&[u8]) -> Result<_, WireError>` and `emit(&self, &mut [u8]) -> Result<usize, _>`;
//! parsers never panic on any input (STYLE.md rules 6-7). Byte layouts: docs/wire.md.

pub mod error;
pub mod hbh;
pub mod ipv6;
pub mod leotp;
pub mod options;
pub mod packet;
pub mod pcap;
pub mod startcp;
pub mod transport;
pub mod udp;

pub use error::{OptionAction, WireError};
pub use hbh::HbhRepr;
pub use ipv6::{
    is_delay_sensitive_tc, read_traffic_class, write_traffic_class, Ipv6Repr, DSCP_EF, IPV6_HEADER_LEN,
    NEXT_HEADER_HOP_BY_HOP, NEXT_HEADER_NONE, NEXT_HEADER_UDP, TC_DELAY_SENSITIVE,
};
pub use leotp::{LeotpHeader, LeotpPacket, LeotpType, LEOTP_HEADER_LEN, LEOTP_MSS, LEOTP_MTU};
pub use options::{
    LeoOption, LinkGuardianAck, LinkGuardianLoss, LinkGuardianSeq, SatguardFlow, SatguardHack, SatguardHop, BEAM_NONE,
};
pub use packet::{Ipv6Packet, HACK_HOP_LIMIT};
pub use pcap::PcapWriter;
pub use startcp::{StartcpOption, STARTCP_EXID};
pub use transport::{AckRepr, DataSegment, TlvOption, TlvOptions, TransportMessage, TransportPacket};
pub use udp::UdpPacket;
