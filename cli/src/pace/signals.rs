//! SIGINT and SIGTERM as events of the pacing loop: each sets a flag and writes a byte to a
//! socket the loop polls, so a wait of an hour ends at once. A second signal of either kind ends
//! the process without waiting for the loop (in case it is stuck in a write).

use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A caught termination signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Interrupt,
    Terminate,
}

impl Signal {
    /// The conventional exit status after this signal: 128 + its number.
    pub(crate) fn exit_status(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

/// The installed handlers: flags to read and a socket to poll.
pub(crate) struct Signals {
    interrupt: Arc<AtomicBool>,
    terminate: Arc<AtomicBool>,
    wake: UnixStream,
}

impl Signals {
    /// Installs the handlers for SIGINT and SIGTERM.
    pub(crate) fn install() -> std::io::Result<Self> {
        let (wake, wake_writer) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        let interrupt = Arc::new(AtomicBool::new(false));
        let terminate = Arc::new(AtomicBool::new(false));
        for (signal, flag) in [(SIGINT, &interrupt), (SIGTERM, &terminate)] {
            // Registered first, so it sees the flag before this signal sets it: a second signal
            // of the same kind exits at once, with the conventional status.
            signal_hook::flag::register_conditional_shutdown(
                signal,
                128 + signal,
                Arc::clone(flag),
            )?;
            signal_hook::flag::register(signal, Arc::clone(flag))?;
            signal_hook::low_level::pipe::register(signal, wake_writer.try_clone()?)?;
        }
        Ok(Signals { interrupt, terminate, wake })
    }

    /// The first signal caught, if any (SIGTERM before SIGINT when both came).
    pub(crate) fn caught(&self) -> Option<Signal> {
        // Relaxed: the flags are only read; the wake-up byte orders nothing else.
        if self.terminate.load(Ordering::Relaxed) {
            Some(Signal::Terminate)
        } else if self.interrupt.load(Ordering::Relaxed) {
            Some(Signal::Interrupt)
        } else {
            None
        }
    }

    /// The socket that becomes readable when a signal comes.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// Empties the wake-up socket (non-blocking).
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
    }
}
