//! **What a bystander receives**: one more lab host that runs nothing (a
//! printer, a phone on the LAN), whose interface counts every frame that
//! reaches it during each discovery run, by kind. The switch's counters
//! ([`super::segment`]) count mDNS only; a bystander also receives the ARP
//! requests of the hosts around it (broadcast: every device gets every
//! one), IPv6 neighbour solicitations, and any frame the switch floods.
//!
//! Two readings, before and after each run: the interface's own counters
//! (`ip -s -j link`: every frame, Ethernet header included) and nftables
//! counters at the interface's ingress, by kind (bytes there are the
//! frame's payload, Ethernet header excluded).

use anyhow::{Context, Result};
use rlx_lab::Lab;

/// Packets and bytes.
pub type Count = super::segment::Count;

/// The kinds counted (metric name, nft match).
const KINDS: [(&str, &str); 7] = [
    ("by_mdns", "udp dport 5353"),
    ("by_arp_browser", "ether type arp arp saddr ip BROWSER"),
    ("by_arp_other", "ether type arp"),
    ("by_nd", "meta l4proto ipv6-icmp"),
    (
        "by_other_group",
        "ether daddr & 01:00:00:00:00:00 == 01:00:00:00:00:00",
    ),
    (
        "by_other_unicast",
        "ether daddr & 01:00:00:00:00:00 == 00:00:00:00:00:00",
    ),
    // Last: whatever none of the above matched (nothing, by construction).
    ("by_rest", ""),
];

const TABLE: &str = "rlx_bystander";

/// A bystander host's counters.
pub struct Bystander {
    host: usize,
}

/// One reading: the interface's totals and the counts by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// `rx_packets`, `rx_bytes` of the interface (Ethernet header included).
    pub total: Count,
    /// (kind, count) in [`KINDS`] order.
    pub kinds: Vec<(&'static str, Count)>,
}

impl Reading {
    /// What arrived between `before` and `self`.
    pub fn since(&self, before: &Reading) -> Reading {
        let d = |a: Count, b: Count| Count {
            packets: a.packets.saturating_sub(b.packets),
            bytes: a.bytes.saturating_sub(b.bytes),
        };
        Reading {
            total: d(self.total, before.total),
            kinds: self
                .kinds
                .iter()
                .map(|(k, c)| {
                    let b = before
                        .kinds
                        .iter()
                        .find(|(bk, _)| bk == k)
                        .map_or(Count::default(), |(_, c)| *c);
                    (*k, d(*c, b))
                })
                .collect(),
        }
    }

    /// (metric prefix, count) for the results: `by_all` and each kind.
    pub fn metrics(&self) -> Vec<(&'static str, Count)> {
        std::iter::once(("by_all", self.total))
            .chain(self.kinds.iter().copied())
            .collect()
    }
}

impl Bystander {
    /// Installs the counters on host `host`'s interface; `browser` is the
    /// host whose ARP requests are counted apart.
    pub fn install(lab: &Lab, host: usize, browser: usize) -> Result<Bystander> {
        let dev = &lab.host(host).iface;
        let browser_ip = lab.host(browser).ip.to_string();
        let mut rules = String::new();
        let mut counters = String::new();
        for (name, m) in KINDS {
            counters.push_str(&format!("\tcounter {name} {{ }}\n"));
            let m = m.replace("BROWSER", &browser_ip);
            rules.push_str(&format!("\t\t{m} counter name \"{name}\" accept\n"));
        }
        let script = format!(
            "table netdev {TABLE} {{\n{counters}\
             \tchain ingress {{ type filter hook ingress device \"{dev}\" priority -500; policy accept;\n\
             {rules}\t}}\n}}\n"
        );
        lab.nft(host, &script)
            .with_context(|| format!("installing the bystander's counters: {script}"))?;
        Ok(Bystander { host })
    }

    /// The counters now.
    pub fn read(&self, lab: &Lab) -> Result<Reading> {
        let dev = &lab.host(self.host).iface;
        let link = lab.exec(self.host, "ip", &["-s", "-j", "link", "show", "dev", dev])?;
        let nft = lab.exec(
            self.host,
            "nft",
            &["-j", "list", "counters", "table", "netdev", TABLE],
        )?;
        parse(&link, &nft)
    }
}

fn parse(link_json: &str, nft_json: &str) -> Result<Reading> {
    let l: serde_json::Value = serde_json::from_str(link_json).context("ip -j output")?;
    let rx = &l[0]["stats64"]["rx"];
    let total = Count {
        packets: rx["packets"].as_u64().context("no rx packets")?,
        bytes: rx["bytes"].as_u64().context("no rx bytes")?,
    };
    let v: serde_json::Value = serde_json::from_str(nft_json).context("nft -j output")?;
    let mut kinds: Vec<(&'static str, Count)> = Vec::new();
    for (name, _) in KINDS {
        let c = v["nftables"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| &o["counter"])
            .find(|c| c["name"].as_str() == Some(name));
        kinds.push((
            name,
            c.map_or(Count::default(), |c| Count {
                packets: c["packets"].as_u64().unwrap_or(0),
                bytes: c["bytes"].as_u64().unwrap_or(0),
            }),
        ));
    }
    Ok(Reading { total, kinds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_totals_and_counts_by_kind_are_read_and_subtracted() {
        let link = r#"[{"ifname":"eth0","stats64":{"rx":{"bytes":5000,"packets":40},"tx":{"bytes":1,"packets":1}}}]"#;
        let nft = r#"{"nftables":[{"metainfo":{}},
            {"counter":{"family":"netdev","name":"by_mdns","table":"rlx_bystander","packets":4,"bytes":600}},
            {"counter":{"family":"netdev","name":"by_arp_other","table":"rlx_bystander","packets":30,"bytes":1380}}]}"#;
        let r = parse(link, nft).unwrap();
        assert_eq!(
            r.total,
            Count {
                packets: 40,
                bytes: 5000
            }
        );
        let get = |r: &Reading, k: &str| r.kinds.iter().find(|(n, _)| *n == k).unwrap().1;
        assert_eq!(get(&r, "by_mdns").packets, 4);
        assert_eq!(get(&r, "by_arp_other").bytes, 1380);
        assert_eq!(get(&r, "by_nd"), Count::default());
        let before = parse(
            r#"[{"stats64":{"rx":{"bytes":1000,"packets":10}}}]"#,
            r#"{"nftables":[{"counter":{"name":"by_arp_other","packets":5,"bytes":230}}]}"#,
        )
        .unwrap();
        let d = r.since(&before);
        assert_eq!(
            d.total,
            Count {
                packets: 30,
                bytes: 4000
            }
        );
        assert_eq!(
            get(&d, "by_arp_other"),
            Count {
                packets: 25,
                bytes: 1150
            }
        );
        assert_eq!(d.metrics()[0].0, "by_all");
        assert_eq!(d.metrics().len(), KINDS.len() + 1);
    }
}
