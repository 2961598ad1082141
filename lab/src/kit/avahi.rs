//! **avahi-daemon inside a lab host**, for the tests that run beside it or
//! against it and for the benchmark that measures it: avahi needs a system
//! D-Bus, so a private `dbus-daemon` listens on a socket under the lab's log
//! directory (a permissive policy, its clients pointed at it with
//! `DBUS_SYSTEM_BUS_ADDRESS`); avahi-daemon runs with a private `/run` (its
//! pid file and socket) and its own `/etc/avahi/services` (only the services
//! asked for, never the machine's), so nothing of the machine's own avahi is
//! touched. Callers check [`Peer::Avahi`](super::peer::Peer::Avahi) first.
//!
//! ```no_run
//! # use rlx_lab::{kit::avahi::{Avahi, AvahiOptions}, Lab};
//! # let lab = Lab::loopback()?;
//! let avahi = Avahi::start(&lab, 0, &AvahiOptions::default())?;
//! let out = avahi.client(&lab, "avahi-browse").args(["-rpt", "_rlx._tcp"]).output()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use super::proc::Proc;
use crate::error::{LabError, Result};
use crate::topology::Lab;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long the bus and the daemon may take to come up: about 1 s on an
/// idle box, much more with a hundred publishers starting beside them.
const READY: Duration = Duration::from_secs(30);

/// What the daemon publishes and calls itself.
#[derive(Debug, Clone, Default)]
pub struct AvahiOptions {
    /// Services published from static service files, as
    /// [`SERVICE`](rlx_proto::service::SERVICE).
    pub services: Vec<StaticService>,
    /// Its host name (`host-name=`); `None` keeps avahi's default, the
    /// machine's (every namespace shares the machine's UTS name).
    pub host_name: Option<String>,
}

/// One [`SERVICE`](rlx_proto::service::SERVICE) instance in a static
/// service file.
#[derive(Debug, Clone)]
pub struct StaticService {
    /// The instance name.
    pub name: String,
    /// The SRV port.
    pub port: u16,
    /// The TXT strings, `key=value`, in wire order.
    pub txt: Vec<String>,
}

/// avahi-daemon in one lab host and the private D-Bus it needs; both are
/// stopped on drop, the daemon first. The daemon can be restarted (an empty
/// cache) while the bus stays.
pub struct Avahi {
    host: usize,
    dir: PathBuf,
    bus: String,
    // Declared before the bus: fields drop in order.
    daemon: Option<Proc>,
    dbus: Proc,
}

impl Avahi {
    /// Starts the bus and the daemon in host `i`; returns once avahi logged
    /// "Server startup complete".
    pub fn start(lab: &Lab, i: usize, opts: &AvahiOptions) -> Result<Avahi> {
        super::peer::ensure(super::peer::Peer::Avahi).map_err(LabError::Unsupported)?;
        let dir = lab.log_dir().join(format!("avahi-h{i}"));
        let services = dir.join("services");
        write(&services, None)?;
        let sock = dir.join("bus");
        write(&dir.join("dbus.conf"), Some(&bus_config(&sock)))?;
        write(
            &dir.join("avahi-daemon.conf"),
            Some(&daemon_config(lab, i, opts)),
        )?;
        for (n, s) in opts.services.iter().enumerate() {
            write(
                &services.join(format!("s{n}.service")),
                Some(&service_file(s)),
            )?;
        }
        let mut c = Command::new("dbus-daemon");
        c.arg(format!("--config-file={}", dir.join("dbus.conf").display()))
            .args(["--nofork", "--nopidfile", "--print-address"]);
        let dbus = Proc(lab.spawn(i, c)?);
        dbus.wait_for_output("unix:path", READY)
            .map_err(LabError::NotReady)?;
        let mut a = Avahi {
            host: i,
            dir,
            bus: format!("unix:path={}", sock.display()),
            daemon: None,
            dbus,
        };
        a.restart(lab)?;
        Ok(a)
    }

