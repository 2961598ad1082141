//! **Who is closed at a limit** — the rule the connection limit and the
//! liveness streams' limit share: the oldest of the source address that
//! holds the most, so a flood from one address (or a few) closes only its
//! own.

use std::net::IpAddr;

/// Which of the live connections (oldest first: each one's source address,
/// and whether it has sent its first line) to close for a newcomer at the
/// limit: among the source addresses holding the most connections, the
/// oldest connection that has not spoken yet, else the oldest. A real
/// coordinator holds one connection per agent and speaks at once, so it is
/// never the one closed while any address holds two, and a flood from a few
/// addresses costs only those addresses' own connections. `None` for none.
pub(super) fn victim(live: &[(IpAddr, bool)]) -> Option<usize> {
    let mut counts: std::collections::HashMap<IpAddr, usize> = Default::default();
    for (ip, _) in live {
        *counts.entry(*ip).or_default() += 1;
    }
    let most = counts.values().copied().max()?;
    let busiest = |i: &usize| counts[&live[*i].0] == most;
    let mut candidates = (0..live.len()).filter(busiest);
    let first = candidates.clone().next();
    candidates.find(|&i| !live[i].1).or(first)
}
