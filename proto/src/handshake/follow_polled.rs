//! **A liveness stream read by a poller** — the coordinator's end of a
//! stream ([`super::Follower`]) once it pulses, taken off the async runtime
//! so that one thread can read hundreds of streams on a fixed tick.
//!
//! Why: at 200 members a coordinator's streams bring 667 pulses a second,
//! and read by one async task each, every pulse woke the runtime (an
//! `epoll_wait` returning, a worker unparked, a task polled): in the profile
//! of docs/scale.md that parking and waking was 80% of a `watch` at rest. A
//! reader that visits the streams once per tick wakes as often whatever the
//! number of members, and takes each stream's waiting pulses together; the
//! price is at most a tick of delay on what a stream tells.
//!
//! [`Polled`] is the stream's state and what is done with its bytes (the
//! same lines, judged the same way, as [`super::Follower::next`]); its
//! socket and the readiness of it belong to the poller that calls it.

use super::follow::{
    judge_line, ping_line_pacing, Follower, Heard, StreamState, MAX_FOLLOW_LINE, WRITE_TIMEOUT,
};
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// How many bytes one read takes: a pulse is about 70 bytes, so a stream
/// read once a tick never has more than a few lines waiting.
const CHUNK: usize = 1024;

/// At most this many reads of one stream per visit: a stream that keeps
/// its socket full (an agent gone mad, or a stranger's) cannot hold the
/// poller, whose other streams wait meanwhile; what is left is read on
/// the next visit ([`Visit::More`]).
const READS_PER_VISIT: usize = 8;

/// The coordinator's end of a stream, without its socket (see the module).
#[derive(Debug)]
pub struct Polled {
    pub(super) s: StreamState<Instant>,
}

impl Follower {
    /// This stream, taken off the async runtime for a poller that reads
    /// many streams on one thread ([`Polled`]): the socket (non-blocking)
    /// and the stream's state, nothing read or half-written lost.
    pub fn into_polled(self) -> std::io::Result<(std::net::TcpStream, Polled)> {
        let Follower { conn: (rd, wr), s } = self;
        // What was read of a line comes before what the reader buffered.
        let mut buf = s.buf;
        buf.extend_from_slice(rd.buffer());
        let stream = rd
            .into_inner()
            .reunite(wr)
            .map_err(|e| std::io::Error::other(e.to_string()))?
            .into_std()?;
        stream.set_nonblocking(true)?;
        let polled = Polled {
            s: StreamState {
                buf,
                unsent: s.unsent,
                unsent_since: s.unsent_since.map(tokio::time::Instant::into_std),
                every: s.every,
                ping_every: s.ping_every,
                next_ping: s.next_ping.into_std(),
                facts: s.facts,
                asked: s.asked,
            },
        };
        Ok((stream, polled))
    }
}

/// What a visit to a stream's socket left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Everything the socket had was read: the next bytes will be news to
    /// the poller's readiness (an edge-triggered poller is told of them).
    Drained,
    /// The socket still has bytes: visit it again on the next tick even if
    /// the poller hears nothing new of it.
    More,
    /// The stream is over; the last thing passed on says why.
    Over,
}

impl Polled {
    /// A stream whose opening (hello, reply, first pulse) was read
    /// elsewhere, pinging every `ping_every` from now; a stream opened by
    /// [`super::follow_in_cluster`] comes from [`super::Follower::into_polled`].
    pub fn new(ping_every: Duration) -> Polled {
        Polled {
            s: StreamState::new(ping_every, Instant::now()),
        }
    }

    /// How often the agent said it pulses (see [`super::Follower::every`]).
    pub fn every(&self) -> Duration {
        self.s.every
    }

    /// The digest of the agent's facts its last pulse carried.
    pub fn facts(&self) -> Option<&str> {
        self.s.facts.as_deref()
    }

