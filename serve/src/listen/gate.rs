//! [`Gate`]: one listener's accept loop, with a cap on the connections open at once and a
//! back-off when accepting fails.
//!
//! A connection beyond the cap is accepted, told so (RESP: `-ERR max number of clients
//! reached`, HTTP: `503`; gRPC is simply closed) and closed at once, so a client learns the
//! service is full instead of waiting in the kernel's queue. The caps are fitted below the
//! open-files limit ([`super::fd`]), so accepting that one more connection has a descriptor.
//!
//! When `accept` fails for want of a resource (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`), the
//! listener stays readable, and trying again at once would spin a core for as long as the
//! cause lasts. The gate waits instead, 5 ms after the first failure, doubling up to 1 s, and
//! back to no wait after the next success. Errors that concern only the connection being
//! accepted (the peer reset it before it was taken) are passed over at once.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The first wait after `accept` fails for want of a resource.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// The longest wait between two tries.
const LONGEST_PAUSE: Duration = Duration::from_secs(1);
/// At most one warning about refused connections per this long.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// A connection within the cap: its stream, its peer, and the slot it holds until dropped.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    pub(crate) slot: OwnedSemaphorePermit,
}

/// One listener's accept loop (see the module's documentation).
#[derive(Debug)]
pub(crate) struct Gate {
    listener: TcpListener,
    /// `cap` permits; a connection holds one from its accept until it closes.
    slots: Arc<Semaphore>,
    cap: usize,
    /// The listener's name, for the log.
    name: &'static str,
    /// Written (without waiting) to a connection refused for the cap, before it is closed.
    refusal: &'static [u8],
    /// The wait before the next try while `accept` keeps failing; `None` after a success.
    pause: Option<Duration>,
    /// When refusals were last logged, and how many since.
    warned: Option<Instant>,
    refused: u64,
}

impl Gate {
    /// A gate on `listener` for at most `cap` connections at once.
    pub(crate) fn new(
        listener: TcpListener,
        cap: usize,
        name: &'static str,
        refusal: &'static [u8],
    ) -> Gate {
        let slots = Arc::new(Semaphore::new(cap));
        Gate { listener, slots, cap, name, refusal, pause: None, warned: None, refused: 0 }
    }

    /// The next connection within the cap. Cancel-safe: dropping the future loses no
    /// connection it had taken.
    pub(crate) async fn accept(&mut self) -> Accepted {
        loop {
            if let Some(pause) = self.pause {
                tokio::time::sleep(pause).await;
            }
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    self.pause = None;
                    match self.slots.clone().try_acquire_owned() {
                        Ok(slot) => return Accepted { stream, peer, slot },
                        Err(_) => self.refuse(stream, peer),
                    }
                }
                Err(e) if only_this_connection(&e) => {}
                Err(e) => {
                    let pause = self.pause.map_or(FIRST_PAUSE, |p| (p * 2).min(LONGEST_PAUSE));
                    if self.pause.is_none() {
                        tracing::warn!(
                            listener = self.name,
                            error = %e,
                            "cannot accept connections: waiting, up to {LONGEST_PAUSE:?} between tries"
                        );
                    }
                    self.pause = Some(pause);
                }
            }
        }
    }

    /// Tells `stream` the service is full (one write into its empty send buffer, which does
    /// not wait) and closes it.
    fn refuse(&mut self, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.try_write(self.refusal);
        drop(stream);
        self.refused += 1;
        if self.warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            tracing::warn!(
                listener = self.name,
                %peer,
                cap = self.cap,
                refused = self.refused,
                "refused connections: the listener's cap is reached (--max-connections)"
            );
            self.warned = Some(Instant::now());
            self.refused = 0;
        }
    }
}

/// Whether `accept`'s error concerns only the connection it was taking (try the next at once)
/// rather than the process (wait: see the module's documentation).
fn only_this_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_errors_wait_and_connection_errors_do_not() {
        let emfile = io::Error::from_raw_os_error(24);
        let enfile = io::Error::from_raw_os_error(23);
        assert!(!only_this_connection(&emfile) && !only_this_connection(&enfile));
        assert!(only_this_connection(&io::ErrorKind::ConnectionAborted.into()));
    }

    #[tokio::test]
    async fn beyond_the_cap_a_connection_is_told_and_closed() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut gate = Gate::new(listener, 1, "test", b"full\r\n");
        let _first = TcpStream::connect(addr).await.unwrap();
        let held = gate.accept().await;
        let mut second = TcpStream::connect(addr).await.unwrap();
        // The gate refuses the second while it waits for a connection it can take.
        let taken = tokio::time::timeout(Duration::from_millis(300), gate.accept()).await;
        assert!(taken.is_err(), "no slot was free");
        let mut told = String::new();
        second.read_to_string(&mut told).await.unwrap();
        assert_eq!(told, "full\r\n");
        drop(held);
        // A freed slot takes the next connection.
        let _third = TcpStream::connect(addr).await.unwrap();
        let next = tokio::time::timeout(Duration::from_secs(5), gate.accept()).await;
        assert!(next.is_ok(), "a slot was freed");
    }
}
