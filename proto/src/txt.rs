//! **TXT schema v1** — how an agent's caps ride in its `_rlx._tcp` DNS-SD TXT
//! record, and how a coordinator reads them back. One encoder, one decoder,
//! tested against each other and against hand-written bytes.
//!
//! ```text
//! txtvers=1  id=5f0c1d2e3a4b5c6d  os=linux  arch=x86_64  cores=32
//! ram=137438953472  ramfree=120000000000  disk=900000000000
//! ckpt=/data/models  gflops=410.5  io=1800
//! dev0=cuda,25769803776,0,1,0,NVIDIA GeForce RTX 4090  ver=0.1.0
//! ```
//!
//! The full table, and how to announce a node by hand with `avahi-publish`, is
//! in `docs/protocol.md`. The rules this module enforces:
//!
//! - `txtvers=1` comes first (RFC 6763 §6.7); a record without it, or with
//!   another version, is refused.
//! - Each string is at most 255 bytes (RFC 6763 §6.1) and the whole record at
//!   most [`MAX_RECORD_BYTES`], so it fits one Ethernet frame. When it would
//!   not, [`encode`] gives up detail in a fixed order (see [`encode`]).
//! - Keys are case-insensitive and only the first of a repeated key counts
//!   (RFC 6763 §6.4); unknown keys are ignored so newer agents keep working.
//! - A value that does not parse, or that [`NodeCaps::validate`] finds absurd,
//!   refuses the whole announcement with a [`TxtError`] naming the key. The
//!   caller adds the host name when it reports it.

use crate::caps::{limits, CapsError, Device, DeviceInfo, NodeCaps};
use std::collections::HashMap;
use std::fmt;

/// The schema version this build writes and reads (`txtvers`).
pub const TXT_VERSION: &str = "1";

/// RFC 6763 §6.1: each TXT string is preceded by a one-byte length, so it
/// holds at most 255 bytes of `key=value`.
pub const MAX_STRING_BYTES: usize = 255;

/// Largest record [`encode`] produces, counting each string's length byte
/// (the TXT RDATA size). 1300 bytes leaves room in a 1500-byte Ethernet frame
/// for the IP/UDP/DNS headers and the PTR, SRV and A records that travel with
/// it; measured: a 1.5 KB TXT went out IP-fragmented, which lossy Wi-Fi drops.
pub const MAX_RECORD_BYTES: usize = 1300;

/// Largest record [`decode`] reads. RFC 6762 §17 caps an mDNS packet at 9000
/// bytes, so no real TXT is larger; past this the input is not a record but
/// an attack on the decoder's memory.
pub const MAX_DECODE_BYTES: usize = 9000;

/// First step when device names crowd the record: each name is cut to this
/// many bytes. Enough for "NVIDIA GeForce RTX 4090" and "AMD Radeon PRO
/// W7900"; the handshake carries the full names anyway.
pub const SHORT_NAME_BYTES: usize = 24;

/// Why a TXT record could not be read or written. Every variant names the TXT
/// key at fault (see [`TxtError::key`]) so that a report can say
/// "`gpu-a.local`: TXT key `cores`: ...".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TxtError {
    /// No `txtvers`: not an rlx TXT record (or a very old one).
    #[error("no `txtvers` key: not a TXT schema v1 record (expected `txtvers=1` first)")]
    MissingVersion,
    /// A `txtvers` this build does not read.
    #[error("TXT key `txtvers` = {0}: this build reads only `txtvers=1`; upgrade rlx-discover")]
    UnsupportedVersion(String),
    /// A key the caps cannot do without.
    #[error("TXT key `{key}` is missing: {why}")]
    Missing {
        /// The TXT key.
        key: String,
        /// Why it is needed.
        why: String,
    },
    /// A value that does not parse (`cores=abc`, `ram=-5`, a short `devN`).
    #[error("TXT key `{key}` = {value}: {why}")]
    Invalid {
        /// The TXT key (`cores`, `dev3`).
        key: String,
        /// The value as received, quoted and cut to 40 characters.
        value: String,
        /// What was expected.
        why: String,
    },
    /// A value that parses but cannot be true (10^18 bytes of RAM, NaN).
    #[error("TXT key `{key}` = {value} is not plausible: {why}")]
    Absurd {
        /// The TXT key.
        key: String,
        /// The value as received.
        value: String,
        /// What the limit is.
        why: String,
    },
    /// The record is larger than [`MAX_DECODE_BYTES`], or its wire form is cut.
    #[error("TXT record: {0}")]
    Record(String),
    /// [`encode`]: a value that no shortening can fit in 255 bytes.
    #[error("TXT key `{key}` cannot be announced: {why}")]
    DoesNotFit {
        /// The TXT key.
        key: String,
        /// What to change.
        why: String,
    },
}

