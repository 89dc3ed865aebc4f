//! [`Watched`]: a connection's reads and writes under deadlines, so that a client that stops
//! sending, or stops taking its replies, gives its connection back.
//!
//! * **The first bytes.** Until the connection has read `first` bytes (gRPC: HTTP/2's 24-byte
//!   preface), they must all have come within the header timeout of the accept, however slowly
//!   they trickle in.
//! * **Idle.** After that, a read that waits longer than the idle timeout since the last byte
//!   read ends the connection (an HTTP/2 peer that answers the server's keep-alive pings is
//!   never idle).
//! * **Stalled writes.** A write that cannot proceed (the peer reads nothing) for longer than
//!   the header timeout ends the connection.
//!
//! An expired deadline is an `io::ErrorKind::TimedOut` error from the read or write, which the
//! protocol (hyper, h2) turns into closing the connection. The slot the connection holds in
//! its listener's cap goes with the value.

use super::stream::Stream;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

/// The timeouts a connection lives under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Deadlines {
    /// For the first bytes (from the accept), and for a stalled write.
    pub(crate) header: Duration,
    /// For a read after the first bytes, from the last byte read; `None`: never.
    pub(crate) idle: Option<Duration>,
}

/// A connection under [`Deadlines`] (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Watched {
    io: Stream,
    deadlines: Deadlines,
    /// Bytes still to read before the first deadline gives way to the idle one.
    first_left: usize,
    accepted: Instant,
    last_read: Instant,
    /// When the pending write first found no room; `None` while writes proceed.
    write_stalled: Option<Instant>,
    read_timer: Timer,
    write_timer: Timer,
    /// This connection's place in its listener's cap.
    _slot: OwnedSemaphorePermit,
}

impl Watched {
    /// `io`, accepted at `accepted`, which must read `first` bytes within the header timeout.
    pub(crate) fn new(
        io: Stream,
        slot: OwnedSemaphorePermit,
        accepted: Instant,
        first: usize,
        deadlines: Deadlines,
    ) -> Watched {
        Watched {
            io,
            deadlines,
            first_left: first,
            accepted,
            last_read: accepted,
            write_stalled: None,
            read_timer: Timer::default(),
            write_timer: Timer::default(),
            _slot: slot,
        }
    }

    /// The connection underneath.
    pub(crate) fn get_ref(&self) -> &Stream {
        &self.io
    }

    /// When the read now waiting must have made progress; `None`: it may wait forever.
    fn read_deadline(&self) -> Option<Instant> {
        if self.first_left > 0 {
            Some(self.accepted + self.deadlines.header)
        } else {
            self.deadlines.idle.map(|idle| self.last_read + idle)
        }
    }

    /// `polled`, a write or a flush polled on the stream: once done (either way) the stream is
    /// no longer stalled; while pending it counts toward the timeout ([`Watched::write_waits`]).
    fn after_write<T>(
        &mut self,
        polled: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.write_stalled = None;
            return polled;
        }
        self.write_waits(cx).map(Err)
    }

    /// A write that returned `Pending`: an error once it has waited past the header timeout.
    fn write_waits(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let since = *self.write_stalled.get_or_insert_with(Instant::now);
        match self.write_timer.expired(since + self.deadlines.header, cx) {
            true => Poll::Ready(timed_out("the peer took no reply")),
            false => Poll::Pending,
        }
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

/// One deadline's sleep, reset only when the deadline moves.
#[derive(Debug, Default)]
struct Timer {
    sleep: Option<Pin<Box<Sleep>>>,
    armed: Option<Instant>,
}

impl Timer {
    /// Whether `deadline` has passed; if not, wakes `cx` when it does.
    fn expired(&mut self, deadline: Instant, cx: &mut Context<'_>) -> bool {
        if Instant::now() >= deadline {
            return true;
        }
        let sleep = self.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if self.armed != Some(deadline) {
            sleep.as_mut().reset(deadline);
            self.armed = Some(deadline);
        }
        sleep.as_mut().poll(cx).is_ready()
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = buf.filled().len() - before;
                if read > 0 {
                    this.last_read = Instant::now();
                    this.first_left = this.first_left.saturating_sub(read);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.read_deadline() {
                Some(deadline) if this.read_timer.expired(deadline, cx) => {
                    Poll::Ready(Err(timed_out(if this.first_left > 0 {
                        "the peer did not send its first request in time"
                    } else {
                        "the peer was idle too long"
                    })))
                }
                _ => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(polled, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after_write(polled, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.after_write(polled, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
