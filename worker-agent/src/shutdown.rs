//! **The process-wide stop** — one [`Shutdown`] made at start (SIGINT and
//! SIGTERM handlers installed at once), cloned into every part of run mode
//! and passed to each as an argument, as mini-redis passes its shutdown to
//! `server::run`: the handshake server ([`crate::server::serve`]), the
//! mDNS announcer ([`crate::announce::Announcer::run`]) and the DNS
//! registration loop ([`crate::register::maintain`]) each end when it fires,
//! the announcer and the registration after saying goodbye. Nothing reaches
//! for it globally, so a test stops a part with [`Shutdown::trigger`].

use std::fmt;
use std::sync::Arc;
use tokio::sync::watch;
use tracing::info;

/// What asked the agent to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`systemctl stop`, `kill`).
    Terminate,
    /// [`Shutdown::trigger`] from inside the program.
    Requested,
}

impl fmt::Display for StopSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Requested => "a stop request",
        })
    }
}

/// A stop request that every part of run mode can wait on: the handshake
/// server and the announcer each get a clone (take shutdown as an argument,
/// as mini-redis does). The first trigger wins and stays.
#[derive(Debug, Clone)]
pub struct Shutdown {
    tx: Arc<watch::Sender<Option<StopSignal>>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A stop request that only [`Shutdown::trigger`] fires (tests).
    pub fn new() -> Self {
        Shutdown {
            tx: Arc::new(watch::channel(None).0),
        }
    }

    /// A stop request fired by SIGINT or SIGTERM. The handlers are installed
    /// by this call, not when [`Shutdown::wait`] is first awaited, so create
    /// it before anything else: a SIGTERM that arrives earlier would kill the
    /// process without goodbyes. Must be called within a tokio runtime.
    pub fn on_signals() -> std::io::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(std::io::Error::other(
                "Shutdown::on_signals must be called from within a tokio runtime",
            ));
        }
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let this = Shutdown::new();
        let tx = this.tx.clone();
        tokio::spawn(async move {
            let sig = tokio::select! {
                _ = int.recv() => StopSignal::Interrupt,
                _ = term.recv() => StopSignal::Terminate,
            };
            info!("{sig} received: sending mDNS goodbyes and exiting");
            tx.send_if_modified(|s| s.is_none() && s.replace(sig).is_none());
        });
        Ok(this)
    }

    /// Fires the stop request (no-op if it already fired).
    pub fn trigger(&self) {
        self.tx
            .send_if_modified(|s| s.is_none() && s.replace(StopSignal::Requested).is_none());
    }

    /// What fired, if anything has.
    pub fn fired(&self) -> Option<StopSignal> {
        *self.tx.borrow()
    }

    /// Resolves when the stop request fires (at once if it already has).
    pub async fn wait(&self) -> StopSignal {
        let mut rx = self.tx.subscribe();
        let fired = match rx.wait_for(Option::is_some).await {
            Ok(v) => *v,
            // The sender lives in `self`, so it cannot be dropped here.
            Err(_) => None,
        };
        fired.unwrap_or(StopSignal::Requested)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_shutdown_fires_once_and_every_waiter_sees_the_first_cause() {
        let s = Shutdown::new();
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move { s.wait().await })
        };
        assert_eq!(s.fired(), None);
        s.trigger();
        s.trigger();
        assert_eq!(waiter.await.unwrap(), StopSignal::Requested);
        assert_eq!(s.clone().wait().await, StopSignal::Requested);
    }
}