impl TxtError {
    /// The TXT key this error is about, if it is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            TxtError::MissingVersion | TxtError::UnsupportedVersion(_) => Some("txtvers"),
            TxtError::Missing { key, .. }
            | TxtError::Invalid { key, .. }
            | TxtError::Absurd { key, .. }
            | TxtError::DoesNotFit { key, .. } => Some(key),
            TxtError::Record(_) => None,
        }
    }
}

// ---------------------------------------------------------------- encoding

/// Encodes caps as TXT schema v1 `(key, value)` pairs in announcement order:
/// `txtvers` first, then `id`, `cluster`, `os`, `arch`, `cores`, `ram`,
/// `ramfree`, `disk`, `ckpt`, `gflops`, `io`, `dev0`..`devN`, `ver`.
///
/// Empty strings (`id`, `os`, `arch`, `ver`) and an absent `cluster` or
/// `ckpt` are left out. The SRV record, not TXT, carries the port and the host
/// name, so neither appears here.
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

    let mut head: Vec<(String, String)> = vec![("txtvers".into(), TXT_VERSION.into())];
    // Descriptive strings: left out when empty, cut to fit one TXT string.
    let push_str = |out: &mut Vec<(String, String)>, key: &str, v: &str| {
        if !v.is_empty() {
            let room = MAX_STRING_BYTES - key.len() - 1;
            out.push((key.into(), cut(v, room).into()));
        }
    };
    push_str(&mut head, "id", &caps.id);
    if let Some(cluster) = &caps.cluster {
        if "cluster=".len() + cluster.len() > MAX_STRING_BYTES {
            return Err(TxtError::DoesNotFit {
                key: "cluster".into(),
                why: format!(
                    "the cluster name is {} bytes; at most {} fit in one TXT string",
                    cluster.len(),
                    MAX_STRING_BYTES - "cluster=".len()
                ),
            });
        }
        head.push(("cluster".into(), cluster.clone()));
    }
    push_str(&mut head, "os", &caps.os);
    push_str(&mut head, "arch", &caps.arch);
    head.push(("cores".into(), caps.cores.to_string()));
    head.push(("ram".into(), caps.ram_total.to_string()));
    head.push(("ramfree".into(), caps.ram_avail.to_string()));
    head.push(("disk".into(), caps.disk_free.to_string()));
    let ckpt = caps
        .ckpt_dir
        .as_ref()
        .filter(|c| "ckpt=".len() + c.len() <= MAX_STRING_BYTES)
        .map(|c| ("ckpt".to_string(), c.clone()));
    let tail = [
        ("gflops".to_string(), fmt_float(caps.gflops)),
        ("io".to_string(), fmt_float(caps.io_mbps)),
    ];
    let mut ver = Vec::new();
    push_str(&mut ver, "ver", &caps.version);

    // Devices: check labels once, then build with the current name policy.
    for (i, d) in caps.devices.iter().enumerate() {
        if d.device.contains(',') {
            return Err(TxtError::DoesNotFit {
                key: format!("dev{i}"),
                why: format!(
                    "device label {} contains `,`, the devN field separator",
                    quote(d.device.as_bytes())
                ),
            });
        }
        let fixed = device_value(d, "").len() + "devNN=".len();
        if fixed > MAX_STRING_BYTES {
            return Err(TxtError::DoesNotFit {
                key: format!("dev{i}"),
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
            let key = format!("dev{n}");
            let room = MAX_STRING_BYTES - key.len() - 1 - device_value(d, "").len();
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

// ---------------------------------------------------------------- decoding

/// The keys of schema v1 other than `devN`.
const KEYS: [&str; 13] = [
    "txtvers", "id", "cluster", "os", "arch", "cores", "ram", "ramfree", "disk", "ckpt", "gflops",
    "io", "ver",
];

/// Decodes a TXT record given as its strings (`key=value` bytes, in wire
/// order), e.g. `&[b"txtvers=1".as_slice(), b"cores=8"]`, a `Vec<Vec<u8>>`
/// from [`split_rdata`], or [`strings_of`] an mdns-sd `TxtProperties`.
///
/// Fields the TXT schema does not carry (`hostname`, `addr`) are left empty
/// for the caller to fill from the SRV record. `cores` is required: caps
/// without it are not valid caps ([`NodeCaps::validate`]) and could not be
/// planned; every other key is optional and defaults to 0 / empty
/// ("unknown").
///
/// `devN` keys are read for N below [`limits::MAX_DEVICES`], in index order;
/// gaps are allowed; others (`dev64`, `dev01`) are ignored like any unknown
/// key, which bounds the work a hostile record can cause.
pub fn decode<S: AsRef<[u8]>>(strings: &[S]) -> Result<NodeCaps, TxtError> {
    let total: usize = strings.iter().map(|s| 1 + s.as_ref().len()).sum();
    if total > MAX_DECODE_BYTES {
        return Err(TxtError::Record(format!(
            "{total} bytes is larger than any mDNS packet can carry ({MAX_DECODE_BYTES})"
        )));
    }

    // First occurrence of each key we know, lowercased (RFC 6763 §6.4).
    let mut fields: HashMap<String, Option<&[u8]>> = HashMap::new();
    for s in strings {
        let s = s.as_ref();
        // RFC 6763 §6.4: an empty string or one starting with `=` carries
        // nothing and is silently ignored.
        if s.is_empty() || s[0] == b'=' {
            continue;
        }
        let (k, v) = match s.iter().position(|&b| b == b'=') {
            Some(p) => (&s[..p], Some(&s[p + 1..])),
            None => (s, None),
        };
        // Keys are printable US-ASCII (§6.4); anything else is not ours.
        if !k.iter().all(|b| (0x20..=0x7e).contains(b)) {
            continue;
        }
        let key = String::from_utf8_lossy(k).to_ascii_lowercase();
        if !(KEYS.contains(&key.as_str()) || dev_index(&key).is_some()) {
            continue;
        }
        fields.entry(key).or_insert(v);
    }

    match fields.get("txtvers") {
        None => return Err(TxtError::MissingVersion),
        Some(Some(v)) if *v == TXT_VERSION.as_bytes() => {}
        Some(v) => return Err(TxtError::UnsupportedVersion(quote(v.unwrap_or_default()))),
    }

    let text = |key: &str| -> Result<String, TxtError> {
        match fields.get(key) {
            None | Some(None) => Ok(String::new()),
            Some(Some(v)) => std::str::from_utf8(v)
                .map(str::to_string)
                .map_err(|_| invalid(key, v, "not UTF-8 text")),
        }
    };
    let int = |key: &str| -> Result<u64, TxtError> {
        match fields.get(key) {
            None => Ok(0),
            Some(v) => parse_u64(key, v.unwrap_or_default()),
        }
    };
    let float = |key: &str| -> Result<f64, TxtError> {
        match fields.get(key) {
            None => Ok(0.0),
            Some(v) => parse_f64(key, v.unwrap_or_default()),
        }
    };

    let mut caps = NodeCaps {
        id: text("id")?,
        os: text("os")?,
        arch: text("arch")?,
        version: text("ver")?,
        cluster: fields
            .contains_key("cluster")
            .then(|| text("cluster"))
            .transpose()?,
        ckpt_dir: fields
            .contains_key("ckpt")
            .then(|| text("ckpt"))
            .transpose()?,
        ram_total: int("ram")?,
        ram_avail: int("ramfree")?,
        disk_free: int("disk")?,
        gflops: float("gflops")?,
        io_mbps: float("io")?,
        ..NodeCaps::default()
    };
    // DESIGN.md makes every key but `txtvers` optional: a record without
    // `cores` decodes with 0, which NodeCaps reads as "unknown".
    let cores = int("cores")?;
    if cores > u64::from(limits::MAX_CORES) {
        return Err(TxtError::Absurd {
            key: "cores".into(),
            value: cores.to_string(),
            why: format!("expected at most {} logical cores", limits::MAX_CORES),
        });
    }
    caps.cores = cores as u32;

    let mut devs: Vec<(usize, &str)> = fields
        .keys()
        .filter_map(|k| dev_index(k).map(|i| (i, k.as_str())))
        .collect();
    devs.sort_unstable();
    let mut dev_keys = Vec::with_capacity(devs.len());
    for (i, key) in devs {
        caps.devices
            .push(parse_device(key, fields[key].unwrap_or_default())?);
        dev_keys.push(i);
    }

    caps.validate().map_err(|e| caps_error(e, &dev_keys))?;
    Ok(caps)
}

/// Splits TXT RDATA (length-prefixed strings, RFC 1035 §3.3.14) into its
/// strings, for hand-written wire bytes and for fuzzing.
pub fn split_rdata(rdata: &[u8]) -> Result<Vec<&[u8]>, TxtError> {
    if rdata.len() > MAX_DECODE_BYTES {
        return Err(TxtError::Record(format!(
            "{} bytes is larger than any mDNS packet can carry ({MAX_DECODE_BYTES})",
            rdata.len()
        )));
    }
    let mut out = Vec::new();
    let mut rest = rdata;
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len);
        if len > tail.len() {
            return Err(TxtError::Record(format!(
                "a string claims {len} bytes but only {} remain (truncated record)",
                tail.len()
            )));
        }
        out.push(&tail[..len]);
        rest = &tail[len..];
    }
    Ok(out)
}

/// Decodes TXT RDATA wire bytes: [`split_rdata`] then [`decode`].
pub fn decode_rdata(rdata: &[u8]) -> Result<NodeCaps, TxtError> {
    decode(&split_rdata(rdata)?)
}

/// The strings of an mdns-sd TXT record (`ResolvedService::get_properties()`
/// or `ServiceInfo::get_properties()`), rebuilt as `key` or `key=value`
/// bytes for [`decode`].
///
/// mdns-sd has already applied part of RFC 6763 §6.4 (it keeps the first of a
/// repeated key and drops keys that are not UTF-8); [`decode`] applies the
/// rest.
pub fn strings_of(props: &mdns_sd::TxtProperties) -> Vec<Vec<u8>> {
    props
        .iter()
        .map(|p| {
            let mut s = p.key().as_bytes().to_vec();
            if let Some(v) = p.val() {
                s.push(b'=');
                s.extend_from_slice(v);
            }
            s
        })
        .collect()
}

/// Decodes an mdns-sd TXT record: [`strings_of`] then [`decode`].
pub fn decode_properties(props: &mdns_sd::TxtProperties) -> Result<NodeCaps, TxtError> {
    decode(&strings_of(props))
}

/// `devN` with N in canonical decimal below [`limits::MAX_DEVICES`].
fn dev_index(key: &str) -> Option<usize> {
    let digits = key.strip_prefix("dev")?;
    if digits.is_empty() || digits.len() > 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    let n: usize = digits.parse().ok()?;
    (n < limits::MAX_DEVICES).then_some(n)
}

fn parse_device(key: &str, v: &[u8]) -> Result<DeviceInfo, TxtError> {
    let text = std::str::from_utf8(v).map_err(|_| invalid(key, v, "not UTF-8 text"))?;
    let parts: Vec<&str> = text.splitn(6, ',').collect();
    let [label, mem, unified, available, gflops, name] = parts[..] else {
        return Err(invalid(
            key,
            v,
            &format!(
                "expected 6 comma-separated fields `<label>,<mem_bytes>,<unified 0/1>,<available 0/1>,<gflops>,<name>`, found {}",
                parts.len()
            ),
        ));
    };
    let field = |what: &str, why: String| invalid(key, v, &format!("{what}: {why}"));
    let mem_bytes = parse_count(mem.as_bytes())
        .map_err(|why| field("mem_bytes", format!("{} is {why}", quote(mem.as_bytes()))))?;
    let flag = |what: &str, s: &str| match s {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(field(
            what,
            format!("{} is not 0 or 1", quote(s.as_bytes())),
        )),
    };
    let gflops = parse_f64(key, gflops.as_bytes()).map_err(|_| {
        field(
            "gflops",
            format!("{} is not a number", quote(gflops.as_bytes())),
        )
    })?;
    Ok(DeviceInfo {
        device: label.to_string(),
        name: name.to_string(),
        mem_bytes,
        unified: flag("unified", unified)?,
        gflops,
        available: flag("available", available)?,
    })
}

fn parse_u64(key: &str, v: &[u8]) -> Result<u64, TxtError> {
    parse_count(v).map_err(|why| invalid(key, v, why))
}

/// A decimal count: ASCII digits only (no sign, no exponent), fitting u64.
fn parse_count(v: &[u8]) -> Result<u64, &'static str> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return Err("not a whole decimal number >= 0");
    }
    // All ASCII digits, so valid UTF-8; only overflow can fail.
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("too large for a 64-bit count")
}

