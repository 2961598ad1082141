//! **Who is who, at admission** — each admitted sighting's proved node key
//! judged against the pins once all of a run's handshakes are in: pinned,
//! new (pinned now), another machine's key for a pinned id, or no proof for
//! a pinned id (docs/security.md, "Who is who").

use super::hold::{Hold, PinHold, PIN_HOLD};
use crate::pins::{Judgement, Pins};
use crate::sighting::{Evidence, PinClash, Pinning, Problem, Sighting};
use rlx_proto::identity::NodePublicKey;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// Outcome for one sighting: admitted with the node key its handshake
/// proved (if any), or refused.
pub(super) enum Verdict {
    Admit(Box<Sighting>, Option<NodePublicKey>),
    Refuse(Problem),
}

/// Judges every admitted sighting's node key against the pins, after all
/// the run's handshakes are in: the pinned key is [`Pinning::Pinned`], a
/// new id is pinned ([`Pinning::New`]) and the pins file written, and
/// another key for a pinned id is refused ([`refuse_pin_clash`]).
///
/// An id that two keys claim in the same run, neither pinned, pins
/// neither: which one answered first says nothing about which is real.
/// Both go on as new (the pipeline's clash rule then decides, as for any
/// two machines claiming one id), and the next run pins the one written.
/// Pins are read again first, so a `pins forget` since the last run (or,
/// for `watch`, since the last check) counts.
///
/// With a `hold` (a coordinator that never stops, whose admissions finish
/// one by one), a new id's key is pinned only once it has been the id's
/// only claimant for [`super::hold::PIN_HOLD`] ([`super::hold`]).
pub(super) fn judge_identities(
    verdicts: Vec<Verdict>,
    pins: &Mutex<Pins>,
    hold: Option<&Mutex<PinHold>>,
) -> Vec<Verdict> {
    let claimed = |v: &Verdict| match v {
        Verdict::Admit(s, Some(k)) if !s.id().unwrap_or_default().is_empty() => {
            Some((s.id().unwrap_or_default().to_string(), *k))
        }
        _ => None,
    };
    let names_id =
        |v: &Verdict| matches!(v, Verdict::Admit(s, _) if !s.id().unwrap_or_default().is_empty());
    if !verdicts.iter().any(names_id) {
        return verdicts;
    }
    let mut pins = pins.lock().expect("pins lock");
    if let Err(e) = pins.reload() {
        tracing::warn!("{e}; judging node keys by the pins read earlier");
    }
    // A pinned id is the pinned key's, whatever else the reply says: a
    // reply that leaves `node_key` out (or caps that came from no
    // handshake at all) cannot take it, or the pin would be downgraded by
    // omission.
    let verdicts: Vec<Verdict> = verdicts
        .into_iter()
        .map(|v| match v {
            Verdict::Admit(s, None) => match s.id().and_then(|id| pins.get(id)) {
                Some(pin) => refuse_unproved_pin(&s, &pins, &pin.key),
                None => Verdict::Admit(s, None),
            },
            v => v,
        })
        .collect();
    let mut keys_of: HashMap<String, BTreeSet<NodePublicKey>> = HashMap::new();
    for (id, k) in verdicts.iter().filter_map(claimed) {
        keys_of.entry(id).or_default().insert(k);
    }
    let mut pinned_now = false;
    let out = verdicts
        .into_iter()
        .map(|v| {
            let Some((id, key)) = claimed(&v) else {
                return v;
            };
            let Verdict::Admit(mut s, k) = v else {
                return v;
            };
            match pins.judge(&id, &key) {
                Judgement::Pinned => s.identity = Pinning::Pinned,
                Judgement::Clash { pinned } => return refuse_pin_clash(&s, &pins, &pinned, &key),
                Judgement::New => {
                    s.identity = Pinning::New;
                    let alone = keys_of.get(&id).is_some_and(|ks| ks.len() == 1);
                    let held = match (alone, hold) {
                        (false, _) => Hold::Contested { began: true },
                        (true, None) => Hold::Pin,
                        (true, Some(h)) => {
                            h.lock()
                                .expect("pin hold lock")
                                .observe(&id, key, tokio::time::Instant::now())
                        }
                    };
                    match held {
                        Hold::Pin => {
                            pins.pin(&id, key, s.caps.as_ref().map_or(&s.host, |c| &c.hostname));
                            pinned_now = true;
                            tracing::info!(%id, host = %s.host, "pinned node key {}", key.fingerprint());
                        }
                        Hold::Wait => tracing::debug!(%id, "a new node key: pinned once it has claimed this id alone for {} s", PIN_HOLD.as_secs()),
                        Hold::Contested { began: true } => tracing::warn!(%id, "two node keys claim this id within {} s: pinning neither until one is gone", PIN_HOLD.as_secs()),
                        Hold::Contested { began: false } => tracing::debug!(%id, "still two node keys for this id: pinning neither"),
                    }
                }
            }
            Verdict::Admit(s, k)
        })
        .collect();
    if pinned_now {
        if let Err(e) = pins.save(&[]) {
            tracing::warn!("{e}; the new pins are kept in memory for this run only");
        }
    }
    out
}

