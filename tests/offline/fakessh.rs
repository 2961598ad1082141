//! **A cluster without a network** for the CLI tests: SSH discovery through
//! a stand-in `ssh` program (`RLX_SSH_PROGRAM`) that prints a caps JSON file
//! per host, so `expand` runs its real pipeline, render and write-back while
//! no packet is sent. mDNS is off in every config these tests write, and
//! `--no-mdns` is passed as well.
//!
//! ```ignore
//! let c = fakessh::Cluster::new();
//! c.host("gpu-a", &fakessh::caps("gpu-a", "00000000000000a1", "cuda", 24));
//! let out = c.expand(&["cluster.toml", "--write"]);
//! ```

use rlx_lab::kit::Run;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

/// A fixed time for provenance comments (2026-11-30 06:58 UTC), so
/// expected files can be compared byte for byte.
pub const SOURCE_DATE_EPOCH: &str = "1796021880";

/// The stand-in for ssh: finds the host after `--` and prints
/// `$FAKE_SSH_DIR/<host>.json`; `<host>.delay` makes it sleep first (and
/// `<host>.started` says the probe has begun); a host
/// without a file fails the way ssh does for a name that does not resolve.
const FAKE_SSH: &str = r#"#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
host="$2"
: > "$FAKE_SSH_DIR/$host.started"
if [ -f "$FAKE_SSH_DIR/$host.delay" ]; then sleep "$(cat "$FAKE_SSH_DIR/$host.delay")"; fi
if [ -f "$FAKE_SSH_DIR/$host.json" ]; then exec cat "$FAKE_SSH_DIR/$host.json"; fi
echo "ssh: Could not resolve hostname $host: Name or service not known" >&2
exit 255
"#;

/// Caps JSON for one host with one accelerator of `mem_gib` GiB.
pub fn caps(hostname: &str, id: &str, device: &str, mem_gib: u64) -> String {
    format!(
        r#"{{"id":"{id}","hostname":"{hostname}","os":"linux","arch":"x86_64","cores":32,
"ram_total":68719476736,"ram_avail":60000000000,"devices":[{{"device":"{device}",
"name":"test {device}","mem_bytes":{},"unified":false,"gflops":0,"available":true}}]}}"#,
        mem_gib << 30
    )
}

/// A temp directory holding the fake ssh, its hosts and the config files.
pub struct Cluster {
    pub dir: TempDir,
}

impl Cluster {
    pub fn new() -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let hosts = dir.path().join("hosts");
        std::fs::create_dir(&hosts).unwrap();
        let ssh = dir.path().join("fake-ssh");
        std::fs::write(&ssh, FAKE_SSH).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).unwrap();
        Cluster { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Makes `name` answer with `caps_json`.
    pub fn host(&self, name: &str, caps_json: &str) {
        std::fs::write(self.path("hosts").join(format!("{name}.json")), caps_json).unwrap();
    }

    /// Makes `name` stop answering.
    pub fn remove_host(&self, name: &str) {
        let _ = std::fs::remove_file(self.path("hosts").join(format!("{name}.json")));
    }

    /// Makes `name` take `secs` seconds to answer.
    pub fn delay_host(&self, name: &str, secs: f64) {
        std::fs::write(
            self.path("hosts").join(format!("{name}.delay")),
            secs.to_string(),
        )
        .unwrap();
    }

    /// True once a probe of `name` has started.
    pub fn probe_started(&self, name: &str) -> bool {
        self.path("hosts").join(format!("{name}.started")).exists()
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `rlx-discover` set up to use the fake ssh, run in the temp dir.
    pub fn command(&self) -> Command {
        let mut c = Command::new(rlx_lab::kit::discover_bin());
        self.configure(&mut c);
        c
    }

    /// Runs `c` in the temp dir with the fake ssh's environment.
    pub fn configure(&self, c: &mut Command) {
        c.current_dir(self.dir.path())
            .env("RLX_SSH_PROGRAM", self.path("fake-ssh"))
            .env("FAKE_SSH_DIR", self.path("hosts"))
            .env("SOURCE_DATE_EPOCH", SOURCE_DATE_EPOCH)
            .env("RLX_NETNS_GUARD", "1")
            .env_remove("RUST_LOG");
    }

    /// Runs `rlx-discover expand <args> --no-mdns`.
    pub fn expand(&self, args: &[&str]) -> Run {
        let mut c = self.command();
        c.arg("expand").args(args).arg("--no-mdns");
        Run::of(c)
    }
}

/// Mode bits of a file.
pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}
