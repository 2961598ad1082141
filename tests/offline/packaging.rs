//! The agent's packages on every systemd the README names: systemd before
//! 247 (Ubuntu 20.04 and DGX OS 5: 245, Debian 10: 241, RHEL and Rocky 8:
//! 239) ignores `LoadCredential=`, so the packaged agent reads its key
//! itself, through the group `rlx-agent` (docs/security.md, "Keys on older
//! systemd").

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The unit the packages install, as packaging/package.sh writes it.
fn packaged_unit() -> String {
    let out = Command::new("bash")
        .arg("-c")
        .arg(". packaging/package.sh && packaged_unit")
        .current_dir(repo())
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Issue 38, item 2: on systemd before 247 a keyed packaged agent could not
/// read its key (root-only, and no credential) and restarted every 2 s.
/// The packaged unit gives the agent the group `rlx-agent`, and both
/// packages make that group and give it read access to keys already
/// there, on a systemd without credentials only.
#[test]
fn the_packaged_agent_reads_its_key_through_its_group_where_systemd_has_no_credentials() {
    let unit = packaged_unit();
    assert!(
        unit.lines()
            .any(|l| l == "SupplementaryGroups=video render rlx-agent"),
        "the packaged unit adds the group rlx-agent:\n{unit}"
    );
    assert!(unit.contains("LoadCredential=etc-rlx-cluster.key:/etc/rlx/cluster.key"));
    let deb = std::fs::read_to_string(repo().join("packaging/deb/rlx-agent.postinst")).unwrap();
    let rpm = std::fs::read_to_string(repo().join("packaging/rpm/rlx-agent.spec")).unwrap();
    for (name, script) in [("postinst", &deb), ("rpm %post", &rpm)] {
        assert!(
            script.contains("groupadd --system rlx-agent"),
            "{name} makes the group"
        );
        assert!(
            script.contains("-lt 247")
                && script.contains("chgrp rlx-agent \"$k\" && chmod 0640 \"$k\""),
            "{name} opens existing keys to the group before systemd 247 only"
        );
    }
    let build = std::fs::read_to_string(repo().join("packaging/package.sh")).unwrap();
    assert!(
        build.contains("passwd, systemd (>= 235)"),
        "the .deb depends on groupadd and on the systemd its unit needs"
    );
    assert!(
        rpm.contains("Requires(post): shadow-utils")
            && rpm.contains("Requires:       systemd >= 235")
    );
}

/// The unit as it is, parsed by the oldest systemd the README names would
/// need no directive newer than it, except those docs/security.md lists as
/// ignored there: the matrix there is kept in step with the unit.
#[test]
fn every_directive_of_the_unit_is_in_the_systemd_version_matrix() {
    let unit = std::fs::read_to_string(repo().join("worker-agent/rlx-agent.service")).unwrap();
    let security = std::fs::read_to_string(repo().join("docs/security.md")).unwrap();
    let matrix = security
        .split("### systemd versions")
        .nth(1)
        .expect("docs/security.md has a \"systemd versions\" section");
    for line in unit.lines() {
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        if line.starts_with('#') || key.contains(' ') {
            continue;
        }
        assert!(
            matrix.contains(&format!("`{key}=`")),
            "{key}= is not in docs/security.md's systemd version matrix"
        );
    }
}