fn parse_f64(key: &str, v: &[u8]) -> Result<f64, TxtError> {
    std::str::from_utf8(v)
        .ok()
        .filter(|s| s.len() <= 64)
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| invalid(key, v, "not a decimal number"))
}

fn invalid(key: &str, v: &[u8], why: &str) -> TxtError {
    TxtError::Invalid {
        key: key.into(),
        value: quote(v),
        why: why.into(),
    }
}

/// A value for an error message: quoted, escaped, cut to 40 characters, so a
/// hostile record cannot flood a log or a terminal.
fn quote(v: &[u8]) -> String {
    let s = String::from_utf8_lossy(v);
    let short: String = s.chars().take(40).collect();
    if short.len() < s.len() {
        format!("{short:?}…")
    } else {
        format!("{short:?}")
    }
}

/// Renames a caps field in a validation error to the TXT key it came from.
/// `dev_keys[i]` is the N of the `devN` that became `devices[i]`.
fn caps_error(e: CapsError, dev_keys: &[usize]) -> TxtError {
    match e {
        CapsError::Syntax(s) => TxtError::Record(s),
        CapsError::Absurd { field, value, why } => {
            let key = match field.as_str() {
                "ram_total" => "ram".to_string(),
                "ram_avail" => "ramfree".to_string(),
                "disk_free" => "disk".to_string(),
                "io_mbps" => "io".to_string(),
                "version" => "ver".to_string(),
                "ckpt_dir" => "ckpt".to_string(),
                "devices" => "devN".to_string(),
                f => match f.strip_prefix("devices[").and_then(|r| r.split_once(']')) {
                    Some((i, _)) => i
                        .parse::<usize>()
                        .ok()
                        .and_then(|i| dev_keys.get(i))
                        .map_or_else(|| "devN".to_string(), |n| format!("dev{n}")),
                    None => f.to_string(),
                },
            };
            TxtError::Absurd { key, value, why }
        }
    }
}

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

