//! **One thread reads every member's liveness stream, on a tick** — what
//! [`super::liveness::Streams`] hands each stream to once it pulses.
//!
//! Why not one async task per stream, as the stream's opening is: at 200
//! members the streams bring 667 pulses a second, and each one woke the
//! async runtime (`epoll_wait` returning, a worker unparked, a task
//! polled), 80% of a `watch` at rest in the profile of docs/scale.md. This
//! thread sleeps [`TICK`], asks the kernel which streams have bytes (one
//! `epoll_wait` that does not block), reads those, writes the pings due,
//! and sleeps again: 20 wake-ups a second whatever the number of members,
//! a stream with bytes read until a short read (one `read` per pulse; the
//! `read` that would find the socket empty is made only when the kernel
//! said the far end closed, `EPOLLRDHUP`, which is how a close right
//! behind the last pulse is seen), and no wake-up of its own per pulse. What a stream tells is
//! passed on to its [`Sink`] exactly as the async reader did (for a member,
//! [`super::liveness`]: a pulse of a member in good standing is a store,
//! the rest a message to the engine), at most a tick later: a crash (the stream's close or reset) is still seen within
//! a tick and a round trip.
//!
//! The sockets are registered with `mio` (the poller tokio itself is built
//! on), edge-triggered: a stream is read when the kernel says bytes came,
//! and once more on the next tick when a visit left some
//! ([`Visit::More`]).

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use rlx_proto::handshake::{Heard, Polled, Visit};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the thread wakes. A tick delays what a stream tells by at
/// most this much: nothing to the silence a member is dialled after (1 s),
/// and a quarter of the 200 ms in which a crash is to be seen.
pub(crate) const TICK: Duration = Duration::from_millis(50);

/// The streams' reader, shared by every clone of the liveness: its thread
/// starts with the first stream and ends when the last clone is dropped
/// and its streams with it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Poller {
    to_thread: Arc<Mutex<Option<mpsc::Sender<Entry>>>>,
    /// The pulse interval every stream's agent is asked for, in ms (0:
    /// none asked yet), read by the thread at each ping.
    pace_ms: Arc<AtomicU64>,
}

/// A stream while the poller reads it: dropping it (the member's follow
/// task aborted, as when its membership ends) closes the stream on the
/// next tick.
#[derive(Debug)]
pub(crate) struct Followed {
    dropped: Arc<AtomicBool>,
    ended: tokio::sync::oneshot::Receiver<()>,
}

impl Followed {
    /// Until the stream is over: true when its last word was passed on,
    /// false when the poller's thread died under it (it panicked), which
    /// nobody else would report.
    pub(crate) async fn ended(&mut self) -> bool {
        (&mut self.ended).await.is_ok()
    }
}

impl Drop for Followed {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::Release);
    }
}

/// Where a stream's news goes.
pub(crate) trait Sink: Send + 'static {
    /// What the stream told (`facts`: the digest of the agent's facts as of
    /// that line); false when nobody listens any more, which ends the
    /// stream.
    fn pass_on(&mut self, h: Heard, facts: Option<&str>) -> bool;

    /// The agent's pulses say it pulses every `every` (told after each
    /// visit that read any).
    fn paced(&mut self, every: Duration);

    /// The stream could not be read (no fault of the member's): it ends.
    fn unreadable(&mut self, why: String);
}

/// One stream in the thread's hands.
struct Entry {
    sock: TcpStream,
    state: Polled,
    sink: Box<dyn Sink>,
    dropped: Arc<AtomicBool>,
    /// Told when the stream is over.
    ended: Option<tokio::sync::oneshot::Sender<()>>,
    /// The socket is to be read: the kernel said bytes came, or the last
    /// visit left some.
    more: bool,
    /// The next visit reads until the socket is empty: the far end
    /// closed (or the socket failed) before the kernel's last word, or no
    /// event of the kernel's stands behind the visit. Otherwise a short
    /// read ends it: anything that comes after is an event of its own.
    to_end: bool,
    /// The far end, for the log.
    peer: String,
}

impl Poller {
    /// Asks every stream's agent to pulse every `every`: at once on the
    /// streams (a ping that says so), and in every ping after.
    pub(crate) fn ask_pace(&self, every: Duration) {
        self.pace_ms
            .store(every.as_millis() as u64, Ordering::Relaxed);
    }

