//! **The member table** — the watch's ground floor: who is a member now,
//! under which other names its machine was seen, when each instance last
//! left, and which members are to be dialled; and the two moves every
//! other part ends in: a sighting joined (or taken as news, or as a claim),
//! and a member gone.
//!
//! The other parts (`joins`, `checks`, `goodbyes`, `suspicion`) are handed
//! a `&Members` or `&mut Members` by the engine; this part calls none of
//! them back. A part that finds a member gone does not remove it itself: it
//! returns a [`Leave`], and the engine ([`super::engine`]) departs the
//! member here and schedules the revisit in `goodbyes`. So the call graph
//! between the parts is one-way, down to this one (checked by
//! `.ci/modgraph.py`).

use super::admission::MAX_REMEMBERED;
use super::event::{Event, Kind, Out};
use super::health;
use super::liveness::ProbeFor;
use super::member::{news, Departures, Live, Member};
use super::node::incarnation_of;
use crate::pipeline::node::node_of;
use crate::pipeline::report::AddedNode;
use crate::pipeline::{same_machine, NodeDefaults};
use crate::sighting::{Sighting, Source};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// A member found gone by a part: why, and whether its instance is dialled
/// again later ([`super::goodbyes::CONFIRM_AFTER_GOODBYE`], then on the
/// revisit schedule). The engine acts on it ([`Members::depart`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Leave {
    pub(super) why: String,
    pub(super) revisit: bool,
}

impl Leave {
    /// Gone, its instance revisited: it may come back.
    pub(super) fn revisited(why: String) -> Leave {
        Leave { why, revisit: true }
    }
}

/// A member that left ([`Members::depart`]): it left from `sighting`;
/// `contender`, a sighting under its name with another node id (and its
/// announcement), is to be joined now.
pub(super) struct Departed {
    pub(super) sighting: Sighting,
    pub(super) contender: Option<(Sighting, Option<String>)>,
}

/// The member table and what it takes to make a member: the node
/// defaults, and the jitter of the health checks.
pub(super) struct Members {
    table: BTreeMap<String, Member>,
    /// Instances found to be a member's machine under another name, to
    /// that member's name: at most [`MAX_REMEMBERED`].
    aliases: BTreeMap<String, String>,
    /// When each instance last left, and as which incarnation.
    left: Departures,
    /// Memberships made so far: the next one's generation.
    generation: u64,
    /// Members to dial at the next turn of the loop, and why.
    wanted: Vec<(String, ProbeFor)>,
    making: Making,
}

/// What a member's node and schedule are made with: the node defaults, and
/// the jitter of the health checks. Lent beside a member
/// ([`Members::member_with`]) to the parts that judge it.
pub(super) struct Making {
    defaults: NodeDefaults,
    rng: fastrand::Rng,
}

impl Making {
    /// The node `s` makes, with the watch's defaults.
    pub(super) fn node(&self, s: &Sighting) -> AddedNode {
        node_of(s, &self.defaults)
    }

    /// How long until a member's next health check (jittered,
    /// [`health::next_interval`]).
    pub(super) fn interval(&mut self) -> Duration {
        health::next_interval(&mut self.rng)
    }

    /// The interval before `m`'s next check: [`health::FACTS_INTERVAL`]
    /// (jittered) when its stream tells of its facts and its key is not
    /// waiting to be pinned, else the usual one.
    pub(super) fn interval_for(&mut self, m: &Member) -> Duration {
        // A key seen for the first time is pinned by a later handshake,
        // once it has claimed its id alone for a few seconds
        // (crate::admit::hold): until then the usual pace.
        let pinning = m.node.identity == crate::sighting::Pinning::New;
        if m.told_facts() && !pinning {
            health::facts_interval(&mut self.rng)
        } else {
            self.interval()
        }
    }
}