/// Shows encoded pairs as `k=v k=v ...` for logs.
pub struct TxtPairs<'a>(pub &'a [(String, String)]);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn gpu(name: &str, mem: u64) -> DeviceInfo {
        DeviceInfo {
            device: "cuda".into(),
            name: name.into(),
            mem_bytes: mem,
            unified: false,
            gflops: 0.0,
            available: true,
        }
    }

    fn sample() -> NodeCaps {
        NodeCaps {
            id: "5f0c1d2e3a4b5c6d".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            version: "0.1.0".into(),
            cluster: Some("lab".into()),
            ckpt_dir: Some("/data/models/GLM".into()),
            cores: 32,
            ram_total: 128 << 30,
            ram_avail: 100 << 30,
            disk_free: 900_000_000_000,
            devices: vec![gpu("NVIDIA GeForce RTX 4090, rev A", 24 << 30)],
            gflops: 410.5,
            io_mbps: 1800.0,
            ..Default::default()
        }
    }

    fn eight_gpu_box() -> NodeCaps {
        let mut c = sample();
        c.ckpt_dir = Some(format!(
            "/mnt/shared-nfs/{}",
            "very-long-directory-name/".repeat(9)
        ));
        c.devices = (0..8)
            .map(|_| {
                gpu(
                    "NVIDIA H100 80GB HBM3 (SXM5, PCIe Gen5 x16)",
                    85_899_345_920,
                )
            })
            .collect();
        c.devices.push(DeviceInfo {
            device: "cpu".into(),
            name: "AMD EPYC 9654 96-Core Processor".into(),
            mem_bytes: 0,
            unified: true,
            gflops: 3000.0,
            available: true,
        });
        c
    }

    fn assert_within_limits(pairs: &[(String, String)]) {
        for s in to_strings(pairs) {
            assert!(s.len() <= MAX_STRING_BYTES, "{} bytes: {s}", s.len());
        }
        assert!(
            wire_len(pairs) <= MAX_RECORD_BYTES,
            "{} bytes",
            wire_len(pairs)
        );
        assert_eq!(to_rdata(pairs).len(), wire_len(pairs));
    }

    #[test]
    fn caps_survive_a_txt_round_trip() {
        let c = sample();
        let pairs = encode(&c).unwrap();
        assert_eq!(
            pairs[0],
            ("txtvers".into(), "1".into()),
            "txtvers comes first (RFC 6763 §6.7)"
        );
        assert_eq!(decode(&to_strings(&pairs)).unwrap(), c);
        assert_eq!(decode_rdata(&to_rdata(&pairs)).unwrap(), c);
    }

    #[test]
    fn keys_appear_in_the_documented_order() {
        let keys: Vec<String> = encode(&sample())
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            keys,
            [
                "txtvers", "id", "cluster", "os", "arch", "cores", "ram", "ramfree", "disk",
                "ckpt", "gflops", "io", "dev0", "ver"
            ]
        );
    }

    #[test]
    fn a_typical_record_stays_under_400_bytes() {
        let n = wire_len(&encode(&sample()).unwrap());
        assert!(n < 400, "{n} bytes");
    }

    #[test]
    fn an_eight_gpu_box_fits_one_frame_with_every_gpu_and_name() {
        let c = eight_gpu_box();
        let pairs = encode(&c).unwrap();
        assert_within_limits(&pairs);
        let back = decode(&to_strings(&pairs)).unwrap();
        let gpus: Vec<_> = back.devices.iter().filter(|d| d.device == "cuda").collect();
        assert_eq!(gpus.len(), 8, "all 8 GPUs must be announced");
        assert!(
            gpus.iter()
                .all(|d| d.mem_bytes == 85_899_345_920 && d.name.starts_with("NVIDIA H100")),
            "{gpus:?}"
        );
    }

    #[test]
    fn an_oversized_record_gives_up_ckpt_then_names_then_the_least_useful_devices() {
        let mut c = eight_gpu_box();
        // 64 devices with long names cannot fit: everything optional goes.
        c.devices = (0..64u64)
            .map(|i| gpu(&format!("{i:02} {}", "Ω".repeat(100)), (i + 1) << 30))
            .collect();
        c.devices[5].device = "ane".into();
        let pairs = encode(&c).unwrap();
        assert_within_limits(&pairs);
        let back = decode(&to_strings(&pairs)).unwrap();
        assert_eq!(back.ckpt_dir, None, "ckpt goes first");
        assert!(back.devices.iter().all(|d| d.name.is_empty()), "then names");
        assert!(
            back.devices.iter().all(|d| d.device == "cuda"),
            "the ANE goes before GPUs"
        );
        let mems: Vec<u64> = back.devices.iter().map(|d| d.mem_bytes).collect();
        assert!(
            mems.windows(2).all(|w| w[0] < w[1]),
            "survivors keep their order: {mems:?}"
        );
        assert_eq!(*mems.last().unwrap(), 64 << 30, "the largest GPUs survive");
    }

    #[test]
    fn long_names_are_cut_on_a_char_boundary_to_255_byte_strings() {
        let mut c = sample();
        c.devices[0].name = "é".repeat(127); // 254 bytes of two-byte chars
        c.os = "ö".repeat(127);
        c.ckpt_dir = Some(format!("/{}", "d".repeat(251))); // ckpt=/ddd.. is 257 bytes
        let pairs = encode(&c).unwrap();
        assert_within_limits(&pairs);
        let back = decode(&to_strings(&pairs)).unwrap();
        assert_eq!(back.ckpt_dir, None, "a ckpt that does not fit is left out");
        assert!(back.devices[0].name.chars().all(|ch| ch == 'é'));
        assert!(back.devices[0].name.len() < 254);
        assert_eq!(back.os.len(), 252, "os=<252 bytes> is exactly 255");

        c.ckpt_dir = Some(format!("/{}", "d".repeat(249))); // ckpt=/... is exactly 255
        let pairs = encode(&c).unwrap();
        assert!(to_strings(&pairs)
            .iter()
            .any(|s| s.len() == 255 && s.starts_with("ckpt=")));
        assert_eq!(decode(&to_strings(&pairs)).unwrap().ckpt_dir, c.ckpt_dir);
    }

    #[test]
    fn a_cluster_name_that_cannot_fit_is_an_error_not_a_cut() {
        let mut c = sample();
        c.cluster = Some("c".repeat(250));
        let err = encode(&c).unwrap_err();
        assert_eq!(err.key(), Some("cluster"), "{err}");
    }

    #[test]
    fn a_label_with_a_comma_cannot_be_encoded() {
        let mut c = sample();
        c.devices[0].device = "cu,da".into();
        assert_eq!(encode(&c).unwrap_err().key(), Some("dev0"));
    }

    #[test]
    fn hand_written_strings_decode_like_avahi_publish_would_send_them() {
        let strings: &[&[u8]] = &[
            b"txtvers=1",
            b"cores=16",
            b"dev0=cuda,25769803776,0,1,0,RTX 4090",
        ];
        let c = decode(strings).unwrap();
        assert_eq!(c.cores, 16);
        assert_eq!(c.devices.len(), 1);
        assert_eq!(c.devices[0].name, "RTX 4090");
        assert_eq!(c.devices[0].mem_bytes, 24 << 30);
        assert!(c.devices[0].available && !c.devices[0].unified);
        assert_eq!(
            (c.ram_total, c.cluster.as_deref(), c.id.as_str()),
            (0, None, "")
        );
    }

    #[test]
    fn hand_written_wire_bytes_decode() {
        let rdata = b"\x09txtvers=1\x07cores=8\x0aOS=freebsd\x1ddev1=metal,0,1,1,7.5,Apple M2\x00\x08cores=99";
        let c = decode_rdata(rdata).unwrap();
        assert_eq!(c.cores, 8, "the first `cores` counts");
        assert_eq!(c.os, "freebsd", "keys are case-insensitive");
        assert_eq!(c.devices[0].device, "metal");
        assert_eq!(c.devices[0].gflops, 7.5);
        assert!(
            decode_rdata(b"\x09txtvers=1\x20cores").is_err(),
            "truncated wire data"
        );
    }

    #[test]
    fn a_repeated_key_counts_once_the_first_even_in_another_case() {
        let c = decode(&["txtvers=1", "cores=4", "CORES=abc", "Cores=8"]).unwrap();
        assert_eq!(c.cores, 4);
    }

    #[test]
    fn unknown_keys_and_rfc_ignorable_strings_are_skipped() {
        let c = decode(&[
            "txtvers=1",
            "",
            "=orphan",
            "future=thing",
            "dev64=cuda,1,0,1,0,x",
            "dev01=cuda,1,0,1,0,y",
            "cores=2",
            "path=/",
        ])
        .unwrap();
        assert_eq!(c.cores, 2);
        assert!(
            c.devices.is_empty(),
            "dev64 and dev01 are not schema keys: {:?}",
            c.devices
        );
    }

    #[test]
    fn devices_are_read_in_index_order_with_gaps() {
        let c = decode(&[
            "txtvers=1",
            "cores=2",
            "dev10=rocm,3,0,1,0,c",
            "dev2=cuda,2,0,1,0,b",
            "dev0=cuda,1,0,0,0,a,with,commas",
        ])
        .unwrap();
        let names: Vec<&str> = c.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["a,with,commas", "b", "c"]);
        assert!(!c.devices[0].available);
    }

    /// DESIGN.md: every key but `txtvers` is optional, so a hand-made
    /// announcement with nothing else still decodes, with unknowns as 0.
    #[test]
    fn a_record_with_only_txtvers_decodes_with_unknown_counts() {
        let caps = decode(&["txtvers=1"]).unwrap();
        assert_eq!(caps.cores, 0);
        assert!(caps.devices.is_empty());
    }

    #[test]
    fn malformed_values_are_refused_naming_the_key() {
        let cases: &[(&[&str], &str)] = &[
            (&["cores=8"], "txtvers"),
            (&["txtvers=2", "cores=8"], "txtvers"),
            (&["txtvers", "cores=8"], "txtvers"),
            (&["txtvers=1", "cores=abc"], "cores"),
            (&["txtvers=1", "cores"], "cores"),
            (&["txtvers=1", "cores=1000000"], "cores"),
            (&["txtvers=1", "cores=99999999999999999999999"], "cores"),
            (&["txtvers=1", "cores=8", "ram=-5"], "ram"),
            (&["txtvers=1", "cores=8", "ram=1000000000000000000"], "ram"),
            (&["txtvers=1", "cores=8", "ram=10", "ramfree=11"], "ramfree"),
            (&["txtvers=1", "cores=8", "disk=1e9"], "disk"),
            (&["txtvers=1", "cores=8", "gflops=NaN"], "gflops"),
            (&["txtvers=1", "cores=8", "gflops=inf"], "gflops"),
            (&["txtvers=1", "cores=8", "io=-1"], "io"),
            (&["txtvers=1", "cores=8", "id=NOT-HEX"], "id"),
            (&["txtvers=1", "cores=8", "dev0=cuda,123"], "dev0"),
            (&["txtvers=1", "cores=8", "dev3=cuda,x,0,1,0,n"], "dev3"),
            (&["txtvers=1", "cores=8", "dev1=cuda,1,2,1,0,n"], "dev1"),
            (&["txtvers=1", "cores=8", "dev1=cuda,1,0,1,fast,n"], "dev1"),
            (&["txtvers=1", "cores=8", "dev0=,1,0,1,0,n"], "dev0"),
            (
                &[
                    "txtvers=1",
                    "cores=8",
                    "dev5=cuda,18446744073709551615,0,1,0,n",
                ],
                "dev5",
            ),
        ];
        for (strings, key) in cases {
            let err = decode(strings).expect_err(key);
            assert_eq!(err.key(), Some(*key), "{strings:?}: {err}");
            assert!(err.to_string().contains(&format!("`{key}`")), "{err}");
        }
    }

    #[test]
    fn an_error_reads_as_key_value_and_reason() {
        let err = decode(&["txtvers=1", "cores=abc"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "TXT key `cores` = \"abc\": not a whole decimal number >= 0"
        );
        let err = decode(&["txtvers=1", "cores=1", "dev0=cuda,-1,0,1,0,x"]).unwrap_err();
        assert!(
            err.to_string().contains("mem_bytes: \"-1\" is not a whole"),
            "{err}"
        );
    }

    #[test]
    fn non_utf8_values_and_keys_are_handled() {
        let err = decode(&[b"txtvers=1".as_slice(), b"cores=8", b"os=\xff\xfe"]).unwrap_err();
        assert_eq!(err.key(), Some("os"));
        // A non-ASCII key is not ours: ignored.
        assert!(decode(&[b"txtvers=1".as_slice(), b"cores=8", b"\xffos=x"]).is_ok());
    }

    #[test]
    fn an_oversized_record_is_refused_before_decoding() {
        let big = vec![vec![b'x'; 255]; 40];
        assert!(matches!(decode(&big), Err(TxtError::Record(_))));
    }

    #[test]
    fn decoding_reads_what_mdns_sd_hands_us() {
        let pairs = encode(&sample()).unwrap();
        let props = mdns_sd::TxtProperties::from(to_rdata(&pairs).as_slice());
        assert_eq!(decode_properties(&props).unwrap(), sample());
        // And what mdns-sd would publish from our pairs, without a network.
        let info = mdns_sd::ServiceInfo::new(
            "_rlx._tcp.local.",
            "box",
            "box.local.",
            "127.0.0.1",
            9100,
            &pairs[..],
        )
        .expect("mdns-sd accepts every string encode() produces");
        assert_eq!(strings_of(info.get_properties()), strings_of(&props));
    }

    proptest! {
        #[test]
        fn arbitrary_byte_strings_never_panic_the_decoder(
            strings in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..40)
        ) {
            let _ = decode(&strings);
        }

        #[test]
        fn arbitrary_rdata_never_panics_the_decoder(rdata in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let _ = decode_rdata(&rdata);
        }

        #[test]
        fn plausible_key_value_soup_never_panics_and_errors_name_a_key(
            entries in proptest::collection::vec(
                (prop::sample::select(vec!["txtvers", "cores", "ram", "ramfree", "disk", "gflops", "io",
                    "id", "os", "dev0", "dev1", "DEV2", "ckpt", "cluster"]), "[0-9a-z,.=-]{0,30}"),
                0..20),
        ) {
            let mut strings = vec!["txtvers=1".to_string()];
            strings.extend(entries.iter().map(|(k, v)| format!("{k}={v}")));
            if let Err(e) = decode(&strings) {
                prop_assert!(e.key().is_some(), "{}", e);
            }
        }

        #[test]
        fn encoded_records_always_fit_and_decode(
            names in proptest::collection::vec("\\PC{0,60}", 0..64),
            ckpt in "/\\PC{0,300}",
        ) {
            let mut c = sample();
            c.ckpt_dir = Some(ckpt);
            c.devices = names.iter().enumerate()
                .map(|(i, n)| gpu(n, i as u64 * 1000))
                .collect();
            if let Ok(pairs) = encode(&c) {
                for s in to_strings(&pairs) {
                    prop_assert!(s.len() <= MAX_STRING_BYTES);
                }
                prop_assert!(wire_len(&pairs) <= MAX_RECORD_BYTES);
                let back = decode(&to_strings(&pairs));
                prop_assert!(back.is_ok(), "{:?}", back);
            }
        }
    }
}
