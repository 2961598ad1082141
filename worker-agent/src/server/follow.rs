//! **The agent's end of the liveness stream**
//! ([`rlx_proto::handshake::follow`]): after the reply to a follow hello,
//! a pulse at once and every [`PULSE_INTERVAL`] (or at the pace a ping
//! asks, within [`pace_of`]'s bounds, told at once by a pulse that carries
//! it), the coordinator's pings read, and a `bye` when the agent stops.
//! The pace is the stream's own: a stranger's ping paces only its stream.
//!
//! Bounded like everything else on the port: at most [`MAX_FOLLOWERS`]
//! streams (a newcomer at the limit closes the oldest of the source
//! address holding the most, the rule of `evict::victim`), each closed
//! when its coordinator has sent nothing for [`FOLLOWER_IDLE`], sent a
//! line that is not a ping or longer than [`MAX_FOLLOW_LINE`], or stopped
//! reading (a write not taken within [`WRITE_TIMEOUT`]). Streams are not
//! counted against the connection limit: a flood of handshakes must not
//! close a coordinator's stream (a false death), and they have their own.
//! A keyed agent gives a slot only to a coordinator that proved the key
//! ([`proved`]): without that, sixteen strangers' addresses would close a
//! coordinator's stream.

use crate::worker::WorkerCheck;
use rlx_proto::caps::NodeCaps;
use rlx_proto::handshake::follow::{facts_of, is_follow_proof, prove_line, WRITE_TIMEOUT};
use rlx_proto::handshake::Nonce;
use rlx_proto::handshake::{
    bye_line, pace_of, ping_pace, pulse_line_paced, FOLLOWER_IDLE, MAX_FOLLOWERS, MAX_FOLLOW_LINE,
    PULSE_INTERVAL,
};
use rlx_proto::keys::Key;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use tokio::time::{timeout, Instant};

/// The streams held, oldest first: each one's source and how to close it.
#[derive(Debug)]
pub(crate) struct Followers {
    max: usize,
    held: Mutex<Vec<(u64, IpAddr, Arc<Notify>)>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Followers {
    pub(crate) fn new(max: usize) -> Arc<Followers> {
        Arc::new(Followers {
            max: max.max(1),
            held: Mutex::new(Vec::new()),
            next_id: Default::default(),
        })
    }

    /// A new stream from `ip`: its id and what closes it. At the limit,
    /// the oldest stream of the busiest source is told to close.
    fn enter(&self, ip: IpAddr) -> (u64, Arc<Notify>) {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let close = Arc::new(Notify::new());
        let mut held = self.held.lock().expect("followers lock");
        while held.len() >= self.max {
            let seen: Vec<(IpAddr, bool)> = held.iter().map(|(_, ip, _)| (*ip, true)).collect();
            let Some(k) = super::evict::victim(&seen) else {
                break;
            };
            let (_, from, gone) = held.remove(k);
            tracing::debug!(%ip, %from, "liveness stream limit ({}) reached: closing a stream of the busiest source", self.max);
            gone.notify_one();
        }
        held.push((id, ip, Arc::clone(&close)));
        (id, close)
    }

    fn leave(&self, id: u64) {
        self.held
            .lock()
            .expect("followers lock")
            .retain(|(i, _, _)| *i != id);
    }
}

/// A keyed agent's question to the coordinator of a new stream, and the
/// check of its answer ([`rlx_proto::handshake::follow`]): `Ok` when its
/// first line proves `key` for the hello's `nonce` and our `reply`. The
/// caller bounds the time.
pub(crate) async fn proved(
    conn: &mut BufReader<TcpStream>,
    key: &Key,
    nonce: &Nonce,
    reply: &[u8],
) -> Result<(), String> {
    write(conn, &prove_line()).await?;
    let mut l = Vec::with_capacity(MAX_FOLLOW_LINE + 1);
    let n = (&mut *conn)
        .take(MAX_FOLLOW_LINE as u64 + 1)
        .read_until(b'\n', &mut l)
        .await
        .map_err(|e| format!("liveness stream refused: {e}"))?;
    if n == 0 {
        return Err("liveness stream refused: closed without a stream proof".into());
    }
    if is_follow_proof(key, nonce, reply, &l) {
        Ok(())
    } else {
        Err("liveness stream refused: its first line does not prove the cluster key".into())
    }
}

/// Serves one stream until it ends, and says why (for the debug log).
pub(crate) async fn serve(
    mut conn: BufReader<TcpStream>,
    peer: IpAddr,
    followers: Arc<Followers>,
    (mut stop, idle): (watch::Receiver<bool>, Duration),
    facts: Facts,
) -> String {
    let (id, close) = followers.enter(peer);
    let why = pulse(&mut conn, &close, (&mut stop, idle), &facts).await;
    followers.leave(id);
    why
}

/// What an agent's pulses say of its facts ([`facts_of`]): the caps it
/// publishes, with its worker's state refreshed as a handshake would see
/// it, digested; so a coordinator learns of news on the stream and need
/// not ask by handshake every few seconds.
#[derive(Clone)]
pub(crate) struct Facts {
    caps: Arc<watch::Sender<Arc<NodeCaps>>>,
    worker: Option<Arc<WorkerCheck>>,
}

impl Facts {
    /// The facts of `caps`, and of the worker `worker` checks.
    pub(crate) fn new(
        caps: Arc<watch::Sender<Arc<NodeCaps>>>,
        worker: Option<Arc<WorkerCheck>>,
    ) -> Facts {
        Facts { caps, worker }
    }

