//! `rlx-agent --probe --addr A --ckpt C`, the runtime's probe command line,
//! prints a line the runtime's own `NodeCaps` parser reads (the parse
//! `probe_remote` makes), with `addr` = A: the runtime can use rlx-agent as
//! its probe binary. It opens no port; the probe reads this machine.

use std::process::Command;

#[test]
fn the_agents_probe_line_is_the_runtimes_node_caps_with_the_addr_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(rlx_lab::kit::agent_bin())
        .args(["--probe", "--no-bench", "--addr", "box-7:9100", "--ckpt"])
        .arg(dir.path())
        .env("RLX_AGENT_CONFIG", "/dev/null")
        .env("RLX_AGENT_STATE_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let caps = rlx_compat::parse_caps(&stdout).unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(caps.addr, "box-7:9100");
    assert!(caps.cores > 0 && caps.ram_total > 0, "{stdout}");
    assert_eq!(
        caps.devices[0].device, "cpu",
        "the CPU first, as the runtime lists it"
    );
}