    /// Reads what `sock` (non-blocking) has and passes each thing it told,
    /// in order, to `heard`, with the facts digest as of that line. Stops
    /// at the stream's end: its close, a reset, a goodbye, or garbage (a
    /// line that is no pulse nor bye, or longer than [`MAX_FOLLOW_LINE`]).
    /// A later `{"rlx":"prove"}` is passed on and the stream goes on, as
    /// with [`super::Follower::next`].
    ///
    /// `to_end`: read until the socket says it is empty. Without it a
    /// short read ends the visit (the socket held no more at that moment),
    /// which saves a `read` per pulse; a poller may leave it out only when
    /// it will hear of anything that arrives after this visit, and of a
    /// close that came before it (an edge-triggered `epoll` with
    /// `EPOLLRDHUP`: it passes `to_end` when its event said the far end
    /// closed, and on any visit no event asked for).
    pub fn read_from(
        &mut self,
        sock: &mut impl Read,
        to_end: bool,
        mut heard: impl FnMut(Heard, Option<&str>),
    ) -> Visit {
        // Whole lines buffered before this visit (read by the stream's
        // opening, handed over with it) are told first.
        if let Some(v) = self.judge_buffered(&mut heard) {
            return v;
        }
        let mut chunk = [0u8; CHUNK];
        // With `to_end`, read until the socket says it has nothing more,
        // never stopping at a short read: the stream's end (a FIN right
        // behind the last pulse, as when the agent is killed) is only seen
        // by the read after the data.
        for _ in 0..READS_PER_VISIT {
            let n = match sock.read(&mut chunk) {
                Ok(0) => {
                    heard(Heard::Closed, self.facts());
                    return Visit::Over;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Visit::Drained,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    heard(Heard::Reset(e.to_string()), self.facts());
                    return Visit::Over;
                }
            };
            self.s.buf.extend_from_slice(&chunk[..n]);
            if let Some(v) = self.judge_buffered(&mut heard) {
                return v;
            }
            if n < CHUNK && !to_end {
                return Visit::Drained;
            }
        }
        Visit::More
    }

    /// Tells the whole lines in the buffer, in order; `Some(Over)` when
    /// one of them ended the stream, or what is left is longer than a line
    /// may be.
    fn judge_buffered(&mut self, heard: &mut impl FnMut(Heard, Option<&str>)) -> Option<Visit> {
        while let Some(end) = self.s.buf.iter().position(|&b| b == b'\n') {
            let h = judge_line(&self.s.buf[..=end], &mut self.s.every, &mut self.s.facts);
            self.s.buf.drain(..=end);
            let last = matches!(
                h,
                Heard::Bye | Heard::Closed | Heard::Reset(_) | Heard::Garbage(_)
            );
            heard(h, self.facts());
            if last {
                return Some(Visit::Over);
            }
        }
        if self.s.buf.len() > MAX_FOLLOW_LINE {
            let why = format!(
                "a line longer than {MAX_FOLLOW_LINE} bytes (starts {})",
                super::client::preview(&self.s.buf)
            );
            heard(Heard::Garbage(why), self.facts());
            return Some(Visit::Over);
        }
        None
    }

