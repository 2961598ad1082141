//! **The events of `watch`** — what a member's stream is made of, and the
//! grammar every stream obeys: per instance, `joined`, then (`updated` |
//! `restarted` | `worker` | `suspect` `up`?)*, then `left`, and so on: a
//! `suspect` member is `up` again or `left`, never suspect twice, and `up`
//! only follows a suspicion. `partitioned` names many members at once and
//! makes each it names unreachable a suspect (an `up` or a `left` ends it).
//! [`Out`] is the one way events
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
    /// A member that stopped answering while its host still does (a stalled
    /// or busy agent), or that went dark in a partition: not gone, and
    /// possibly back at any moment (`up`), or `left` once its death is
    /// confirmed or its suspicion times out (docs/membership.md).
    Suspect,
    /// A suspect member answering again.
    Up,
    /// More than half of the cluster went dark at once: one event naming
    /// what the coordinator can and cannot reach (`reachable`,
    /// `unreachable`) instead of a `left` for each; `instance` is
    /// [`PARTITION_INSTANCE`].
    Partitioned,
    /// A candidate refused (malformed, unreachable, untrusted), once per
    /// host and reason.
    Refused,
}

impl Kind {
    /// The word printed for it: `joined`, `updated`, `restarted`, `worker`,
    /// `left`, `suspect`, `up`, `partitioned`, `refused`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Joined => "joined",
            Kind::Updated => "updated",
            Kind::Restarted => "restarted",
            Kind::Worker => "worker",
            Kind::Left => "left",
            Kind::Suspect => "suspect",
            Kind::Up => "up",
            Kind::Partitioned => "partitioned",
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
    /// `joined`, `updated`, `restarted`, `worker`, `left`, `suspect`,
    /// `up`, `partitioned` or `refused`.
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
    /// Why (for `left`, `updated`, `restarted`, `worker`, `suspect`, `up`,
    /// `partitioned` and `refused`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `partitioned`: the members still reachable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reachable: Option<Vec<String>>,
    /// For `partitioned`: the members that went dark, each now a suspect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable: Option<Vec<String>>,
    /// Which `[[node]]` of the cluster file the member is, by the identity
    /// rule `expand` uses, and whether that node is up after this event:
    /// set by a watch given the file ([`crate::LiveWatch::with_file`]);
    /// absent without one, and for a member that is none of its nodes (a
    /// newcomer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_file: Option<InFile>,
}

/// Which node of the cluster file an event is about
/// ([`Event::in_file`]), and its state after the event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InFile {
    /// The node's index among the file's `[[node]]` tables (0-based).
    pub node: usize,
    /// Its `addr` in the file.
    pub addr: String,
    /// The 1-based line of its `[[node]]` header.
    pub line: usize,
    /// Whether it is up after this event.
    pub up: bool,
}

/// The `instance` of a `partitioned` event, which is about the cluster,
/// not one member. A member could carry the same name (an instance name is
/// free text), so a reader tells the two apart by `event`, never by name.
pub const PARTITION_INSTANCE: &str = "(partition)";

/// Where events go, stamped with the time since the start, through the
/// stream grammar (see the module doc).
pub(super) struct Out<E> {
    pub(super) started: Instant,
    pub(super) emit: E,
    /// The instances reported joined and not yet left: as many as the
    /// engine's members, so bounded as they are.
    joined: BTreeSet<String>,
    /// Of those, the ones suspect now (`suspect`, or unreachable in a
    /// `partitioned`), until `up` or `left`.
    suspect: BTreeSet<String>,
    /// Events emitted so far: the loop tells a turn that changed nothing
    /// anyone sees (a plain pulse) by it not moving.
    pub(super) emitted: u64,
}

impl<E: FnMut(Event)> Out<E> {
    pub(super) fn new(started: Instant, emit: E) -> Self {
        Out {
            started,
            emit,
            joined: BTreeSet::new(),
            suspect: BTreeSet::new(),
            emitted: 0,
        }
    }

    /// Reports a partition: the `unreachable` members (each joined, and a
    /// suspect from now on, if not one already) and the `reachable` ones.
    pub(super) fn partitioned(
        &mut self,
        reachable: Vec<String>,
        unreachable: Vec<String>,
        reason: String,
    ) {
        let strays: Vec<&String> = unreachable
            .iter()
            .filter(|u| !self.joined.contains(*u))
            .collect();
        if !strays.is_empty() {
            self.broken(
                Kind::Partitioned,
                &format!("{strays:?}"),
                "naming members that have not joined",
            );
            return;
        }
        self.suspect.extend(unreachable.iter().cloned());
        let at_ms = self.started.elapsed().as_millis() as u64;
        self.emitted += 1;
        (self.emit)(Event {
            v: SCHEMA_VERSION,
            event: Kind::Partitioned,
            at_ms,
            instance: PARTITION_INSTANCE.to_string(),
            node: None,
            incarnation: None,
            reason: Some(reason),
            reachable: Some(reachable),
            unreachable: Some(unreachable),
            in_file: None,
        });
    }

    /// A bug of the engine: panics in debug builds, logged and dropped in
    /// release builds (see the module doc).
    fn broken(&self, event: Kind, instance: &str, what: &str) {
        if cfg!(debug_assertions) {
            panic!("watch stream grammar broken: `{event} {instance}` is {what}");
        }
        tracing::error!(
            "watch bug: dropped `{event} {instance}`, {what} (please report it with the \
             --json output around it)"
        );
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
        let joined = self.joined.contains(instance);
        let fits = match event {
            Kind::Joined => !joined,
            Kind::Left | Kind::Updated | Kind::Restarted | Kind::Worker => joined,
            Kind::Suspect => joined && !self.suspect.contains(instance),
            Kind::Up => self.suspect.contains(instance),
            Kind::Refused => true,
            // Only through `partitioned`, which names its members.
            Kind::Partitioned => false,
        };
        if !fits {
            let what = match event {
                Kind::Joined => "a second join without a left",
                Kind::Suspect if joined => "a second suspicion without an up",
                Kind::Up => "an up of an instance that is not suspect",
                _ => "an event of an instance that has not joined",
            };
            self.broken(event, instance, what);
            return;
        }
        match event {
            Kind::Joined => {
                self.joined.insert(instance.to_string());
            }
            Kind::Left => {
                self.joined.remove(instance);
                self.suspect.remove(instance);
            }
            Kind::Suspect => {
                self.suspect.insert(instance.to_string());
            }
            Kind::Up => {
                self.suspect.remove(instance);
            }
            _ => {}
        }
        let at_ms = self.started.elapsed().as_millis() as u64;
        self.emitted += 1;
        (self.emit)(Event {
            v: SCHEMA_VERSION,
            event,
            at_ms,
            instance: instance.to_string(),
            node: node.cloned(),
            incarnation: incarnation.map(str::to_string),
            reason,
            reachable: None,
            unreachable: None,
            in_file: None,
        });
    }
}
