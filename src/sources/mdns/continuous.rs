//! **The continuous browse of `watch`** — the multicast path alone, kept
//! running, each event folded into the same instance table as a one-shot
//! browse so that a watched node is decoded, addressed and bounded exactly
//! like a browsed one.

use super::browser::{BrowserEvent, MdnsBrowser};
use super::options::{BrowseOptions, MdnsError};
use super::table::Table;
use super::wire::strip_service;
use crate::sighting::{Problem, Sighting};
use rlx_net::iface;
use rlx_net::netguard;
use std::time::Instant;

/// What changed in a [`ContinuousBrowse`].
#[derive(Debug, Clone)]
pub enum Change {
    /// The current complete instances and the malformed ones (pending
    /// instances, still missing a record, are in neither).
    Snapshot {
        /// One per complete instance, with TXT caps.
        sightings: Vec<Sighting>,
        /// Malformed announcements, with reasons.
        problems: Vec<Problem>,
    },
    /// An instance said goodbye (or expired): its label.
    Removed(String),
}

/// The multicast path alone, kept running: the event source of `watch`.
/// Each event is folded into the same instance table as a one-shot browse,
/// so a watched node is decoded, addressed and bounded exactly like a
/// browsed one.
pub struct ContinuousBrowse {
    browser: MdnsBrowser,
    table: Table,
    opts: BrowseOptions,
    started: Instant,
}

impl ContinuousBrowse {
    /// Starts browsing (guard first, then the interfaces of `opts`).
    pub fn start(opts: &BrowseOptions, started: Instant) -> Result<Self, MdnsError> {
        netguard::ensure_private_netns("an mDNS browse")?;
        let ifaces = iface::select(&opts.interfaces)?;
        if ifaces.is_empty() {
            return Err(MdnsError::NoInterface {
                available: iface::describe(&iface::all_interfaces()?),
            });
        }
        let browser = MdnsBrowser::start(&ifaces)?;
        Ok(ContinuousBrowse {
            browser,
            table: Table::new(ifaces),
            opts: opts.clone(),
            started,
        })
    }

    /// The names of the interfaces browsed.
    pub fn interfaces(&self) -> Vec<String> {
        self.table.ifaces.iter().map(|i| i.name.clone()).collect()
    }

    /// Waits for the next event and says what changed; `None` when the
    /// mDNS daemon is gone for good.
    pub async fn next(&mut self) -> Option<Change> {
        let ev = self.browser.next().await?;
        let now = Instant::now();
        if let BrowserEvent::Removed(fullname) = &ev {
            let label = strip_service(fullname).map(str::to_string);
            self.table.apply_event(&ev, now);
            if let Some(l) = label {
                return Some(Change::Removed(l));
            }
        } else {
            self.table.apply_event(&ev, now);
        }
        // Every snapshot carries every resolved instance; nothing to pass on.
        self.table.newly_resolved.clear();
        let (sightings, problems) = self.table.snapshot(&self.opts, self.started, now, false);
        Some(Change::Snapshot {
            sightings,
            problems,
        })
    }

    /// Stops the daemon.
    pub fn shutdown(self) {
        self.browser.shutdown();
    }
}
