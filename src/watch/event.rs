//! **The events of `watch`** — what a member's stream is made of, and the
//! grammar every stream obeys: per instance, `joined`, then (`updated` |
//! `restarted` | `worker`)*, then `left`, and so on. [`Out`] is the one way events
//! leave the engine, and it holds that grammar as an invariant: an event
//! that would break it is a bug of the engine, which panics in debug builds
//! (every test) and is logged as an error and dropped in release builds, so
//! a runtime reading the stream never sees two joins without a left, nor a
//! left without a join.

use crate::pipeline::report::AddedNode;
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;
use tokio::time::Instant;

/// The version of the event schema, the `"v"` of every JSON line. Raised
/// only when a field changes meaning or goes away; fields and event kinds
/// are added without raising it (a reader ignores what it does not know).
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// What happened to a member. More kinds will come (the stream's schema
/// adds kinds without a new version, docs/json.md), so a match needs a
/// `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Kind {
    /// Admitted: a new member.
    Joined,
    /// A member whose caps or address changed materially.
    Updated,
    /// A member whose agent restarted (its incarnation changed): same
    /// instance, but whatever the worker held is gone.
    Restarted,
    /// A member whose worker started or stopped listening on its worker
    /// port (`node.worker_listening` says which): the member itself, its
    /// agent, is still there.
    Worker,
    /// A member gone: goodbye, failed health check, or DNS registration gone.
    Left,
    /// A candidate refused (malformed, unreachable, untrusted), once per
    /// host and reason.
    Refused,
}

impl Kind {
    /// The word printed for it: `joined`, `updated`, `restarted`, `worker`,
    /// `left`, `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Joined => "joined",
            Kind::Updated => "updated",
            Kind::Restarted => "restarted",
            Kind::Worker => "worker",
            Kind::Left => "left",
            Kind::Refused => "refused",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: the human lines align it with `{:<9}`.
        f.pad(self.as_str())
    }
}

/// One membership event; serialized, it is the `--json` line of `watch`
/// (docs/json.md). Fields are added without a new schema version, so it
/// is built only by the engine.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Event {
    /// The schema version of the event JSON (docs/json.md): 1 until a
    /// field changes meaning.
    pub v: u32,
    /// `joined`, `updated`, `restarted`, `worker`, `left` or `refused`.
    pub event: Kind,
    /// Milliseconds since the watch started.
    pub at_ms: u64,
    /// The instance name announced over mDNS (`<instance> (dns)` for DNS).
    pub instance: String,
    /// The node as the pipeline made it (absent for `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<AddedNode>,
    /// The agent's incarnation as its handshake told it (absent for
    /// `refused` and for agents that predate it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
    /// Why (for `left`, `updated`, `restarted`, `worker` and `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where events go, stamped with the time since the start, through the
/// stream grammar (see the module doc).
pub(super) struct Out<E> {
    pub(super) started: Instant,
    pub(super) emit: E,
    /// The instances reported joined and not yet left: as many as the
    /// engine's members, so bounded as they are.
    joined: BTreeSet<String>,
}

impl<E: FnMut(Event)> Out<E> {
    pub(super) fn new(started: Instant, emit: E) -> Self {
        Out {
            started,
            emit,
            joined: BTreeSet::new(),
        }
    }

    /// Emits one event, unless it would break the stream's grammar.
    pub(super) fn emit(
        &mut self,
        event: Kind,
        instance: &str,
        node: Option<&AddedNode>,
        incarnation: Option<&str>,
        reason: Option<String>,
    ) {
        let fits = match event {
            Kind::Joined => self.joined.insert(instance.to_string()),
            Kind::Left => self.joined.remove(instance),
            Kind::Updated | Kind::Restarted | Kind::Worker => self.joined.contains(instance),
            Kind::Refused => true,
        };
        if !fits {
            let what = if event == Kind::Joined {
                "a second join without a left"
            } else {
                "an event of an instance that has not joined"
            };
            if cfg!(debug_assertions) {
                panic!("watch stream grammar broken: `{event} {instance}` is {what}");
            }
            tracing::error!(
                "watch bug: dropped `{event} {instance}`, {what} (please report it with the \
                 --json output around it)"
            );
            return;
        }
        let at_ms = self.started.elapsed().as_millis() as u64;
        (self.emit)(Event {
            v: SCHEMA_VERSION,
            event,
            at_ms,
            instance: instance.to_string(),
            node: node.cloned(),
            incarnation: incarnation.map(str::to_string),
            reason,
        });
    }
}
