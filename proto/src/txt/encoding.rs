//! **Encoding caps as TXT schema v1**: [`encode`] and the wire forms of its
//! pairs. The decoder is its sibling `decoding`; the tests (`tests.rs`) hold
//! the two against each other.

use super::error::TxtError;
use super::error::{caps_error, quote};
use super::schema::{
    device_key, AGENT_PORT_KEY, AGENT_VERSION_KEY, ARCH_KEY, CKPT_KEY, CLUSTER_KEY, CORES_KEY,
    DISK_KEY, GFLOPS_KEY, ID_KEY, INCARNATION_KEY, IO_KEY, MAX_RECORD_BYTES, MAX_STRING_BYTES,
    OS_KEY, RAM_FREE_KEY, RAM_KEY, SHORT_NAME_BYTES, SSH_KEY, TXTVERS_KEY, TXT_VERSION,
    WORKER_HELD_KEY, WORKER_KEY,
};
use crate::caps::{limits, Device, DeviceInfo, NodeCaps};
use std::fmt;

/// Encodes caps as TXT schema v1 `(key, value)` pairs in announcement order,
/// the order of [`KEYS`](super::KEYS): `txtvers` first, then `id`, `inc`,
/// `agent`, `worker`, `ssh`, `cluster`, `os`, `arch`, `cores`, `ram`,
/// `ramfree`, `disk`, `ckpt`, `gflops`, `io`, `dev0`..`devN`, `ver`.
///
/// Empty strings (`id`, `os`, `arch`, `ver`) and an absent `cluster` or
/// `ckpt` are left out, and so are `agent`, `worker` and `ssh` when
/// unknown. The
/// SRV record, not TXT, carries the worker's port and the host name, so
/// neither appears here (`worker_port` is not encoded).
///
/// Every string stays within [`MAX_STRING_BYTES`]: device names and the
/// descriptive `os`, `arch`, `ver` are cut on a character boundary, and `ckpt`
/// is left out when it does not fit. The record stays within
/// [`MAX_RECORD_BYTES`] by giving up detail in this order until it fits:
///
/// 1. `ckpt` (the handshake reports it);
/// 2. device names cut to [`SHORT_NAME_BYTES`];
/// 3. device names dropped (the label and memory are what planning needs);
/// 4. whole devices, least useful first: `cpu` (already told by `cores`),
///    then `ane`, then labels this build does not know, then accelerators
///    its build cannot target, then the remaining accelerators by ascending
///    memory. The survivors keep their order and are renumbered `dev0`...
///
/// With the numeric fields bounded by [`NodeCaps::validate`], a record with no
/// devices always fits, so the loop ends. An 8-GPU box keeps every GPU with
/// its full name (see the tests).
///
/// Errors: caps that fail [`NodeCaps::validate`], a `cluster` or device label
/// too long to fit in one string (a cut cluster name would never match), a
/// label containing `,` (the `devN` field separator).
pub fn encode(caps: &NodeCaps) -> Result<Vec<(String, String)>, TxtError> {
    caps.validate()
        .map_err(|e| caps_error(e, &(0..caps.devices.len()).collect::<Vec<_>>()))?;

    let mut head: Vec<(String, String)> = vec![(TXTVERS_KEY.into(), TXT_VERSION.into())];
    // Descriptive strings: left out when empty, cut to fit one TXT string.
    let push_str = |out: &mut Vec<(String, String)>, key: &str, v: &str| {
        if !v.is_empty() {
            let room = MAX_STRING_BYTES - pair_overhead(key);
            out.push((key.into(), cut(v, room).into()));
        }
    };
    push_str(&mut head, ID_KEY, &caps.id);
    if let Some(inc) = &caps.incarnation {
        head.push((INCARNATION_KEY.into(), inc.clone()));
    }
    if let Some(port) = caps.agent_port {
        head.push((AGENT_PORT_KEY.into(), port.to_string()));
    }
    if let Some(up) = caps.worker_listening {
        head.push((WORKER_KEY.into(), if up { "1" } else { "0" }.into()));
    }
    if let Some(held) = &caps.worker_held_by {
        push_str(&mut head, WORKER_HELD_KEY, held);
    }
    if caps.ssh_listening.is_some() {
        // Validated above: a port exactly when one listens; 0 says none.
        head.push((SSH_KEY.into(), caps.ssh_port.unwrap_or(0).to_string()));
    }
    if let Some(cluster) = &caps.cluster {
        let room = MAX_STRING_BYTES - pair_overhead(CLUSTER_KEY);
        if cluster.len() > room {
            return Err(TxtError::DoesNotFit {
                key: CLUSTER_KEY.into(),
                why: format!(
                    "the cluster name is {} bytes; at most {room} fit in one TXT string",
                    cluster.len(),
                ),
            });
        }
        head.push((CLUSTER_KEY.into(), cluster.clone()));
    }
    push_str(&mut head, OS_KEY, &caps.os);
    push_str(&mut head, ARCH_KEY, &caps.arch);
    head.push((CORES_KEY.into(), caps.cores.to_string()));
    head.push((RAM_KEY.into(), caps.ram_total.to_string()));
    head.push((RAM_FREE_KEY.into(), caps.ram_avail.to_string()));
    head.push((DISK_KEY.into(), caps.disk_free.to_string()));
    let ckpt = caps
        .ckpt_dir
        .as_ref()
        .filter(|c| pair_overhead(CKPT_KEY) + c.len() <= MAX_STRING_BYTES)
        .map(|c| (CKPT_KEY.to_string(), c.clone()));
    let tail = [
        (GFLOPS_KEY.to_string(), fmt_float(caps.gflops)),
        (IO_KEY.to_string(), fmt_float(caps.io_mbps)),
    ];
    let mut ver = Vec::new();
    push_str(&mut ver, AGENT_VERSION_KEY, &caps.version);

    // Devices: check labels once, then build with the current name policy.
    for (i, d) in caps.devices.iter().enumerate() {
        if d.device.contains(',') {
            return Err(TxtError::DoesNotFit {
                key: device_key(i),
                why: format!(
                    "device label {} contains `,`, the devN field separator",
                    quote(d.device.as_bytes())
                ),
            });
        }
        // The longest device key: the highest index.
        let fixed = device_value(d, "").len() + pair_overhead(&device_key(limits::MAX_DEVICES - 1));
        if fixed > MAX_STRING_BYTES {
            return Err(TxtError::DoesNotFit {
                key: device_key(i),
                why: format!(
                    "device label is {} bytes; labels are short words like `cuda`",
                    d.device.len()
                ),
            });
        }
    }
    let mut kept: Vec<usize> = (0..caps.devices.len()).collect();
    let mut name_limit = usize::MAX;
    let mut with_ckpt = ckpt.is_some();
    loop {
        let mut out = head.clone();
        if with_ckpt {
            out.extend(ckpt.clone());
        }
        out.extend(tail.iter().cloned());
        for (n, &i) in kept.iter().enumerate() {
            let d = &caps.devices[i];
            let key = device_key(n);
            let room = MAX_STRING_BYTES - pair_overhead(&key) - device_value(d, "").len();
            let name = cut(&d.name, room.min(name_limit));
            out.push((key, device_value(d, name)));
        }
        out.extend(ver.iter().cloned());
        let size = wire_len(&out);
        if size <= MAX_RECORD_BYTES {
            return Ok(out);
        }
        if with_ckpt {
            tracing::debug!(size, "TXT record too large: leaving out ckpt");
            with_ckpt = false;
        } else if name_limit > SHORT_NAME_BYTES {
            tracing::debug!(size, "TXT record too large: cutting device names");
            name_limit = SHORT_NAME_BYTES;
        } else if name_limit > 0 {
            tracing::debug!(size, "TXT record too large: dropping device names");
            name_limit = 0;
        } else if let Some(pos) = least_useful(caps, &kept) {
            tracing::debug!(size, device = %caps.devices[kept[pos]].device,
                "TXT record too large: leaving out a device (the handshake lists it)");
            kept.remove(pos);
        } else {
            // Unreachable with validated caps (see the doc comment); refuse
            // rather than announce a record that fragments.
            return Err(TxtError::Record(format!(
                "{size} bytes even without devices; at most {MAX_RECORD_BYTES}"
            )));
        }
    }
}

