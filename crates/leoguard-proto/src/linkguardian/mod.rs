//! LinkGuardian (SIGCOMM'23; the SATGUARD paper's "LinkGuard" baseline): link-local retransmission
//! designed for datacenter links.
