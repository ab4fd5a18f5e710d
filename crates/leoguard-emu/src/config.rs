//! The data plane's configuration, written by the Python orchestrator as JSON: the hosts (namespaces
//! and their TUN devices), the flows to account, the capture, and the real-time settings.

use serde::{Deserialize, Serialize};

/// A real host: a flow end that is a network namespace.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct HostCfg {
    /// The scenario node it stands for.
    pub node: u32,
    /// Path of its network namespace (e.g. `/run/netns/NAME`).
    pub netns: String,
    /// Name of the TUN device to create in it.
    pub tun: String,
    /// Its addresses (IPv6 and IPv4, as text): packets to them are delivered to this host.
    pub addrs: Vec<String>,
}

/// A flow to account: packets from `src` to `dst` with protocol `proto` and destination port `port`
/// (its reverse direction: from `dst` to `src` with source port `port`). Port 0 matches any.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct FlowCfg {
    /// Scenario flow index.
    pub id: u32,
    /// Sender node.
    pub src: u32,
    /// Receiver node.
    pub dst: u32,
    /// IP protocol (6 TCP, 17 UDP, 58 ICMPv6, 1 ICMP).
    pub proto: u8,
    /// Destination port of the data direction (0: any).
    pub port: u16,
    /// Traffic Class the network entry writes into the flow's IPv6 packets, both directions (SATGUARD
    /// §3.5: operators mark delay-sensitive traffic), for software that does not mark its own.
    #[serde(default)]
    pub mark_tc: Option<u8>,
    /// A LEOTP flow (UDP: Data in the data direction, Interests in the reverse): the nodes that run a
    /// LEOTP mid node take its datagrams in (crate::leotp).
    #[serde(default)]
    pub leotp: bool,
}

/// Where to capture (the scenario's `[capture]`, nodes resolved) and where the pcap goes.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct CaptureCfg {
    /// Tapped nodes.
    pub nodes: Vec<u32>,
    /// Packets recorded at most (later ones are counted).
    pub max_packets: usize,
    /// Bytes kept of each packet.
    pub snaplen: u32,
    /// The pcap file written at the end.
    pub path: String,
}

fn default_spin_us() -> u64 {
    10_000
}
fn default_pool() -> usize {
    65_536
}
fn default_late_us() -> u64 {
    1_000
}

/// The data plane's configuration (written by the Python orchestrator).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct EmuConfig {
    /// Hosts.
    pub hosts: Vec<HostCfg>,
    /// Flows to account.
    #[serde(default)]
    pub flows: Vec<FlowCfg>,
    /// CPU to pin the data plane to.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// Spin (instead of sleeping) when the next event is this close.
    #[serde(default = "default_spin_us")]
    pub spin_us: u64,
    /// Buffer slots (packets the emulated network can hold at once).
    #[serde(default = "default_pool")]
    pub pool_packets: usize,
    /// A delivery later than this against its model time counts as the emulator falling behind.
    #[serde(default = "default_late_us")]
    pub late_us: u64,
    /// How long the bytes of a packet a per-hop scheme may retransmit are kept, ms.
    #[serde(default = "default_retain_ms")]
    pub retain_ms: u64,
    /// A packet capture at some nodes (`[capture]`): the real packets as they cross the tapped nodes'
    /// links, written as a pcap file at the end of the run.
    #[serde(default)]
    pub capture: Option<CaptureCfg>,
    /// Nice value of the data plane (-20: ordinary processes on its CPU get about 1 % of it).
    #[serde(default = "default_nice")]
    pub nice: i32,
    /// Segmentation offloads on the hosts' TUN devices (super-packets read and split, segments
    /// coalesced on write: `tunio`); off: one packet per read and write.
    #[serde(default = "default_offload")]
    pub offload: bool,
}

fn default_offload() -> bool {
    true
}

fn default_retain_ms() -> u64 {
    2_000
}

fn default_nice() -> i32 {
    -20
}