    /// Hands `sock` (non-blocking, the stream's state in `state`) to the
    /// thread, which passes what it tells on to `sink` from now. Fails when
    /// the thread cannot start (no file descriptor left for its `epoll`, no
    /// thread).
    pub(crate) fn follow(
        &self,
        sock: std::net::TcpStream,
        state: Polled,
        sink: impl Sink,
    ) -> io::Result<Followed> {
        let dropped = Arc::new(AtomicBool::new(false));
        let (ended_tx, ended) = tokio::sync::oneshot::channel();
        let mut entry = Entry {
            // Taken now: once the far end reset the stream, the socket no
            // longer says who it was, and the log's last line is then.
            peer: sock
                .peer_addr()
                .map_or_else(|e| format!("a stream ({e})"), |a| a.to_string()),
            sock: TcpStream::from_std(sock),
            state,
            sink: Box::new(sink),
            dropped: dropped.clone(),
            ended: Some(ended_tx),
            // Bytes (and a close) may have come between the stream's
            // opening and now: an edge-triggered registration would not
            // say so.
            more: true,
            to_end: true,
        };
        let mut slot = self.to_thread.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..2 {
            let tx = match slot.as_ref() {
                Some(tx) => tx.clone(),
                None => slot.insert(start(self.pace_ms.clone())?).clone(),
            };
            match tx.send(entry) {
                Ok(()) => return Ok(Followed { dropped, ended }),
                // The thread ended (it panicked): start another.
                Err(mpsc::SendError(back)) => {
                    entry = back;
                    *slot = None;
                }
            }
        }
        Err(io::Error::other("the stream reader thread stopped twice"))
    }
}

/// Starts the thread; the sender hands it streams.
fn start(pace_ms: Arc<AtomicU64>) -> io::Result<mpsc::Sender<Entry>> {
    let poll = Poll::new()?;
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("rlx-watch-streams".into())
        .spawn(move || run(poll, rx, pace_ms))?;
    Ok(tx)
}

/// The thread: until every [`Poller`] is dropped and no stream is left.
fn run(mut poll: Poll, rx: mpsc::Receiver<Entry>, pace_ms: Arc<AtomicU64>) {
    let mut streams: Vec<Option<Entry>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut next = Instant::now();
    let mut open = true;
    loop {
        next += TICK;
        let now = Instant::now();
        match next.checked_duration_since(now) {
            Some(wait) => std::thread::sleep(wait),
            // Behind (a stopped or starved process): one tick from now,
            // not a burst of ticks.
            None => next = now,
        }
        while open {
            match rx.try_recv() {
                Ok(e) => add(&poll, &mut streams, e),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => open = false,
            }
        }
        if !open && streams.iter().all(Option::is_none) {
            return;
        }
        if let Err(e) = poll.poll(&mut events, Some(Duration::ZERO)) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::warn!("the liveness streams' poll failed ({e}); every stream read anyway");
                streams.iter_mut().flatten().for_each(|s| {
                    s.more = true;
                    s.to_end = true;
                });
            }
        }
        for ev in events.iter() {
            if let Some(Some(s)) = streams.get_mut(ev.token().0) {
                s.more = true;
                s.to_end |= ev.is_read_closed() || ev.is_error();
            }
        }
        let now = Instant::now();
        let pace = Some(pace_ms.load(Ordering::Relaxed))
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis);
        for slot in streams.iter_mut() {
            let Some(s) = slot else { continue };
            if !visit(s, now, pace) {
                tracing::debug!(
                    "the stream reader is done with {}{}",
                    s.peer,
                    if s.dropped.load(Ordering::Acquire) {
                        " (no longer wanted)"
                    } else {
                        ""
                    }
                );
                let _ = poll.registry().deregister(&mut s.sock);
                if let Some(ended) = s.ended.take() {
                    let _ = ended.send(());
                }
                *slot = None;
            }
        }
    }
}