    /// Writes the ping when one is due (every [`super::PING_INTERVAL`], or
    /// at once when `pace`, the pulse interval to ask the agent for, is
    /// not what the last ping asked), in the pieces `sock` (non-blocking)
    /// takes, never twice; a [`Heard::Reset`] when the write failed, or the
    /// agent took none of a ping for [`WRITE_TIMEOUT`] (it stopped
    /// reading: as good as gone).
    pub fn ping(
        &mut self,
        sock: &mut impl Write,
        now: Instant,
        pace: Option<Duration>,
    ) -> Option<Heard> {
        if self.s.unsent.is_empty() {
            if now < self.s.next_ping && pace == self.s.asked {
                return None;
            }
            // From now, not from when it was due: a poller that was held
            // up sends one ping, not a burst.
            self.s.next_ping = now + self.s.ping_every;
            self.s
                .unsent
                .extend_from_slice(ping_line_pacing(pace).as_bytes());
            self.s.asked = pace;
            self.s.unsent_since = Some(now);
        }
        loop {
            match sock.write(&self.s.unsent) {
                Ok(0) => return Some(Heard::Reset("the connection takes no more bytes".into())),
                Ok(n) => {
                    self.s.unsent.drain(..n);
                    if self.s.unsent.is_empty() {
                        self.s.unsent_since = None;
                        return None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Heard::Reset(e.to_string())),
            }
        }
        let since = self.s.unsent_since.unwrap_or(now);
        (now.saturating_duration_since(since) >= WRITE_TIMEOUT).then(|| {
            Heard::Reset(format!(
                "the agent took no ping for {} ms",
                WRITE_TIMEOUT.as_millis()
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handshake::follow::{bye_line, ping_line, pulse_line_with};
    use std::collections::VecDeque;

    /// A socket that hands out scripted reads and takes writes up to a
    /// budget.
    struct Script {
        reads: VecDeque<io::Result<Vec<u8>>>,
        room: usize,
        written: Vec<u8>,
    }

    impl Read for Script {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            match self.reads.pop_front() {
                None => Err(io::ErrorKind::WouldBlock.into()),
                Some(Err(e)) => Err(e),
                Some(Ok(mut b)) => {
                    let n = b.len().min(out.len());
                    out[..n].copy_from_slice(&b[..n]);
                    if n < b.len() {
                        self.reads.push_front(Ok(b.split_off(n)));
                    }
                    Ok(n)
                }
            }
        }
    }

    impl Write for Script {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.room);
            self.room -= n;
            self.written.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn script(reads: Vec<Vec<u8>>, room: usize) -> Script {
        Script {
            reads: reads.into_iter().map(Ok).collect(),
            room,
            written: Vec::new(),
        }
    }

    fn fresh(now: Instant) -> Polled {
        let mut p = Polled::new(Duration::from_secs(5));
        p.s.next_ping = now + Duration::from_secs(5);
        p
    }

    fn visit(p: &mut Polled, s: &mut Script) -> (Visit, Vec<(Heard, Option<String>)>) {
        let mut heard = Vec::new();
        let v = p.read_from(s, true, |h, f| heard.push((h, f.map(str::to_string))));
        (v, heard)
    }

    #[test]
    fn a_pulse_split_across_two_arrivals_is_told_once_whole_with_the_facts_of_its_own_line() {
        let now = Instant::now();
        let mut p = fresh(now);
        let a = pulse_line_with(1, Some("aaaa"));
        let b = pulse_line_with(2, Some("bbbb"));
        let both = format!("{a}{b}");
        let (first, rest) = both.as_bytes().split_at(a.len() + 5);
        // What the socket holds at the first visit: the first line and
        // the start of the second; the rest arrives before the next.
        let mut s = script(vec![first.to_vec()], 0);
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Drained);
        assert_eq!(
            heard,
            vec![(Heard::Pulse { seq: 1 }, Some("aaaa".to_string()))]
        );
        let mut s = script(vec![rest.to_vec()], 0);
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Drained);
        assert_eq!(
            heard,
            vec![(Heard::Pulse { seq: 2 }, Some("bbbb".to_string()))]
        );
        assert!(p.s.buf.is_empty());
    }

    #[test]
    fn a_goodbye_ends_the_stream_and_nothing_after_it_is_told() {
        let mut p = fresh(Instant::now());
        let lines = format!(
            "{}{}{}",
            pulse_line_with(1, None),
            bye_line(),
            pulse_line_with(2, None)
        );
        let mut s = script(vec![lines.into_bytes()], 0);
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Over);
        let told: Vec<Heard> = heard.into_iter().map(|(h, _)| h).collect();
        assert_eq!(told, vec![Heard::Pulse { seq: 1 }, Heard::Bye]);
    }

    #[test]
    fn a_close_right_behind_the_last_pulse_is_told_in_the_same_visit() {
        let mut p = fresh(Instant::now());
        // What a killed agent leaves: its last pulse and the FIN, both in
        // the socket before the visit (one readiness event for the two).
        let mut s = script(vec![pulse_line_with(9, None).into_bytes(), Vec::new()], 0);
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Over);
        let told: Vec<Heard> = heard.into_iter().map(|(h, _)| h).collect();
        assert_eq!(told, vec![Heard::Pulse { seq: 9 }, Heard::Closed]);
    }

    #[test]
    fn a_visit_not_asked_to_read_to_the_end_stops_at_a_short_read_and_leaves_the_rest_to_the_next()
    {
        let mut p = fresh(Instant::now());
        // The FIN came after the read that found the pulse: an
        // edge-triggered poller is told of it anew, and reads to the end.
        let mut s = script(vec![pulse_line_with(9, None).into_bytes(), Vec::new()], 0);
        let mut heard = Vec::new();
        let v = p.read_from(&mut s, false, |h, _| heard.push(h));
        assert_eq!(v, Visit::Drained);
        assert_eq!(heard, vec![Heard::Pulse { seq: 9 }], "one read, no more");
        let v = p.read_from(&mut s, true, |h, _| heard.push(h));
        assert_eq!(v, Visit::Over);
        assert_eq!(heard, vec![Heard::Pulse { seq: 9 }, Heard::Closed]);
    }

    #[test]
    fn whole_lines_buffered_by_the_streams_opening_are_told_at_the_first_visit() {
        let mut p = fresh(Instant::now());
        p.s.buf = format!("{}{}", pulse_line_with(1, None), pulse_line_with(2, None)).into_bytes();
        let mut s = script(Vec::new(), 0);
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Drained);
        let told: Vec<Heard> = heard.into_iter().map(|(h, _)| h).collect();
        assert_eq!(
            told,
            vec![Heard::Pulse { seq: 1 }, Heard::Pulse { seq: 2 }],
            "nothing waits for bytes that may never come"
        );
    }

