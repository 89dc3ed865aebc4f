//! Reloading rules from a file when it changes (feature `rules-file`).
//!
//! The watcher polls: every interval it reads the file and compares the bytes with the last ones
//! it loaded. Polling was chosen over file-system notifications (`notify`): it sees every change
//! whatever the file system (network mounts and container bind mounts included), survives editors
//! that replace the file by renaming another onto it, needs no dependency, and costs one read of
//! a small file per interval. A file that does not parse is reported and the rules in force stay.

use super::{RuleLimiter, Rules, RulesFileError};
use crate::clock::Clock;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a watcher did about a change of its file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// The file changed and its rules are in force (this many rules).
    Reloaded(usize),
    /// The file changed but does not parse: the rules in force stay.
    Rejected(RulesFileError),
}

/// A thread that reloads a [`RuleLimiter`] from a file when the file changes; stops when
/// dropped, or when the limiter is dropped.
///
/// ```
/// use leakgate::{RuleLimiter, Rules};
/// use std::sync::Arc;
/// use std::time::Duration;
/// let name = format!("leakgate-watch-doc-{}.toml", std::process::id());
/// let path = std::env::temp_dir().join(name);
/// std::fs::write(&path, "api = \"10/s\"\n")?;
/// let lim = Arc::new(RuleLimiter::new(Rules::from_file(&path)?));
/// let watcher = lim.watch_file(&path, Duration::from_secs(1), |event| eprintln!("{event:?}"));
/// drop(watcher); // stops it
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RulesWatcher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for RulesWatcher {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<C: Clock + 'static> RuleLimiter<C> {
    /// Loads `path` and puts its rules in force; a file that cannot be read or parsed is
    /// refused and the rules in force stay. Returns how many rules are in force.
    ///
    /// ```
    /// use leakgate::{ManualClock, RuleLimiter, Rules};
    /// let name = format!("leakgate-reload-doc-{}.toml", std::process::id());
    /// let path = std::env::temp_dir().join(name);
    /// std::fs::write(&path, "api = \"10/s\"\n")?;
    /// let lim = RuleLimiter::with_clock(Rules::new(), ManualClock::new());
    /// assert_eq!(lim.reload_file(&path)?, 1);
    /// std::fs::write(&path, "api = \"ten per second\"\n")?;
    /// assert!(lim.reload_file(&path).is_err());
    /// assert_eq!(lim.check("api/x").unwrap().remaining(), 9); // still 10/s
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reload_file(&self, path: impl AsRef<Path>) -> Result<usize, RulesFileError> {
        let rules = Rules::from_file(path)?;
        let count = rules.len();
        self.reload(rules);
        Ok(count)
    }

    /// Starts a thread that reads `path` every `every` (at least 1 ms) and reloads it when its
    /// bytes differ from the last ones loaded (the file as it is now counts as loaded).
    /// `on_event` hears of every reload and every refused file. The thread holds the limiter
    /// weakly: it stops when the watcher or the limiter is dropped.
    ///
    /// ```
    /// use leakgate::{RuleLimiter, Rules, WatchEvent};
    /// use std::sync::{mpsc, Arc};
    /// use std::time::Duration;
    /// let name = format!("leakgate-watch-doc2-{}.toml", std::process::id());
    /// let path = std::env::temp_dir().join(name);
    /// std::fs::write(&path, "api = \"10/s\"\n")?;
    /// let lim = Arc::new(RuleLimiter::new(Rules::from_file(&path)?));
    /// let (events, heard) = mpsc::channel();
    /// let _watcher = lim.watch_file(&path, Duration::from_millis(10), move |event| {
    ///     let _ = events.send(event);
    /// });
    /// std::fs::write(&path, "api = \"10/s\"\nweb = \"5/s\"\n")?;
    /// assert_eq!(heard.recv_timeout(Duration::from_secs(30))?, WatchEvent::Reloaded(2));
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn watch_file(
        self: &Arc<Self>,
        path: impl Into<PathBuf>,
        every: Duration,
        on_event: impl FnMut(WatchEvent) + Send + 'static,
    ) -> RulesWatcher {
        let path = path.into();
        // A zero interval would read the file in a busy loop.
        let every = every.max(Duration::from_millis(1));
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let mut poll = Poll { path, last: None, on_event };
        poll.last = std::fs::read(&poll.path).ok();
        let limiter = Arc::downgrade(self);
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("leakgate-rules-watch".into())
            .spawn(move || poll.run(&limiter, &stopping, every))
            .ok();
        RulesWatcher { stop, thread }
    }
}

/// The watcher thread's state.
struct Poll<F> {
    path: PathBuf,
    /// The bytes last loaded (or refused), so each version is handled once.
    last: Option<Vec<u8>>,
    on_event: F,
}

impl<F: FnMut(WatchEvent)> Poll<F> {
    fn run<C: Clock + 'static>(
        &mut self,
        limiter: &Weak<RuleLimiter<C>>,
        stop: &(Mutex<bool>, Condvar),
        every: Duration,
    ) {
        let (stopped, wake) = stop;
        let mut guard = stopped.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while !*guard {
            let (next, _) = wake.wait_timeout(guard, every).unwrap_or_else(|p| p.into_inner());
            guard = next;
            if *guard {
                break;
            }
            let Some(limiter) = limiter.upgrade() else { break };
            self.once(&limiter);
        }
    }

    fn once<C: Clock + 'static>(&mut self, limiter: &RuleLimiter<C>) {
        // An unreadable file (being replaced, say) is tried again next time.
        let Ok(bytes) = std::fs::read(&self.path) else { return };
        if self.last.as_ref() == Some(&bytes) {
            return;
        }
        let event = match std::str::from_utf8(&bytes) {
            Ok(text) => match Rules::from_toml(text) {
                Ok(rules) => {
                    let count = rules.len();
                    limiter.reload(rules);
                    WatchEvent::Reloaded(count)
                }
                Err(e) => WatchEvent::Rejected(e),
            },
            Err(e) => WatchEvent::Rejected(RulesFileError::not_text(e)),
        };
        self.last = Some(bytes);
        (self.on_event)(event);
    }
}

impl RulesFileError {
    fn not_text(e: std::str::Utf8Error) -> Self {
        RulesFileError {
            line: None,
            rule: None,
            message: format!("the file is not UTF-8 text: {e}"),
        }
    }
}
