//! **What an announcement is asked to be, and how it fails** — the
//! options, the responder choice, the error type and the registration that
//! stays the same across updates: shared by the announcer and both
//! responders ([`super::builtin`], [`super::system`]).

use crate::naming::NameError;
use rlx_net::iface::IfaceError;
use rlx_net::netguard::GuardError;
use rlx_proto::txt::TxtError;
use std::fmt;
use std::time::Duration;

use crate::change::MIN_REANNOUNCE_INTERVAL;

/// How long to wait for the daemon to confirm an unregister or a shutdown.
/// It answers within milliseconds; two seconds means its thread is stuck.
pub(super) const DAEMON_REPLY_TIMEOUT: Duration = Duration::from_secs(2);

/// Which responder sends the announcement (see "Responders" above).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Responder {
    /// The system's on macOS (mDNSResponder), falling back to the built-in
    /// one when it cannot be reached; the built-in one elsewhere.
    #[default]
    Auto,
    /// The built-in responder (the vendored mdns-sd), on every platform.
    Builtin,
    /// The system's, through the DNS-SD client API: mDNSResponder on macOS,
    /// avahi-daemon through avahi's libdns_sd on Linux. No fallback.
    System,
}

impl Responder {
    /// Whether this choice means the system responder on this platform.
    pub fn wants_system(self) -> bool {
        match self {
            Responder::Auto => cfg!(target_os = "macos"),
            Responder::Builtin => false,
            Responder::System => true,
        }
    }
}

impl fmt::Display for Responder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Responder::Auto => "auto",
            Responder::Builtin => "builtin",
            Responder::System => "system",
        })
    }
}

/// How the node is announced. `Default` gives port
/// [`rlx_proto::service::DEFAULT_WORKER_PORT`], the host name as instance
/// name, the default interface rule, the platform's responder and
/// [`MIN_REANNOUNCE_INTERVAL`].
#[derive(Debug, Clone)]
pub struct AnnounceOptions {
    /// Instance name; `None` = the host name's first label.
    pub name: Option<String>,
    /// The worker port, announced in the SRV record (RFC 6763 §5: where the
    /// service is). The agent's own port rides in TXT
    /// ([`rlx_proto::txt::AGENT_PORT_KEY`]), from the caps.
    pub port: u16,
    /// Interfaces to announce on; empty = the default rule.
    pub interfaces: Vec<String>,
    /// Shortest time between re-announcements of changed caps.
    pub min_interval: Duration,
    /// Which responder sends the packets.
    pub responder: Responder,
}

impl Default for AnnounceOptions {
    fn default() -> Self {
        AnnounceOptions {
            name: None,
            port: rlx_proto::service::DEFAULT_WORKER_PORT,
            interfaces: Vec::new(),
            min_interval: MIN_REANNOUNCE_INTERVAL,
            responder: Responder::Auto,
        }
    }
}

/// Why announcing failed. Each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum AnnounceError {
    /// The network-namespace guard refused (tests only, `RLX_NETNS_GUARD=1`).
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// A named interface does not exist or is down, or none could be listed.
    #[error("cannot choose interfaces for mDNS: {0}")]
    Interfaces(IfaceError),
    /// The caps cannot be written as TXT schema v1.
    #[error("cannot announce these caps: {0}")]
    Txt(TxtError),
    /// The instance name is not usable.
    #[error(transparent)]
    Name(#[from] NameError),
    /// mdns-sd refused or failed an operation.
    #[error("mDNS: cannot {what}: {error}")]
    Mdns {
        /// What was being done (`start the daemon`, `register ...`).
        what: String,
        /// mdns-sd's error (in the message, not a `source()`).
        error: mdns_sd::Error,
    },
    /// The system responder (mDNSResponder, avahi) or its client library
    /// is missing or refused.
    #[error("mDNS through the system responder: {0}")]
    System(String),
    /// The daemon did not answer in time.
    #[error("mDNS: the daemon did not confirm {what} within {DAEMON_REPLY_TIMEOUT:?}; goodbye packets may not have been sent")]
    Timeout {
        /// What was waited for.
        what: &'static str,
    },
    /// [`super::Announcer::start`] was called outside a tokio runtime.
    #[error("Announcer::start must be called from within a tokio runtime (it spawns the task that watches the mDNS daemon)")]
    NoRuntime,
}

// By hand, not `#[from]`: that would also make the cause the error's
// `source()`, and `{:#}` would print it a second time after the message
// that already says it (`--interface eth9` named its missing interface twice).
impl From<IfaceError> for AnnounceError {
    fn from(e: IfaceError) -> Self {
        AnnounceError::Interfaces(e)
    }
}

impl From<TxtError> for AnnounceError {
    fn from(e: TxtError) -> Self {
        AnnounceError::Txt(e)
    }
}

pub(super) fn mdns_err(what: impl Into<String>) -> impl FnOnce(mdns_sd::Error) -> AnnounceError {
    let what = what.into();
    move |error| AnnounceError::Mdns { what, error }
}

/// What stays the same across re-registrations.
#[derive(Debug, Clone)]
pub(super) struct Registration {
    pub(super) instance: String,
    pub(super) host: String,
    pub(super) port: u16,
}

#[cfg(test)]
mod cause_tests {
    use super::*;

    /// `rlx-agent --interface eth9` said "no network interface named
    /// \"eth9\"" twice: in the message, then again as its cause.
    #[test]
    fn an_unknown_interface_is_named_once_in_the_printed_chain() {
        let e = AnnounceError::from(IfaceError::Unknown {
            name: "eth9".into(),
            available: "lo".into(),
        });
        let printed = format!("{:#}", anyhow::Error::from(e));
        assert_eq!(
            printed.matches("no network interface named").count(),
            1,
            "{printed}"
        );
    }
}