    #[test]
    fn a_close_and_a_reset_end_the_stream_with_what_happened() {
        let mut p = fresh(Instant::now());
        let mut s = script(vec![Vec::new()], 0);
        assert_eq!(
            visit(&mut p, &mut s),
            (Visit::Over, vec![(Heard::Closed, None)])
        );
        let mut s = Script {
            reads: VecDeque::from([Err(io::ErrorKind::ConnectionReset.into())]),
            room: 0,
            written: Vec::new(),
        };
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Over);
        assert!(
            matches!(heard.as_slice(), [(Heard::Reset(_), None)]),
            "{heard:?}"
        );
    }

    #[test]
    fn a_line_longer_than_the_limit_is_garbage_and_costs_no_more_than_a_read() {
        let mut p = fresh(Instant::now());
        let mut s = script(vec![vec![b'x'; MAX_FOLLOW_LINE + 2]], 0);
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Over);
        assert!(
            matches!(heard.as_slice(), [(Heard::Garbage(_), None)]),
            "{heard:?}"
        );
    }

    #[test]
    fn a_socket_that_stays_full_is_left_for_the_next_visit() {
        let mut p = fresh(Instant::now());
        let pulse = pulse_line_with(7, None);
        let many = pulse.repeat(CHUNK * (READS_PER_VISIT + 2) / pulse.len());
        let reads: Vec<Vec<u8>> = many.as_bytes().chunks(CHUNK).map(<[u8]>::to_vec).collect();
        let mut s = script(reads, 0);
        let (v, heard) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::More);
        assert!(!heard.is_empty() && heard.len() < many.len() / pulse.len());
        let (v, _) = visit(&mut p, &mut s);
        assert_eq!(v, Visit::Drained);
    }

    #[test]
    fn a_ping_is_written_when_due_in_the_pieces_the_socket_takes_and_never_twice() {
        let now = Instant::now();
        let mut p = fresh(now);
        let mut s = script(Vec::new(), 4);
        assert_eq!(p.ping(&mut s, now, None), None);
        assert!(s.written.is_empty(), "nothing before it is due");
        let due = now + Duration::from_secs(5);
        assert_eq!(p.ping(&mut s, due, None), None);
        assert_eq!(s.written, ping_line().as_bytes()[..4]);
        s.room = 1000;
        assert_eq!(p.ping(&mut s, due + Duration::from_millis(50), None), None);
        assert_eq!(s.written, ping_line().as_bytes());
        assert_eq!(p.ping(&mut s, due + Duration::from_millis(100), None), None);
        assert_eq!(s.written, ping_line().as_bytes(), "not sent twice");
    }

    #[test]
    fn a_new_pace_to_ask_for_is_pinged_at_once_and_then_only_with_the_pings_due() {
        let now = Instant::now();
        let mut p = fresh(now);
        let mut s = script(Vec::new(), 1000);
        let second = Some(Duration::from_secs(1));
        assert_eq!(p.ping(&mut s, now, second), None);
        assert_eq!(s.written, ping_line_pacing(second).as_bytes(), "at once");
        assert_eq!(
            ping_line_pacing(second),
            "{\"rlx\":\"ping\",\"pulse_ms\":1000}\n"
        );
        let soon = now + Duration::from_millis(100);
        assert_eq!(p.ping(&mut s, soon, second), None);
        assert_eq!(
            s.written.len(),
            ping_line_pacing(second).len(),
            "asked once"
        );
        let due = now + Duration::from_secs(5);
        assert_eq!(p.ping(&mut s, due, second), None);
        assert_eq!(
            s.written,
            ping_line_pacing(second).repeat(2).as_bytes(),
            "each ping due says it again"
        );
    }

    #[test]
    fn a_ping_the_agent_does_not_take_for_the_write_timeout_ends_the_stream() {
        let now = Instant::now();
        let mut p = fresh(now);
        let mut s = script(Vec::new(), 0);
        let due = now + Duration::from_secs(5);
        assert_eq!(p.ping(&mut s, due, None), None);
        assert_eq!(p.ping(&mut s, due + WRITE_TIMEOUT / 2, None), None);
        let late = p.ping(&mut s, due + WRITE_TIMEOUT, None);
        assert!(matches!(late, Some(Heard::Reset(_))), "{late:?}");
    }
}