    /// (Re)starts avahi-daemon: a fresh daemon has an empty cache. Returns
    /// once it logged "Server startup complete".
    pub fn restart(&mut self, lab: &Lab) -> Result<()> {
        if let Some(d) = self.daemon.take() {
            d.kill();
        }
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "mount -t tmpfs tmpfs /run && mount --bind {svc} /etc/avahi/services && \
                 exec avahi-daemon --no-chroot --no-drop-root --no-rlimits -f {conf}",
                svc = self.dir.join("services").display(),
                conf = self.dir.join("avahi-daemon.conf").display()
            ))
            .env("DBUS_SYSTEM_BUS_ADDRESS", &self.bus);
        let d = Proc(lab.spawn(self.host, c)?);
        d.wait_for_output("Server startup complete", READY)
            .map_err(LabError::NotReady)?;
        self.daemon = Some(d);
        Ok(())
    }

    /// A client command (`avahi-browse`, `avahi-publish`, ...) in the
    /// daemon's host, on its bus.
    pub fn client(&self, lab: &Lab, program: &str) -> Command {
        let mut c = lab.command(self.host, program);
        c.env("DBUS_SYSTEM_BUS_ADDRESS", &self.bus);
        c
    }

    /// `avahi-publish -s ARGS` (name, type, port, TXT strings) in the
    /// daemon's host, once the daemon says the service is established;
    /// withdrawn when the returned process is dropped.
    pub fn publish(&self, lab: &Lab, args: &[&str]) -> Result<Proc> {
        let mut c = self.client(lab, "avahi-publish");
        c.arg("-s").args(args);
        let p = Proc(lab.spawn(self.host, c)?);
        p.wait_for_output("Established under name", READY)
            .map_err(LabError::NotReady)?;
        Ok(p)
    }

    /// What the daemon logged so far (it runs in the foreground, so its log
    /// is its stderr and stdout), e.g. to check that it took no packet of
    /// ours for a bad one.
    pub fn log(&self) -> String {
        self.daemon
            .as_ref()
            .map(|d| format!("{}{}", d.stderr(), d.stdout()))
            .unwrap_or_default()
    }

    /// The address of its private system bus, for a program that talks to
    /// avahi-daemon itself (`DBUS_SYSTEM_BUS_ADDRESS`), as the agent's
    /// system responder does through avahi's libdns_sd.
    pub fn bus(&self) -> &str {
        &self.bus
    }

    /// The daemon's PID.
    pub fn daemon_pid(&self) -> Option<u32> {
        self.daemon.as_ref().map(|d| d.pid())
    }

    /// The D-Bus daemon's PID.
    pub fn dbus_pid(&self) -> u32 {
        self.dbus.pid()
    }
}

/// Writes `text` to `path`, or creates the directory `path` for `None`.
fn write(path: &Path, text: Option<&str>) -> Result<()> {
    let done = match text {
        Some(t) => std::fs::write(path, t),
        None => std::fs::create_dir_all(path),
    };
    done.map_err(|source| LabError::Io {
        what: "cannot write avahi's file",
        path: path.to_path_buf(),
        source,
    })
}

/// A system bus listening on `sock` that lets anyone own and call anything:
/// it serves only avahi and the test's clients.
fn bus_config(sock: &Path) -> String {
    format!(
        r#"<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
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
        sock.display()
    )
}

/// avahi on the host's lab link only, IPv6 only where the host has it, no
/// wide-area lookups (nothing may leave the lab) and nothing published but
/// the services asked for.
fn daemon_config(lab: &Lab, i: usize, opts: &AvahiOptions) -> String {
    let host = lab.host(i);
    let name = opts
        .host_name
        .as_ref()
        .map(|n| format!("host-name={n}\n"))
        .unwrap_or_default();
    format!(
        "[server]\n{name}use-ipv4=yes\nuse-ipv6={}\nallow-interfaces={}\nenable-dbus=yes\n\
         [wide-area]\nenable-wide-area=no\n\
         [publish]\npublish-hinfo=no\npublish-workstation=no\n",
        if host.ipv6.is_some() { "yes" } else { "no" },
        host.iface
    )
}

/// An avahi static service file for `s`.
fn service_file(s: &StaticService) -> String {
    let txt: String = s
        .txt
        .iter()
        .map(|t| format!("    <txt-record>{}</txt-record>\n", xml_escape(t)))
        .collect();
    format!(
        "<?xml version=\"1.0\" standalone='no'?>\n<!DOCTYPE service-group SYSTEM \"avahi-service.dtd\">\n\
         <service-group>\n  <name>{}</name>\n  <service>\n    <type>{}</type>\n    <port>{}</port>\n{txt}  </service>\n</service-group>\n",
        xml_escape(&s.name),
        rlx_proto::service::SERVICE,
        s.port,
    )
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
