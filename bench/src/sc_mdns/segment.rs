//! **What one browse puts on the segment**: nftables counters on the lab's
//! switch, read before and after each run. The switch is a Linux bridge in its
//! own namespace; a `bridge` table's prerouting hook sees every frame once, as
//! it enters the switch from a host's port, whatever the loss on the browser's
//! link does to it afterwards. So the counts are what crossed the segment: the
//! queries the browser's host sent (those its own link dropped never got
//! there), the unicast replies sent to it, and the multicast responses, which
//! every device on the segment receives (Wi-Fi clients and printers on a real
//! LAN).

use anyhow::{bail, Context, Result};
use rlx_lab::Lab;
use std::process::Command;

/// Packets and bytes of one class of traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    pub packets: u64,
    /// Bytes of the IP packets (headers included, Ethernet header not).
    pub bytes: u64,
}

/// The three classes counted (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// UDP to port 5353 from the browser's host: its queries (for
    /// avahi-browse, also avahi-daemon's own announcements of the host).
    pub queries: Count,
    /// UDP from port 5353 to a unicast MAC: replies to legacy queries, and
    /// unicast answers to QU questions.
    pub unicast: Count,
    /// UDP from port 5353 to port 5353 at a multicast MAC from the other
    /// hosts: multicast responses, received by every device.
    pub multicast: Count,
}

impl Load {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Load) -> Load {
        let d = |a: Count, b: Count| Count {
            packets: a.packets.saturating_sub(b.packets),
            bytes: a.bytes.saturating_sub(b.bytes),
        };
        Load {
            queries: d(self.queries, before.queries),
            unicast: d(self.unicast, before.unicast),
            multicast: d(self.multicast, before.multicast),
        }
    }

    /// (metric suffix, count) for the results.
    pub fn metrics(&self) -> [(&'static str, Count); 3] {
        [
            ("seg_queries", self.queries),
            ("seg_unicast", self.unicast),
            ("seg_multicast", self.multicast),
        ]
    }
}

const TABLE: &str = "rlx_segment";

/// Counters on the switch of `lab`, host `browser` being the querier.
pub struct Segment {
    switch: String,
}

impl Segment {
    /// Installs the counters; an error names what is missing (the bench
    /// then records the load as not measured).
    pub fn install(lab: &Lab, browser: usize) -> Result<Segment> {
        let switch = lab
            .switch_ns()
            .context("the lab has no switch namespace to count on")?
            .to_string();
        let port = lab
            .host(browser)
            .switch_port
            .clone()
            .context("the browser's host has no switch port")?;
        // Bit 0 of the first destination MAC byte: the group bit. Frames
        // that cross from one bridge of a chained switch to the next (on
        // its trunk ports, `tk*`/`tb*`) were counted where they entered.
        let script = format!(
            "table bridge {TABLE} {{\n\
             \tcounter queries {{ }}\n\
             \tcounter unicast {{ }}\n\
             \tcounter multicast {{ }}\n\
             \tchain pre {{ type filter hook prerouting priority -300; policy accept;\n\
             \t\tiifname \"tk*\" accept\n\
             \t\tiifname \"tb*\" accept\n\
             \t\tiifname \"{port}\" udp dport 5353 counter name \"queries\"\n\
             \t\tiifname != \"{port}\" udp sport 5353 ether daddr & 01:00:00:00:00:00 == 00:00:00:00:00:00 counter name \"unicast\"\n\
             \t\tiifname != \"{port}\" udp sport 5353 udp dport 5353 ether daddr & 01:00:00:00:00:00 == 01:00:00:00:00:00 counter name \"multicast\"\n\
             \t}}\n\
             }}\n"
        );
        nft(&switch, &["-f", "-"], Some(&script))?;
        Ok(Segment { switch })
    }

    /// The counters now.
    pub fn read(&self) -> Result<Load> {
        let out = nft(
            &self.switch,
            &["-j", "list", "counters", "table", "bridge", TABLE],
            None,
        )?;
        parse(&out)
    }
}

fn nft(ns: &str, args: &[&str], stdin: Option<&str>) -> Result<String> {
    use std::io::Write as _;
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "nft"]).args(args);
    c.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().context("cannot run nft (install nftables)")?;
    if let Some(s) = stdin {
        child
            .stdin
            .take()
            .context("nft stdin")?
            .write_all(s.as_bytes())?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft {} in {ns} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads `nft -j list counters` output.
fn parse(json: &str) -> Result<Load> {
    let v: serde_json::Value = serde_json::from_str(json).context("nft -j output")?;
    let mut load = Load::default();
    for o in v["nftables"].as_array().into_iter().flatten() {
        let c = &o["counter"];
        let count = Count {
            packets: c["packets"].as_u64().unwrap_or(0),
            bytes: c["bytes"].as_u64().unwrap_or(0),
        };
        match c["name"].as_str() {
            Some("queries") => load.queries = count,
            Some("unicast") => load.unicast = count,
            Some("multicast") => load.multicast = count,
            _ => {}
        }
    }
    Ok(load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_counters_are_read_from_nft_json() {
        let j = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
            {"counter": {"family": "bridge", "name": "queries", "table": "rlx_segment", "handle": 1, "packets": 6, "bytes": 400}},
            {"counter": {"family": "bridge", "name": "unicast", "table": "rlx_segment", "handle": 2, "packets": 300, "bytes": 80000}},
            {"counter": {"family": "bridge", "name": "multicast", "table": "rlx_segment", "handle": 3, "packets": 100, "bytes": 30000}}]}"#;
        let l = parse(j).unwrap();
        assert_eq!(
            l.queries,
            Count {
                packets: 6,
                bytes: 400
            }
        );
        assert_eq!(l.unicast.packets, 300);
        assert_eq!(l.multicast.bytes, 30000);
        let later = Load {
            unicast: Count {
                packets: 310,
                bytes: 81000,
            },
            ..l
        };
        assert_eq!(
            later.since(&l).unicast,
            Count {
                packets: 10,
                bytes: 1000
            }
        );
        assert_eq!(later.since(&l).queries, Count::default());
    }
}
