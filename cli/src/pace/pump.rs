//! The loop of `leakgate pace`: reads stdin as it arrives, writes each line when the schedule
//! says, and stops at once on a signal or a closed stdout, however long the next wait.
//!
//! One thread polls three descriptors: the signal socket, stdout (for room to write, and for the
//! error a pipe reports when its reader is gone) and stdin (while the queue has room). A gone
//! reader is learned only from what writing says or would say: a write's `EPIPE`, or, while
//! nothing is due, the kernel's `POLLERR`/`POLLHUP` on stdout (a pipe with no reader, a hung-up
//! terminal, a socket shut both ways: each fails the next write). Nothing is concluded from
//! what stdout is (`/dev/null` opened read-write takes every line). Waits for
//! a line's time sleep in `poll` until 150 µs before it, then spin with zero-timeout polls, so
//! lines leave within a few microseconds of their time and input is still read meanwhile.

use super::clock::MonotonicClock;
use super::schedule::{Arrival, Schedule};
use super::signals::{Signal, Signals};
use super::status::Status;
use leakgate::Clock;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::fs::FileType;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsFd;

/// How close to a line's time the loop stops sleeping and spins (the kernel may wake a sleeper
/// up to 50 µs late; this covers that and a scheduling delay).
const SPIN_NS: u64 = 150_000;
/// The most bytes read from stdin at once.
const READ_CHUNK: usize = 64 << 10;
/// The most bytes one write may hand to a pipe or socket: `PIPE_BUF`, which a pipe that polls
/// writable always takes without blocking.
const PIPE_WRITE: usize = 4096;
/// The most bytes handed to a file or terminal at once.
const FILE_WRITE: usize = 64 << 10;
/// The longest line pace keeps; a longer one ends the run with an error.
pub(crate) const MAX_LINE: usize = 64 << 20;

/// Why the loop ended.
#[derive(Debug)]
pub(crate) enum End {
    /// stdin ended and every queued line was written.
    Done,
    /// stdout can take no more (its reader is gone); `undelivered` lines were left.
    StdoutClosed,
    /// A termination signal came.
    Signal(Signal),
    /// Reading or writing failed.
    Failed(io::Error),
}

/// The outcome: why it ended and how many lines read were never written.
pub(crate) struct Outcome {
    pub(crate) end: End,
    pub(crate) undelivered: u64,
}

/// Runs the loop until stdin ends and the queue is empty, or something stops it.
pub(crate) fn pump(
    schedule: &mut Schedule<MonotonicClock>,
    clock: &MonotonicClock,
    signals: &Signals,
    status: &mut Status,
) -> Outcome {
    let mut outbox = Outbox::default();
    let mut input = LineReader::default();
    let end = match run(schedule, clock, signals, status, &mut outbox, &mut input) {
        Ok(end) => end,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => End::StdoutClosed,
        Err(e) => End::Failed(e),
    };
    let partial = u64::from(!input.partial.is_empty());
    Outcome { end, undelivered: schedule.len() as u64 + outbox.lines() + partial }
}

