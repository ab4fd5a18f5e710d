//! SATGUARD §3.4: the ground-side order-preserving buffer (per flow, by FSeq).
