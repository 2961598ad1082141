//! **Decoding TXT schema v1 into caps**: [`decode`] and its front ends for
//! wire bytes and for mdns-sd. The encoder is its sibling `encoding`.

use super::error::TxtError;
use super::error::{caps_error, quote};
use super::schema::{
    device_index, is_key, AGENT_PORT_KEY, AGENT_VERSION_KEY, ARCH_KEY, CKPT_KEY, CLUSTER_KEY,
    CORES_KEY, DISK_KEY, GFLOPS_KEY, ID_KEY, INCARNATION_KEY, IO_KEY, MAX_DECODE_BYTES, OS_KEY,
    RAM_FREE_KEY, RAM_KEY, SSH_KEY, TXTVERS_KEY, TXT_VERSION, WORKER_HELD_KEY, WORKER_KEY,
};
use crate::caps::{limits, DeviceInfo, NodeCaps};
use std::collections::HashMap;

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
        if !is_key(&key) {
            continue;
        }
        fields.entry(key).or_insert(v);
    }

    match fields.get(TXTVERS_KEY) {
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
        id: text(ID_KEY)?,
        incarnation: fields
            .contains_key(INCARNATION_KEY)
            .then(|| text(INCARNATION_KEY))
            .transpose()?,
        os: text(OS_KEY)?,
        arch: text(ARCH_KEY)?,
        version: text(AGENT_VERSION_KEY)?,
        cluster: fields
            .contains_key(CLUSTER_KEY)
            .then(|| text(CLUSTER_KEY))
            .transpose()?,
        worker_held_by: fields
            .contains_key(WORKER_HELD_KEY)
            .then(|| text(WORKER_HELD_KEY))
            .transpose()?,
        ckpt_dir: fields
            .contains_key(CKPT_KEY)
            .then(|| text(CKPT_KEY))
            .transpose()?,
        ram_total: int(RAM_KEY)?,
        ram_avail: int(RAM_FREE_KEY)?,
        disk_free: int(DISK_KEY)?,
        gflops: float(GFLOPS_KEY)?,
        io_mbps: float(IO_KEY)?,
        agent_port: fields
            .get(AGENT_PORT_KEY)
            .map(|v| parse_port(AGENT_PORT_KEY, v.unwrap_or_default()))
            .transpose()?,
        worker_listening: fields
            .get(WORKER_KEY)
            .map(|v| parse_flag(WORKER_KEY, v.unwrap_or_default()))
            .transpose()?,
        ..NodeCaps::default()
    };
    if let Some(v) = fields.get(SSH_KEY) {
        caps.ssh_port = parse_ssh(v.unwrap_or_default())?;
        caps.ssh_listening = Some(caps.ssh_port.is_some());
    }
    // DESIGN.md makes every key but `txtvers` optional: a record without
    // `cores` decodes with 0, which NodeCaps reads as "unknown".
    let cores = int(CORES_KEY)?;
    if cores > u64::from(limits::MAX_CORES) {
        return Err(TxtError::Absurd {
            key: CORES_KEY.into(),
            value: cores.to_string(),
            why: format!("expected at most {} logical cores", limits::MAX_CORES),
        });
    }
    caps.cores = cores as u32;

    let mut devs: Vec<(usize, &str)> = fields
        .keys()
        .filter_map(|k| device_index(k).map(|i| (i, k.as_str())))
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
        ..Default::default()
    })
}

/// A TCP port: a decimal number in 1-65535.
fn parse_port(key: &str, v: &[u8]) -> Result<u16, TxtError> {
    match parse_count(v) {
        Ok(p @ 1..=65535) => Ok(p as u16),
        Ok(_) => Err(invalid(key, v, "not a port (1-65535)")),
        Err(why) => Err(invalid(key, v, why)),
    }
}

/// The SSH server's port, or `0` for none: `Some(port)` or `None`.
fn parse_ssh(v: &[u8]) -> Result<Option<u16>, TxtError> {
    match parse_count(v) {
        Ok(0) => Ok(None),
        Ok(p @ 1..=65535) => Ok(Some(p as u16)),
        Ok(_) => Err(invalid(
            SSH_KEY,
            v,
            "not a port (1-65535), nor 0 (no SSH server)",
        )),
        Err(why) => Err(invalid(
            SSH_KEY,
            v,
            &format!("{why}: expected the SSH server's port, or 0 for none"),
        )),
    }
}

/// A schema v1 boolean: `0` or `1`.
fn parse_flag(key: &str, v: &[u8]) -> Result<bool, TxtError> {
    match v {
        b"0" => Ok(false),
        b"1" => Ok(true),
        _ => Err(invalid(key, v, "not 0 or 1")),
    }
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