/// Registers `e`'s socket under a free slot's token; a stream that cannot
/// be registered ends, and says why.
fn add(poll: &Poll, streams: &mut Vec<Option<Entry>>, mut e: Entry) {
    let i = match streams.iter().position(Option::is_none) {
        Some(i) => i,
        None => {
            streams.push(None);
            streams.len() - 1
        }
    };
    match poll
        .registry()
        .register(&mut e.sock, Token(i), Interest::READABLE)
    {
        Ok(()) => {
            tracing::debug!("the stream reader follows {} (slot {i})", e.peer);
            streams[i] = Some(e)
        }
        Err(err) => {
            e.sink.unreadable(format!(
                "its liveness connection could not be watched for bytes ({err})"
            ));
            if let Some(ended) = e.ended.take() {
                let _ = ended.send(());
            }
        }
    }
}

/// One tick of one stream: its bytes read when it has some, its ping
/// written when due; false when it is over (or no longer wanted).
fn visit(s: &mut Entry, now: Instant, pace: Option<Duration>) -> bool {
    if s.dropped.load(Ordering::Acquire) {
        return false;
    }
    if s.more {
        let Entry {
            sock, state, sink, ..
        } = s;
        let mut listening = true;
        let visit = state.read_from(sock, s.to_end, |h, facts| {
            listening = listening && sink.pass_on(h, facts);
        });
        s.sink.paced(s.state.every());
        match visit {
            Visit::Over => return false,
            // Bytes left with no event to come for them.
            Visit::More => (s.more, s.to_end) = (true, true),
            Visit::Drained => (s.more, s.to_end) = (false, false),
        }
        if !listening {
            return false;
        }
    }
    match s.state.ping(&mut s.sock, now, pace) {
        Some(h) => {
            s.sink.pass_on(h, None);
            false
        }
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_proto::handshake::follow::pulse_line_with;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream as StdStream};

    /// Passes what it hears to a channel.
    struct Record(mpsc::Sender<(Heard, Option<String>)>);

    impl Sink for Record {
        fn pass_on(&mut self, h: Heard, facts: Option<&str>) -> bool {
            self.0.send((h, facts.map(str::to_string))).is_ok()
        }
        fn paced(&mut self, _every: Duration) {}
        fn unreadable(&mut self, why: String) {
            panic!("unreadable: {why}");
        }
    }

    /// A loopback stream: (the coordinator's end, non-blocking; the agent's end).
    fn pair() -> (StdStream, StdStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = StdStream::connect(l.local_addr().unwrap()).unwrap();
        let (theirs, _) = l.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        (ours, theirs)
    }

    const WAIT: Duration = Duration::from_secs(5);

    #[test]
    fn a_stream_handed_to_the_poller_passes_on_its_pulses_in_order_then_its_close() {
        let poller = Poller::default();
        let (ours, mut agent) = pair();
        let (tx, rx) = mpsc::channel();
        let mut followed = poller
            .follow(ours, Polled::new(Duration::from_secs(5)), Record(tx))
            .unwrap();
        agent
            .write_all(
                format!(
                    "{}{}",
                    pulse_line_with(1, Some("f1")),
                    pulse_line_with(2, Some("f2"))
                )
                .as_bytes(),
            )
            .unwrap();
        assert_eq!(
            rx.recv_timeout(WAIT).unwrap(),
            (Heard::Pulse { seq: 1 }, Some("f1".into()))
        );
        assert_eq!(
            rx.recv_timeout(WAIT).unwrap(),
            (Heard::Pulse { seq: 2 }, Some("f2".into()))
        );
        agent
            .write_all(pulse_line_with(3, None).as_bytes())
            .unwrap();
        assert_eq!(
            rx.recv_timeout(WAIT).unwrap(),
            (Heard::Pulse { seq: 3 }, None)
        );
        drop(agent);
        assert_eq!(rx.recv_timeout(WAIT).unwrap().0, Heard::Closed);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let ended = rt.block_on(async { tokio::time::timeout(WAIT, followed.ended()).await });
        assert_eq!(
            ended.ok(),
            Some(true),
            "the stream's end is told to whoever waits for it"
        );
    }

    #[test]
    fn a_stream_whose_last_pulse_and_close_came_together_is_told_closed() {
        let poller = Poller::default();
        let (ours, mut agent) = pair();
        agent
            .write_all(pulse_line_with(1, None).as_bytes())
            .unwrap();
        drop(agent);
        // Both are in the socket before the poller registers it: one
        // readiness for the two, as for an agent killed right after a pulse.
        std::thread::sleep(Duration::from_millis(20));
        let (tx, rx) = mpsc::channel();
        let _followed = poller
            .follow(ours, Polled::new(Duration::from_secs(5)), Record(tx))
            .unwrap();
        assert_eq!(rx.recv_timeout(WAIT).unwrap().0, Heard::Pulse { seq: 1 });
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(1)).unwrap().0,
            Heard::Closed,
            "the close is told, not left for the silence to find"
        );
    }

    #[test]
    fn a_followed_stream_whose_last_pulse_and_close_come_together_is_told_closed() {
        let poller = Poller::default();
        let (ours, mut agent) = pair();
        let (tx, rx) = mpsc::channel();
        let _followed = poller
            .follow(ours, Polled::new(Duration::from_secs(5)), Record(tx))
            .unwrap();
        agent
            .write_all(pulse_line_with(1, None).as_bytes())
            .unwrap();
        assert_eq!(rx.recv_timeout(WAIT).unwrap().0, Heard::Pulse { seq: 1 });
        // Now the stream is read on the kernel's word alone: the last
        // pulse and the close land between two ticks, one event for both.
        agent
            .write_all(pulse_line_with(2, None).as_bytes())
            .unwrap();
        drop(agent);
        assert_eq!(rx.recv_timeout(WAIT).unwrap().0, Heard::Pulse { seq: 2 });
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(1)).unwrap().0,
            Heard::Closed,
            "the close is told, not left for the silence to find"
        );
    }

    #[test]
    fn the_pace_asked_of_the_agents_is_pinged_on_every_stream_at_once() {
        let poller = Poller::default();
        poller.ask_pace(Duration::from_secs(1));
        let (ours, mut agent) = pair();
        let (tx, _rx) = mpsc::channel();
        let _followed = poller
            .follow(ours, Polled::new(Duration::from_secs(5)), Record(tx))
            .unwrap();
        agent
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let want = rlx_proto::handshake::ping_line_pacing(Some(Duration::from_secs(1)));
        let mut line = vec![0u8; want.len()];
        agent.read_exact(&mut line).unwrap();
        assert_eq!(
            line,
            want.as_bytes(),
            "within a tick, not the 5 s of a ping"
        );
        poller.ask_pace(Duration::from_millis(1400));
        let want = rlx_proto::handshake::ping_line_pacing(Some(Duration::from_millis(1400)));
        let mut line = vec![0u8; want.len()];
        agent.read_exact(&mut line).unwrap();
        assert_eq!(line, want.as_bytes(), "and again when it changes");
    }

    #[test]
    fn a_stream_no_longer_wanted_is_closed_by_the_poller() {
        let poller = Poller::default();
        let (ours, mut agent) = pair();
        let (tx, _rx) = mpsc::channel();
        let followed = poller
            .follow(ours, Polled::new(Duration::from_secs(5)), Record(tx))
            .unwrap();
        drop(followed);
        agent.set_read_timeout(Some(WAIT)).unwrap();
        let mut b = [0u8; 16];
        assert_eq!(
            agent.read(&mut b).unwrap(),
            0,
            "the agent sees the stream closed"
        );
    }

    #[test]
    fn one_poller_reads_many_streams_and_pings_each() {
        let poller = Poller::default();
        let (tx, rx) = mpsc::channel();
        let mut agents = Vec::new();
        let mut held = Vec::new();
        for _ in 0..64 {
            let (ours, agent) = pair();
            held.push(
                poller
                    .follow(
                        ours,
                        Polled::new(Duration::from_millis(100)),
                        Record(tx.clone()),
                    )
                    .unwrap(),
            );
            agents.push(agent);
        }
        for (i, a) in agents.iter_mut().enumerate() {
            a.write_all(pulse_line_with(i as u64, None).as_bytes())
                .unwrap();
        }
        let mut seqs: Vec<u64> = (0..64)
            .map(|_| match rx.recv_timeout(WAIT).unwrap().0 {
                Heard::Pulse { seq } => seq,
                other => panic!("{other:?}"),
            })
            .collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (0..64).collect::<Vec<u64>>());
        let ping = rlx_proto::handshake::ping_line();
        for a in &mut agents {
            a.set_read_timeout(Some(WAIT)).unwrap();
            let mut line = vec![0u8; ping.len()];
            a.read_exact(&mut line).unwrap();
            assert_eq!(line, ping.as_bytes(), "each stream is pinged");
        }
    }
}
