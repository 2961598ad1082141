//! avahi-daemon inside a lab host, for the tests that run beside it or
//! against it: a private D-Bus under the lab's log directory (avahi needs a
//! system bus) and a private `/run` (where it keeps its pid file and socket),
//! so nothing of the host's own avahi is touched.

use super::spawn;
use rlx_lab::{Lab, Proc};
use std::process::Command;
use std::time::Duration;

/// How long the bus and the daemon may take to come up.
const READY: Duration = Duration::from_secs(20);

/// avahi-daemon in host `i`, with a private D-Bus under the lab's log
/// directory and a private `/run`. Returns the processes (stopped on drop)
/// and the bus address for avahi's clients.
pub fn avahi_daemon(lab: &Lab, i: usize) -> (Vec<Proc>, String) {
    let dir = lab.log_dir().join(format!("avahi{i}"));
    std::fs::create_dir_all(&dir).unwrap();
    let bus = dir.join("bus");
    let bus_conf = dir.join("bus.conf");
    std::fs::write(
        &bus_conf,
        format!(
            r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/> <allow send_type="method_call"/>
    <allow send_destination="*"/> <allow receive_sender="*"/>
  </policy>
</busconfig>
"#,
            bus.display()
        ),
    )
    .unwrap();
    let avahi_conf = dir.join("avahi.conf");
    std::fs::write(
        &avahi_conf,
        format!(
            "[server]\nallow-interfaces={}\nuse-ipv6=no\nenable-dbus=yes\n\
             [wide-area]\nenable-wide-area=no\n\
             [publish]\npublish-hinfo=no\npublish-workstation=no\n",
            lab.host(i).iface
        ),
    )
    .unwrap();
    let bus_env = format!("unix:path={}", bus.display());
    let mut dbus = Command::new("dbus-daemon");
    dbus.arg(format!("--config-file={}", bus_conf.display()))
        .args(["--nofork", "--nopidfile", "--print-address"]);
    let dbus = spawn(lab, i, dbus);
    dbus.expect_output("unix:path", READY);
    let mut daemon = Command::new("sh");
    daemon
        .arg("-c")
        .arg(format!(
            "mount -t tmpfs tmpfs /run && exec avahi-daemon --no-chroot --no-drop-root -f {}",
            avahi_conf.display()
        ))
        .env("DBUS_SYSTEM_BUS_ADDRESS", &bus_env);
    // A private /run: avahi-daemon keeps its pid file and socket there.
    let daemon = spawn(lab, i, daemon);
    daemon.expect_output("Server startup complete", READY);
    (vec![daemon, dbus], bus_env)
}