impl Members {
    /// No members yet; their nodes built with `defaults`.
    pub(super) fn new(defaults: NodeDefaults) -> Self {
        Members {
            table: BTreeMap::new(),
            aliases: BTreeMap::new(),
            left: Departures::default(),
            generation: 0,
            wanted: Vec::new(),
            making: Making {
                defaults,
                rng: fastrand::Rng::new(),
            },
        }
    }

    /// The health checks' jitter from a fixed seed: a replayable schedule.
    #[cfg(test)]
    pub(super) fn reseed(&mut self, seed: u64) {
        self.making.rng = fastrand::Rng::with_seed(seed);
    }

    /// Makes `m` member `label` as it is (a test's starting point).
    #[cfg(test)]
    pub(super) fn put(&mut self, label: String, m: Member) {
        self.table.insert(label, m);
    }

    /// Member `label`.
    pub(super) fn member(&self, label: &str) -> Option<&Member> {
        self.table.get(label)
    }

    /// Member `label`, to change.
    pub(super) fn member_mut(&mut self, label: &str) -> Option<&mut Member> {
        self.table.get_mut(label)
    }

    /// Member `label` if it is still the membership `generation` (a job
    /// started for an earlier one says nothing of this one).
    pub(super) fn member_of(&mut self, label: &str, generation: u64) -> Option<&mut Member> {
        self.table
            .get_mut(label)
            .filter(|m| m.generation == generation)
    }

    /// Member `label` of membership `generation`, with what its news is
    /// made with.
    pub(super) fn member_with(
        &mut self,
        label: &str,
        generation: u64,
    ) -> Option<(&mut Member, &mut Making)> {
        let m = self
            .table
            .get_mut(label)
            .filter(|m| m.generation == generation)?;
        Some((m, &mut self.making))
    }

    /// Whether `label` is a member.
    pub(super) fn has(&self, label: &str) -> bool {
        self.table.contains_key(label)
    }

    /// Every member, by name.
    pub(super) fn each(&self) -> impl Iterator<Item = (&String, &Member)> {
        self.table.iter()
    }

    /// Every member, by name, to change.
    pub(super) fn each_mut(&mut self) -> impl Iterator<Item = (&String, &mut Member)> {
        self.table.iter_mut()
    }

    /// How many members there are.
    pub(super) fn size(&self) -> usize {
        self.table.len()
    }

    /// The member a claim under `label` is about: the member of that name,
    /// or the one whose machine `label` names too (a goodbye for any of a
    /// machine's names checks it).
    pub(super) fn claimed_about(&mut self, label: &str) -> Option<&mut Member> {
        let label = match self.aliases.get(label) {
            Some(k) if !self.table.contains_key(label) => k.as_str(),
            _ => label,
        };
        self.table.get_mut(label)
    }

    /// Whether `s`, from a handshake with `label` started at `started`, is
    /// the last word of the incarnation that has left since.
    pub(super) fn last_word(&self, label: &str, started: Instant, s: &Sighting) -> bool {
        self.left.last_word(label, started, s)
    }

    /// The DNS members missing from a browse of the zone that found
    /// `present`: each one's machine is checked, like a goodbye's.
    pub(super) fn missing_from_zone(&mut self, present: &BTreeSet<String>, now: Instant) {
        for (k, m) in &mut self.table {
            if m.sighting.source == Source::Dns && !present.contains(k) {
                tracing::debug!("{k}: missing from the zone; checking its machine");
                m.farewell
                    .claimed_because(now, "DNS registration missing from the zone");
            }
        }
    }

    /// Asks for member `label` to be dialled at the next turn of the loop.
    pub(super) fn dial_soon(&mut self, label: &str, why: ProbeFor) {
        if !self.wanted.iter().any(|(l, _)| l == label) {
            self.wanted.push((label.to_string(), why));
        }
    }

    /// The dials asked for since the last turn.
    pub(super) fn take_wanted(&mut self) -> Vec<(String, ProbeFor)> {
        std::mem::take(&mut self.wanted)
    }

