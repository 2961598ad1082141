//! **Whether measured figures make physical sense** — the limits a link
//! measurement's figures must fall within before they count, defined once
//! for both ends: the agent checks the upload it received before it reports
//! it, the coordinator checks everything (the agent's upload figures too: a
//! keyless agent, or anyone answering on its port, can claim any figures).
//!
//! A figure outside these limits is not a slow or a fast link: it is a
//! transfer cut short, a timer that did not tick, or a lie. It is refused
//! with the reason, never written (a rate computed from a 1 µs window once
//! reached the `# found by` comment as tens of Gbit/s).

use super::measure::UpResult;

/// Shortest window a rate may be computed over, microseconds: defined
/// beside the meter that computes rates ([`super::measure::MIN_WINDOW_US`]),
/// which falls back to a stalled transfer's whole time below it.
pub use super::measure::MIN_WINDOW_US;

/// Fastest rate believed, Mbit/s: 1 Tbit/s.
///
/// The fastest Ethernet ports sold are 800 Gbit/s, and one TCP connection
/// reaches far less (loopback, a memory copy, tops out near 100 Gbit/s on
/// a server); a rate above 1 Tbit/s is arithmetic on a broken window.
pub const MAX_MBPS: f64 = 1_000_000.0;

/// Shortest round trip believed, ms: 1 µs.
///
/// Even over loopback a round trip is two writes, two reads and two
/// wake-ups, tens of microseconds; a sample below 1 µs (or zero, or
/// negative) is a clock fault, not a link.
pub const MIN_RTT_MS: f64 = 0.001;

/// Longest round trip believed, ms: 10 s.
///
/// A geostationary satellite hop is about 0.6 s, and the coordinator gives
/// up on a round trip after its handshake timeout (2 s by default); a
/// sample beyond 10 s is no link a cluster spans.
pub const MAX_RTT_MS: f64 = 10_000.0;

/// Checks one direction's receiver-side figures and returns the rate,
/// Mbit/s. `what` names the direction in the reason (`upload`,
/// `download`); `moved` is how many bytes the checker knows were sent (the
/// coordinator's count for the upload; the receiver's own total for its own
/// figures); `lasted_us` is how long the transfer can have lasted, as the
/// checker timed it, which the window cannot exceed.
pub fn check_transfer(what: &str, f: &UpResult, moved: u64, lasted_us: u64) -> Result<f64, String> {
    if f.bytes == 0 || f.window_bytes == 0 {
        return Err(format!(
            "{what}: no bytes in the measured window ({} received in all), so no rate",
            f.bytes
        ));
    }
    if f.window_bytes > f.bytes {
        return Err(format!(
            "{what}: {} bytes in the measured window but only {} in all",
            f.window_bytes, f.bytes
        ));
    }
    if f.bytes > moved {
        return Err(format!(
            "{what}: {} bytes counted but only {moved} were sent",
            f.bytes
        ));
    }
    if f.window_us < MIN_WINDOW_US {
        return Err(format!(
            "{what}: a rate from a {} µs window, under the {MIN_WINDOW_US} µs a rate needs \
             (timer and scheduling jitter would be most of it); the transfer was cut short",
            f.window_us
        ));
    }
    if f.window_us > lasted_us {
        return Err(format!(
            "{what}: a {} µs window, longer than the {lasted_us} µs the transfer lasted",
            f.window_us
        ));
    }
    let rate = f.mbps();
    if !rate.is_finite() || rate > MAX_MBPS {
        return Err(format!(
            "{what}: {rate:.0} Mbit/s is above the 1 Tbit/s no single connection reaches"
        ));
    }
    Ok(rate)
}

/// Checks the round-trip samples, ms: at least one, each a finite number
/// between [`MIN_RTT_MS`] and [`MAX_RTT_MS`].
pub fn check_rtts(samples: &[f64]) -> Result<(), String> {
    if samples.is_empty() {
        return Err("no round trip was timed".into());
    }
    for (i, &ms) in samples.iter().enumerate() {
        if !ms.is_finite() || !(MIN_RTT_MS..=MAX_RTT_MS).contains(&ms) {
            return Err(format!(
                "round trip {}: {ms} ms is outside {MIN_RTT_MS}..={MAX_RTT_MS} ms, no link's \
                 round trip (a clock fault)",
                i + 1
            ));
        }
    }
    Ok(())
}
