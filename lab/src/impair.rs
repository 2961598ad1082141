//! **Impairments of a host's link**: random loss, and TCP connections that go
//! unanswered (see the crate docs, "Impairments"). nftables rules in the
//! host's namespace, since this kernel has no netem.

use crate::cmd::{on_path, run};
use crate::error::{LabError, Result};
use crate::Lab;
use ipnet::Ipv4Net;
use std::net::Ipv4Addr;

impl Lab {
    /// Drop `pct` percent of the packets on host `i`'s link, each direction,
    /// at random (nftables `netdev` table on its `eth0`, ingress and egress).
    /// `0` removes the loss; `100` cuts the link (everything dropped, the
    /// interface still up). ARP is dropped too, as on a lossy real link.
    pub fn set_loss(&self, i: usize, pct: u8) -> Result<()> {
        if pct > 100 {
            return Err(LabError::Invalid(format!(
                "loss must be 0-100%, not {pct}%"
            )));
        }
        let dev = &self.host(i).iface;
        let mut script = "table netdev rlx_loss\ndelete table netdev rlx_loss\n".to_string();
        // `numgen ... < 100` is out of nft's range: all of it is a plain drop
        // (a cut cable that the kernel still calls up).
        let rule = if pct == 100 {
            "drop".to_string()
        } else {
            format!("numgen random mod 100 < {pct} drop")
        };
        if pct > 0 {
            script.push_str(&format!(
                "table netdev rlx_loss {{\n\
                 \tchain ingress {{ type filter hook ingress device \"{dev}\" priority 0; policy accept; {rule}; }}\n\
                 \tchain egress {{ type filter hook egress device \"{dev}\" priority 0; policy accept; {rule}; }}\n\
                 }}\n"
            ));
        }
        self.nft(i, &script)
    }

    /// Make host `i`'s outgoing TCP connections to `port` on `cidr` go
    /// unanswered, except to the `live` addresses: an nftables output rule
    /// drops the SYNs, so `connect()` waits for its timeout (no RST, no ICMP),
    /// like a scan of addresses where nobody lives. Rules accumulate.
    pub fn silence_tcp(&self, i: usize, cidr: Ipv4Net, port: u16, live: &[Ipv4Addr]) -> Result<()> {
        let except = if live.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = live.iter().map(|a| a.to_string()).collect();
            format!("ip daddr != {{ {} }} ", list.join(", "))
        };
        self.nft(
            i,
            &format!(
                "table inet rlx_silence {{\n\
                 \tchain output {{ type filter hook output priority 0; policy accept; }}\n\
                 }}\n\
                 add rule inet rlx_silence output ip daddr {cidr} {except}tcp dport {port} drop\n"
            ),
        )
    }

    /// Load an nftables script in host `i`'s namespace (`nft -f -`).
    /// Without nftables installed, an error that says which check the
    /// calling test forgot, instead of a bare "cannot run".
    pub fn nft(&self, i: usize, script: &str) -> Result<()> {
        if !on_path("nft") {
            return Err(LabError::Unsupported(NO_NFT.to_string()));
        }
        run(self.command(i, "nft").args(["-f", "-"]), Some(script)).map(|_| ())
    }
}

/// What [`Lab::nft`] (and so [`Lab::set_loss`], [`Lab::silence_tcp`]) says
/// on a machine without `nft`: a test reaching it skipped its peer check.
pub(crate) const NO_NFT: &str = "nft is not installed (apt-get install nftables): a test that \
     impairs a link must call rlx_lab::kit::peer::require(.., &[Peer::Nftables]) before \
     building its lab, so that it says SKIP here instead of failing";

#[cfg(test)]
mod tests {
    use super::NO_NFT;

    #[test]
    fn the_missing_nft_message_names_the_check_the_test_forgot() {
        assert!(NO_NFT.contains("peer::require") && NO_NFT.contains("Peer::Nftables"));
        assert!(NO_NFT.contains("apt-get install nftables"));
    }
}