/// Bytes a TXT string spends on `key` before its value: the key and `=`.
fn pair_overhead(key: &str) -> usize {
    key.len() + 1
}

/// The TXT RDATA size of `pairs`: each string plus its length byte.
pub fn wire_len(pairs: &[(String, String)]) -> usize {
    pairs.iter().map(|(k, v)| 1 + k.len() + 1 + v.len()).sum()
}

/// `key=value` strings, as `avahi-publish` takes them on its command line.
pub fn to_strings(pairs: &[(String, String)]) -> Vec<String> {
    pairs.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// The TXT RDATA wire form: each string preceded by its length byte.
pub fn to_rdata(pairs: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(wire_len(pairs));
    for s in to_strings(pairs) {
        // encode() keeps every string within 255 bytes; cut defensively for
        // hand-built pairs rather than emit a corrupt length.
        let b = &s.as_bytes()[..s.len().min(MAX_STRING_BYTES)];
        out.push(b.len() as u8);
        out.extend_from_slice(b);
    }
    out
}

fn device_value(d: &DeviceInfo, name: &str) -> String {
    format!(
        "{},{},{},{},{},{}",
        d.device,
        d.mem_bytes,
        u8::from(d.unified),
        u8::from(d.available),
        fmt_float(d.gflops),
        name
    )
}

/// Decimal with at most one fractional digit: `410.5`, `0`, `1800`. Rust's
/// float `Display` never uses exponents, and rounding first keeps tiny values
/// from printing hundreds of zeros.
fn fmt_float(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    format!("{}", if r == 0.0 { 0.0 } else { r })
}

/// The prefix of `s` of at most `max` bytes that ends on a char boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Index into `kept` of the device to leave out first (see [`encode`]).
fn least_useful(caps: &NodeCaps, kept: &[usize]) -> Option<usize> {
    let rank = |d: &DeviceInfo| -> (u8, u64) {
        let class = match d.parsed() {
            Some(Device::Cpu) => 0,
            Some(Device::Ane) => 1,
            None => 2,
            Some(_) if !d.available => 3,
            Some(_) => 4,
        };
        (class, d.mem_bytes)
    };
    // Ties go to the later device, so the first GPU of a row of equals stays.
    kept.iter()
        .enumerate()
        .rev()
        .min_by_key(|(_, &i)| rank(&caps.devices[i]))
        .map(|(pos, _)| pos)
}

/// Shows encoded pairs as `k=v k=v ...` for logs.
pub struct TxtPairs<'a>(pub &'a [(String, String)]);

impl fmt::Display for TxtPairs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}
