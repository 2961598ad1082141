//! **One check's outcome**, shared by the self-checks: the coordinator's
//! `rlx-discover doctor` and the worker's `rlx-agent check`, which print
//! them the same way (ok, warn, fail or skip, and a fix).

use serde::Serialize;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing wrong.
    Ok,
    /// Possibly wrong, or wrong for some of the traffic: worth a look.
    Warn,
    /// Discovery cannot work as configured until this is fixed.
    Fail,
    /// Not checked, and why (another platform, no permission, the guard).
    Skip,
}

impl Status {
    /// The word printed for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// One check's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Which check (doctor's `interfaces`, `multicast route`, `firewall`,
    /// `groups`, `mdns query`, `handshake`, `clock`; `rlx-agent check`'s own).
    pub check: &'static str,
    /// How it came out.
    pub status: Status,
    /// What was seen.
    pub detail: String,
    /// What to do about it, for `warn` and `fail`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// A check's outcome, without a fix.
    pub fn new(check: &'static str, status: Status, detail: impl Into<String>) -> Check {
        Check {
            check,
            status,
            detail: detail.into(),
            fix: None,
        }
    }

    /// The same outcome with what to do about it.
    pub fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
}
