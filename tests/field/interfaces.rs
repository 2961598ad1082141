//! **An agent told its interfaces serves only there** (issue 37, item 9):
//! a box on the cluster's LAN and on another network (an office LAN, a
//! public Wi-Fi) runs `rlx-agent --interface eth0`. Its handshake port
//! must be closed on the other network, as if nothing ran there, and
//! follow the chosen interface's addresses as they change.

use super::moves::second_link;
use rlx_lab::kit::{agent_bin, eventually, require_lab, Proc};
use rlx_lab::Lab;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

/// What a hello to `ip`:6184 sent from host `from` gets: the reply's first
/// bytes, or the shell's error (bash's /dev/tcp: no other program needed).
fn hello_from(lab: &Lab, from: usize, ip: Ipv4Addr) -> Result<String, String> {
    let script = format!(
        "exec 3<>/dev/tcp/{ip}/6184 || exit 1\n\
         printf '{{\"rlx\":\"hello\",\"v\":2,\"nonce\":\"%064x\"}}\\n' 1 >&3\n\
         head -c 120 <&3"
    );
    let out = lab
        .command(from, "timeout")
        .args(["5", "bash", "-c", &script])
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if stdout.contains("\"caps\"") {
        Ok(stdout)
    } else {
        Err(format!(
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[test]
fn an_agent_told_its_interface_refuses_the_handshake_on_another_network_and_follows_a_new_address()
{
    let Some(labs) = require_lab() else { return };
    let lab = labs.hosts(2);
    let other = second_link(&lab, &[0, 1]);
    let mut cmd = Command::new(agent_bin());
    cmd.args(["--interface", &lab.host(0).iface])
        .env("RUST_LOG", "info");
    let p = Proc::spawn(&lab, 0, cmd);
    p.expect_output(
        "the handshake port listens on the addresses of",
        Duration::from_secs(30),
    );

    let on_lan = lab.host(0).ip;
    hello_from(&lab, 1, on_lan).expect("answered on the chosen interface");
    let refused = hello_from(&lab, 1, other[0]).expect_err("refused on the other network");
    assert!(
        refused.contains("refused"),
        "the port is closed there, as if nothing listened: {refused}"
    );

    // A second address on the chosen interface (a new lease, an alias) is
    // served once the kernel says it came.
    let h = lab.host(0);
    let [a, b, c, _] = h.ip.octets();
    let alias = Ipv4Addr::new(a, b, c, 201);
    let added = Command::new("ip")
        .args([
            "-n",
            &h.ns,
            "addr",
            "add",
            &format!("{alias}/{}", h.prefix_len),
            "dev",
            &h.iface,
        ])
        .status()
        .unwrap();
    assert!(added.success());
    eventually(Duration::from_secs(5), "the new address answers", || {
        hello_from(&lab, 1, alias).map(|_| ())
    });
    // And the other network stays closed.
    assert!(hello_from(&lab, 1, other[0]).is_err());
    drop(p);
}