/// The loud refusal of a known node id that proved another node key: the
/// user's concern (it fails the run), naming the id, both fingerprints and
/// the command that re-pins it after a real reinstall.
fn refuse_pin_clash(
    s: &Sighting,
    pins: &Pins,
    pinned: &NodePublicKey,
    shown: &NodePublicKey,
) -> Verdict {
    let id = s.id().unwrap_or_default();
    let fix = pins.forget_command(id);
    let kept = pins.path().map_or_else(
        || "in memory for this run".to_string(),
        |p| format!("in {}", p.display()),
    );
    let reason = format!(
        "refused: node id {id} proved another node key than the one pinned for it: pinned {} \
         ({kept}), shown {}; another machine claims this id (a member posing as another, a \
         cloned disk), or this machine was reinstalled: only after a real reinstall, re-pin \
         it: {fix}",
        pinned.fingerprint(),
        shown.fingerprint()
    );
    let mut p = Problem::new(s.source, s.host.clone(), reason)
        .claiming(Some(s.addr.clone()), Some(id.to_string()));
    p.pin_clash = Some(PinClash {
        pinned: pinned.fingerprint(),
        shown: shown.fingerprint(),
        pins_file: pins.path().map(Into::into),
        fix,
    });
    Verdict::Refuse(p)
}

/// The refusal of a sighting that names a pinned node id without proving
/// the pinned key: a reply with its `node_key` and `node_sig` left out, an
/// older agent, or caps from TXT alone. Loud (it fails the run, like a
/// clash): either a member or a stranger poses as the pinned machine, or
/// that machine was reinstalled with an agent too old to have a node key.
fn refuse_unproved_pin(s: &Sighting, pins: &Pins, pinned: &NodePublicKey) -> Verdict {
    let id = s.id().unwrap_or_default();
    let kept = pins.path().map_or_else(
        || "in memory for this run".to_string(),
        |p| format!("in {}", p.display()),
    );
    let how = match s.evidence {
        Evidence::Handshake | Evidence::Authenticated => "its handshake proves no node key",
        _ => "it answered no handshake, so it proves no node key",
    };
    let reason = format!(
        "refused: node id {id} is pinned to node key {} ({kept}), and {how}: a pinned id is \
         admitted only with a signature by its pinned key (another machine posing as it with \
         the key left out, or an agent too old to have one); if this machine really was \
         reinstalled with an older agent, upgrade it, or re-pin: {}",
        pinned.fingerprint(),
        pins.forget_command(id)
    );
    let mut p = Problem::new(s.source, s.host.clone(), reason)
        .claiming(Some(s.addr.clone()), Some(id.to_string()));
    p.pin_clash = Some(PinClash {
        pinned: pinned.fingerprint(),
        shown: "none".into(),
        pins_file: pins.path().map(Into::into),
        fix: pins.forget_command(id),
    });
    Verdict::Refuse(p)
}
