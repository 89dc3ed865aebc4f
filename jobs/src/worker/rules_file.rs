//! A worker's rules file: read at start, read again every poll, stored in the database when its
//! bytes change and it parses.
//!
//! Polling the file (one read of a small file per interval) rather than file-system
//! notifications, for the reasons the core's `RulesWatcher` gives: it sees every change on every
//! file system, editors that rename a new file into place included, with no dependency.

use super::Event;
use crate::error::Error;
use crate::jobs::Jobs;
use crate::rules::{LaneRules, RulesError};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;

pub(super) struct RulesFile {
    path: PathBuf,
    poll: Duration,
    /// The bytes last read (stored, or rejected: a rejected change is reported once).
    last: Vec<u8>,
    next: Instant,
    rules: usize,
}

impl RulesFile {
    /// Reads, parses and stores the file; any failure is an error.
    pub(super) async fn load(jobs: &Jobs, path: &Path, poll: Duration) -> Result<RulesFile, Error> {
        let bytes = read(path)?;
        let rules = parse(path, &bytes)?;
        jobs.set_rules(&rules).await?;
        Ok(RulesFile {
            path: path.to_path_buf(),
            poll,
            last: bytes,
            next: Instant::now() + poll,
            rules: rules.rules().len(),
        })
    }

    /// How many rules are in force from the file.
    pub(super) fn len(&self) -> usize {
        self.rules
    }

    /// When to look at the file again.
    pub(super) fn next_check(&self) -> Instant {
        self.next
    }

    /// Looks at the file: stores its rules if it changed and parses.
    pub(super) async fn check(&mut self, jobs: &Jobs) -> Option<Event> {
        self.next = Instant::now() + self.poll;
        let bytes = match read(&self.path) {
            Ok(bytes) if bytes != self.last => bytes,
            Ok(_) => return None,
            // Gone for a moment (an editor replacing it): try again at the next poll.
            Err(_) => return None,
        };
        self.last = bytes;
        let rules = match parse(&self.path, &self.last) {
            Ok(rules) => rules,
            Err(Error::Rules(e)) => return Some(Event::RulesRejected(e)),
            Err(e) => return Some(Event::Retrying(e)),
        };
        match jobs.set_rules(&rules).await {
            Ok(()) => {
                self.rules = rules.rules().len();
                Some(Event::RulesLoaded { rules: self.rules })
            }
            Err(e) => {
                self.last.clear(); // store it at the next poll
                Some(Event::Retrying(e))
            }
        }
    }
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| {
        Error::Rules(RulesError::new(None, None, format!("cannot read {}: {e}", path.display())))
    })
}

fn parse(path: &Path, bytes: &[u8]) -> Result<LaneRules, Error> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        Error::Rules(RulesError::new(None, None, format!("{} is not UTF-8 text", path.display())))
    })?;
    Ok(LaneRules::from_toml(text)?)
}
