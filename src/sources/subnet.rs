//! **Subnet scan** — concurrent TCP connects across a CIDR block.

/// Most TCP connects in flight at once during a scan (`scan_concurrency`
/// overrides it). A /16 at 4096 in flight costs 16 rounds of `timeout_ms`
/// against silent hosts; the open-file soft limit is raised to fit.
pub const DEFAULT_SCAN_CONCURRENCY: usize = 4096;