    /// A sighting the machine itself confirmed: news of the member of its
    /// name when it is that member where it is (restarted when its
    /// incarnation changed, updated when its caps did materially); a claim
    /// checked against that member when it is not (another address, or
    /// another node id: kept as the member's contender, see
    /// [`Members::depart`]); nothing new when it is the machine of another
    /// member; else a new member (joined).
    pub(super) fn join_or_update(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        s: Sighting,
        announced: Option<String>,
    ) {
        let label = s.host.clone();
        let node = self.making.node(&s);
        let inc = incarnation_of(&s);
        if let Some(m) = self.table.get_mut(&label) {
            if m.is_here(&s) {
                news(out, &label, m, &node, inc);
                m.sighting = s;
                m.node = node;
                m.announced = announced;
            } else {
                tracing::debug!(
                    "{label}: a sighting at {} (id {}) under its name; checking the member at {}",
                    s.addr,
                    s.id().unwrap_or("none"),
                    m.sighting.addr
                );
                m.contender = Some((s, announced));
                m.farewell.claimed(Instant::now());
            }
            return;
        }
        // The same machine already a member under another name (mDNS and
        // DNS both list a LAN agent, or a stranger announced a phantom
        // instance at a member's address): one member, by the rule
        // `expand` merges with. Its goodbyes are claims about that member.
        let twin = self
            .table
            .iter()
            .find(|(_, m)| same_machine(&m.sighting, &s));
        if let Some((k, _)) = twin {
            tracing::debug!("{label} is {k}'s machine, already a member: one member");
            if self.aliases.len() >= MAX_REMEMBERED {
                self.aliases.pop_first();
            }
            self.aliases.insert(label, k.clone());
            return;
        }
        self.aliases.remove(&label);
        out.emit(Kind::Joined, &label, Some(&node), inc.as_deref(), None);
        self.generation += 1;
        let next_check = Instant::now() + self.making.interval();
        let member = Member::new(s, node, (announced, inc), self.generation, next_check);
        self.table.insert(label, member);
    }

    /// Member `label` is no longer where it was (its check failed, or its
    /// address answers as another machine): a contender with its node id
    /// is the member moved (a new lease: `updated`, or `restarted`, in
    /// place); else it has `left`, with `why`, and the engine joins a
    /// contender with another id under the name, and revisits the
    /// instance if it is to be. `None`: not a member (it left meanwhile),
    /// or moved, nothing left.
    pub(super) fn depart(
        &mut self,
        out: &mut Out<impl FnMut(Event)>,
        label: &str,
        why: String,
    ) -> Option<Departed> {
        let mut m = self.table.remove(label)?;
        let contender = m.contender.take();
        if let Some((c, announced)) = contender.as_ref().filter(|(c, _)| m.answers_as(c)) {
            let node = self.making.node(c);
            news(out, label, &mut m, &node, incarnation_of(c));
            m.node = node;
            m.sighting = c.clone();
            m.announced = announced.clone();
            m.failed_once = false;
            m.next_check = Some(Instant::now() + self.making.interval());
            // Its stream was to the old address, or of the old process.
            m.live = Live::Off {
                retry: Instant::now(),
            };
            m.dark = None;
            m.held = false;
            if m.suspicion.take().is_some() {
                let why = format!("it answers at {}", m.sighting.addr);
                out.emit(
                    Kind::Up,
                    label,
                    Some(&m.node),
                    m.incarnation.as_deref(),
                    Some(why),
                );
            }
            self.table.insert(label.to_string(), m);
            return None;
        }
        out.emit(
            Kind::Left,
            label,
            Some(&m.node),
            m.incarnation.as_deref(),
            Some(why),
        );
        self.left.record(label, m.incarnation.clone());
        Some(Departed {
            sighting: m.sighting,
            contender,
        })
    }
}