fn run(
    schedule: &mut Schedule<MonotonicClock>,
    clock: &MonotonicClock,
    signals: &Signals,
    status: &mut Status,
    outbox: &mut Outbox,
    input: &mut LineReader,
) -> io::Result<End> {
    // Our own handles on fds 0 and 1: unbuffered, so bytes go exactly when written.
    let stdin = File::from(io::stdin().as_fd().try_clone_to_owned()?);
    let stdout = File::from(io::stdout().as_fd().try_clone_to_owned()?);
    let write_limit = match FileType::from_raw_mode(rustix::fs::fstat(&stdout)?.st_mode) {
        FileType::Fifo | FileType::Socket => PIPE_WRITE,
        _ => FILE_WRITE,
    };
    let mut reading = true;
    loop {
        if let Some(signal) = signals.caught() {
            return Ok(End::Signal(signal));
        }
        while outbox.pending() < write_limit {
            match schedule.pop_due() {
                Some(line) => outbox.push(line.bytes),
                None => break,
            }
        }
        if !reading && outbox.is_empty() && schedule.len() == 0 {
            return Ok(End::Done);
        }
        let timeout = if outbox.is_empty() {
            schedule.next_ready().map(|ready| {
                let left = ready.saturating_sub(clock.now_ns());
                let sleep = left.saturating_sub(SPIN_NS);
                Timespec {
                    tv_sec: (sleep / 1_000_000_000) as _,
                    tv_nsec: (sleep % 1_000_000_000) as _,
                }
            })
        } else {
            None // wait for room on stdout
        };
        let want_input = reading && schedule.has_room();
        let out_events = if outbox.is_empty() { PollFlags::empty() } else { PollFlags::OUT };
        let mut fds = [
            PollFd::from_borrowed_fd(signals.fd(), PollFlags::IN),
            PollFd::new(&stdout, out_events),
            PollFd::new(&stdin, PollFlags::IN),
        ];
        let watched = if want_input { 3 } else { 2 };
        match poll(&mut fds[..watched], timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let (sig, out, inp) = (fds[0].revents(), fds[1].revents(), fds[2].revents());
        if !sig.is_empty() {
            signals.drain();
        }
        if out.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
            return Ok(End::StdoutClosed);
        }
        if out.contains(PollFlags::OUT) && !outbox.is_empty() {
            match outbox.write_some(&stdout, write_limit) {
                Ok(lines) => status.passed(lines),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if want_input && !inp.is_empty() {
            match input.read(&stdin)? {
                Some(lines) => {
                    for line in lines {
                        match schedule.arrive(line) {
                            Arrival::Queued => {}
                            Arrival::Dropped => status.dropped(1),
                        }
                    }
                }
                None => {
                    if let Some(last) = input.finish() {
                        if schedule.arrive(last) == Arrival::Dropped {
                            status.dropped(1);
                        }
                    }
                    reading = false;
                }
            }
        }
        status.tick(clock.now_ns(), schedule.len());
    }
}

/// Bytes read from stdin, cut into lines exactly as they came (newline kept, nothing decoded).
#[derive(Default)]
struct LineReader {
    partial: Vec<u8>,
    chunk: Vec<u8>,
    lines_seen: u64,
}

impl LineReader {
    /// Reads what is available: the complete lines, or `None` at the end of input. A read that
    /// was interrupted gives no lines.
    fn read(&mut self, mut from: &File) -> io::Result<Option<Vec<Vec<u8>>>> {
        self.chunk.resize(READ_CHUNK, 0);
        let n = match from.read(&mut self.chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => n,
            Err(e)
                if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock) =>
            {
                return Ok(Some(Vec::new()))
            }
            Err(e) => return Err(e),
        };
        let mut lines = Vec::new();
        let mut rest = &self.chunk[..n];
        while let Some(i) = rest.iter().position(|&b| b == b'\n') {
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&rest[..=i]);
            lines.push(line);
            rest = &rest[i + 1..];
        }
        self.partial.extend_from_slice(rest);
        self.lines_seen += lines.len() as u64;
        if self.partial.len() > MAX_LINE {
            return Err(io::Error::other(format!(
                "line {} is longer than {} MiB; pace keeps lines whole, so it stops here",
                self.lines_seen + 1,
                MAX_LINE >> 20
            )));
        }
        Ok(Some(lines))
    }

    /// At the end of input: the last line if it had no newline (passed on without one).
    fn finish(&mut self) -> Option<Vec<u8>> {
        (!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial))
    }
}

/// Lines whose time has come, being written to stdout.
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    written: usize,
    /// Where each line in `bytes` ends, oldest first.
    ends: VecDeque<usize>,
}

impl Outbox {
    fn push(&mut self, line: Vec<u8>) {
        if self.bytes.is_empty() {
            self.bytes = line;
        } else {
            self.bytes.extend_from_slice(&line);
        }
        self.ends.push_back(self.bytes.len());
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn pending(&self) -> usize {
        self.bytes.len() - self.written
    }

    fn lines(&self) -> u64 {
        self.ends.len() as u64
    }

    /// One write of at most `limit` bytes; returns how many lines it completed.
    fn write_some(&mut self, mut to: &File, limit: usize) -> io::Result<u64> {
        let end = self.bytes.len().min(self.written + limit);
        let n = to.write(&self.bytes[self.written..end])?;
        self.written += n;
        let mut done = 0;
        while self.ends.front().is_some_and(|&e| e <= self.written) {
            self.ends.pop_front();
            done += 1;
        }
        if self.ends.is_empty() {
            self.bytes.clear();
            self.written = 0;
        }
        Ok(done)
    }
}