    /// The digest now; `last` keeps the caps it was last made of, so
    /// unchanged caps are not digested again at every pulse.
    fn now(&self, last: &mut Option<(Arc<NodeCaps>, String)>) -> String {
        let caps = match &self.worker {
            Some(w) => w.refresh(&self.caps),
            None => self.caps.borrow().clone(),
        };
        match last {
            Some((known, digest)) if Arc::ptr_eq(known, &caps) => digest.clone(),
            _ => {
                let digest = facts_of(&caps);
                *last = Some((caps, digest.clone()));
                digest
            }
        }
    }
}

async fn pulse(
    conn: &mut BufReader<TcpStream>,
    close: &Notify,
    (stop, idle): (&mut watch::Receiver<bool>, Duration),
    facts: &Facts,
) -> String {
    let mut digested = None;
    // The pace: PULSE_INTERVAL until the coordinator's ping asks for
    // another (a coordinator of a large cluster asks for fewer pulses).
    let mut every = PULSE_INTERVAL;
    let mut tick = pulse_ticker(every, Instant::now());
    let mut seq = 0u64;
    let mut buf: Vec<u8> = Vec::with_capacity(MAX_FOLLOW_LINE + 1);
    let mut quiet_until = Instant::now() + idle;
    loop {
        // Biased: the agent's stop and a newer stream's eviction first, so a
        // coordinator that floods pings cannot keep its bye away; then reads
        // before the idle clock, so an agent resumed after a long SIGSTOP
        // reads the pings that waited in its socket before it looks at the
        // clock, and keeps the stream.
        let want = (MAX_FOLLOW_LINE + 1).saturating_sub(buf.len()) as u64;
        let mut limited = (&mut *conn).take(want);
        let next = tokio::select! {
            biased;
            _ = stop.changed() => Step::Stop,
            () = close.notified() => return "liveness stream closed for a newer one".into(),
            r = limited.read_buf(&mut buf) => match r {
                Ok(0) => return "liveness stream closed by the coordinator".into(),
                Ok(_) => Step::Read,
                Err(e) => return format!("liveness stream failed: {e}"),
            },
            _ = tick.tick() => Step::Pulse,
            () = tokio::time::sleep_until(quiet_until) => {
                return format!(
                    "liveness stream closed: nothing from the coordinator for {} ms",
                    idle.as_millis()
                )
            }
        };
        match next {
            Step::Read => {
                quiet_until = Instant::now() + idle;
                let mut paced = false;
                while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                    let l: Vec<u8> = buf.drain(..=end).collect();
                    match ping_pace(&l) {
                        None => {
                            return "liveness stream closed: the coordinator sent a line that is no ping"
                                .into()
                        }
                        Some(Some(asked)) if pace_of(asked) != every => {
                            every = pace_of(asked);
                            paced = true;
                        }
                        Some(_) => {}
                    }
                }
                if buf.len() > MAX_FOLLOW_LINE {
                    return format!(
                        "liveness stream closed: a line longer than {MAX_FOLLOW_LINE} bytes"
                    );
                }
                // A new pace is told at once, by a pulse that carries it:
                // the coordinator judges silence by the pace it last heard,
                // and a slower one must reach it before the gap does.
                if paced {
                    tick = pulse_ticker(every, Instant::now() + every);
                    let digest = facts.now(&mut digested);
                    let line = pulse_line_paced(seq, Some(&digest), every);
                    if let Err(why) = write(conn, &line).await {
                        return why;
                    }
                    seq += 1;
                }
            }
            Step::Pulse => {
                let digest = facts.now(&mut digested);
                let line = pulse_line_paced(seq, Some(&digest), every);
                if let Err(why) = write(conn, &line).await {
                    return why;
                }
                seq += 1;
            }
            Step::Stop => {
                let _ = timeout(BYE_GRACE, conn.get_mut().write_all(bye_line().as_bytes())).await;
                let _ = conn.get_mut().shutdown().await;
                return "liveness stream: said bye (stopping)".into();
            }
        }
    }
}

/// A pulse every `every`, the first at `start`; one tick, not a burst,
/// after the agent was held up.
fn pulse_ticker(every: Duration, start: Instant) -> tokio::time::Interval {
    let mut tick = tokio::time::interval_at(start, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

enum Step {
    Read,
    Pulse,
    Stop,
}

async fn write(conn: &mut BufReader<TcpStream>, line: &str) -> Result<(), String> {
    match timeout(WRITE_TIMEOUT, conn.get_mut().write_all(line.as_bytes())).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("liveness stream failed: {e}")),
        Err(_) => Err(format!(
            "liveness stream closed: the coordinator took no pulse for {} ms",
            WRITE_TIMEOUT.as_millis()
        )),
    }
}

/// How long the streams get to write their `bye` when the agent stops,
/// before the server aborts what is left: a bye is one small write into a
/// socket with room for it, done in microseconds, and a coordinator that
/// does not take it in 100 ms sees the connection close instead (which it
/// checks with a dial). The agent's exit must not wait on its followers.
pub(crate) const BYE_GRACE: Duration = Duration::from_millis(100);

/// The default idle limit, for [`super::Limits`].
pub(crate) const DEFAULT_IDLE: Duration = FOLLOWER_IDLE;

/// The default stream limit, for [`super::Limits`].
pub(crate) const DEFAULT_MAX: usize = MAX_FOLLOWERS;
