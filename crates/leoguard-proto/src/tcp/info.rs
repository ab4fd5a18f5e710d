//! A TCP_INFO-like snapshot of a sender ([`crate::tcp::TcpSender::info`]), in Linux's units
//! (`tcp_get_info`: windows in segments, times in microseconds), for scripts and telemetry.

/// Linux's congestion-avoidance states (`enum tcp_ca_state`, `icsk_ca_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    /// Nothing suspicious (`TCP_CA_Open`).
    Open = 0,
    /// SACKs, or retransmissions not yet acknowledged, without a reduction (`TCP_CA_Disorder`).
    Disorder = 1,
    /// A window reduction not caused by a loss episode (`TCP_CA_CWR`).
    Cwr = 2,
    /// Fast recovery (`TCP_CA_Recovery`).
    Recovery = 3,
    /// After a retransmission timeout (`TCP_CA_Loss`).
    Loss = 4,
}

/// What `getsockopt(TCP_INFO)` would report for the model's sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpInfo {
    /// `tcpi_ca_state`.
    pub ca_state: CaState,
    /// `tcpi_snd_cwnd`, segments.
    pub snd_cwnd: u64,
    /// `tcpi_snd_ssthresh`, segments (`TCP_INFINITE_SSTHRESH`, 0x7fffffff, while unset).
    pub snd_ssthresh: u64,
    /// `tcpi_snd_mss`, bytes.
    pub snd_mss: u64,
    /// `tcpi_unacked` (Linux `packets_out`): segments sent and not cumulatively acknowledged.
    pub unacked: u64,
    /// `tcpi_sacked` (`sacked_out`).
    pub sacked: u64,
    /// `tcpi_lost` (`lost_out`): segments marked lost, retransmitted or not, not yet delivered.
    pub lost: u64,
    /// `tcpi_retrans` (`retrans_out`): retransmissions outstanding.
    pub retrans: u64,
    /// `tcpi_total_retrans`.
    pub total_retrans: u64,
    /// `tcpi_reordering` (`tp->reordering`, segments; 3 until reordering is measured).
    pub reordering: u64,
    /// `tcpi_rtt`, microseconds (0 before a sample).
    pub rtt_us: u64,
    /// `tcpi_rttvar`, microseconds.
    pub rttvar_us: u64,
    /// `tcpi_min_rtt`, microseconds (`~0` before a sample, as Linux).
    pub min_rtt_us: u64,
    /// `tcpi_rto`, microseconds.
    pub rto_us: u64,
    /// `tcpi_pacing_rate`, bytes per second, when the controller paces.
    pub pacing_rate: Option<u64>,
    /// The controller's own state label (leoguard's, not TCP_INFO's: "slow_start", "startup", ...).
    pub cc_state: &'static str,
}
