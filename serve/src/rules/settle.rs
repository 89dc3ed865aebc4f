//! When a changed rules file is ready to apply: only once it is stable, so that a poll that lands
//! while an editor or a deploy tool is writing the file never puts half of it in force.
//!
//! The rule (documented in the README): a change is applied when two polls in a row (`--poll`
//! apart, 500 ms by default) read the same file: the same length, modification time and bytes
//! (a 64-bit hash of them). An empty file (0 bytes: what a writer leaves between truncating and
//! writing) is never applied once the service runs; a file with no rules but a comment is how to
//! lift every limit. A writer that may pause longer than a poll in the middle of the file should
//! write a new file and rename it onto the rules file, which is atomic.

use std::hash::Hasher;
use std::time::SystemTime;

/// What two polls compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) len: u64,
    pub(crate) modified: Option<SystemTime>,
    pub(crate) hash: u64,
}

impl Fingerprint {
    /// The fingerprint of a file's bytes, read after its modification time.
    pub(crate) fn of(bytes: &[u8], modified: Option<SystemTime>) -> Fingerprint {
        Fingerprint { len: bytes.len() as u64, modified, hash: hash(bytes) }
    }
}

/// A 64-bit hash of `bytes`, the same in every run (SipHash with fixed keys), for the log.
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    #[allow(deprecated)] // SipHasher: std's only hasher with fixed keys; not for tables here.
    let mut h = std::hash::SipHasher::new();
    h.write(bytes);
    h.finish()
}

/// What the watcher should do with what a poll read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The file is what is in force (or what was refused last): nothing to do.
    Same,
    /// Changed since the last poll: wait for the next one.
    Wait,
    /// The same change read twice in a row: apply it.
    Apply,
    /// Stable, but empty: refuse it (once).
    Empty,
}

/// The watcher's memory: the fingerprint applied (or refused) last, and the change seen at the
/// last poll.
#[derive(Debug)]
pub(crate) struct Settle {
    done: Option<Fingerprint>,
    seen: Option<Fingerprint>,
}

impl Settle {
    /// Starting from the file in force.
    pub(crate) fn new(in_force: Option<Fingerprint>) -> Settle {
        Settle { done: in_force, seen: None }
    }

    /// What to do with the file as a poll read it.
    pub(crate) fn poll(&mut self, now: Fingerprint) -> Verdict {
        if self.done == Some(now) {
            self.seen = None;
            return Verdict::Same;
        }
        if self.seen != Some(now) {
            self.seen = Some(now);
            return Verdict::Wait;
        }
        self.seen = None;
        self.done = Some(now);
        if now.len == 0 {
            Verdict::Empty
        } else {
            Verdict::Apply
        }
    }

    /// The file was reloaded by other means (SIGHUP): this is what is in force.
    pub(crate) fn applied(&mut self, now: Fingerprint) {
        self.done = Some(now);
        self.seen = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn fp(text: &str, at: u64) -> Fingerprint {
        Fingerprint::of(text.as_bytes(), Some(SystemTime::UNIX_EPOCH + Duration::from_secs(at)))
    }

    #[test]
    fn a_change_is_applied_once_two_polls_read_it_alike() {
        let mut s = Settle::new(Some(fp("a = \"1/s\"\n", 1)));
        assert_eq!(s.poll(fp("a = \"1/s\"\n", 1)), Verdict::Same);
        // Written in two halves between polls: neither half is applied.
        assert_eq!(s.poll(fp("a = \"1", 2)), Verdict::Wait);
        assert_eq!(s.poll(fp("a = \"1/s\"\nb = \"2/s\"\n", 3)), Verdict::Wait);
        assert_eq!(s.poll(fp("a = \"1/s\"\nb = \"2/s\"\n", 3)), Verdict::Apply);
        assert_eq!(s.poll(fp("a = \"1/s\"\nb = \"2/s\"\n", 3)), Verdict::Same);
        // The same bytes written again (a new time) are a change, applied once stable.
        assert_eq!(s.poll(fp("a = \"1/s\"\nb = \"2/s\"\n", 4)), Verdict::Wait);
        assert_eq!(s.poll(fp("a = \"1/s\"\nb = \"2/s\"\n", 4)), Verdict::Apply);
    }

    #[test]
    fn an_empty_file_is_refused_once_and_never_applied() {
        let mut s = Settle::new(Some(fp("a = \"1/s\"\n", 1)));
        assert_eq!(s.poll(fp("", 2)), Verdict::Wait);
        assert_eq!(s.poll(fp("", 2)), Verdict::Empty);
        assert_eq!(s.poll(fp("", 2)), Verdict::Same);
        assert_eq!(s.poll(fp("# nothing is limited\n", 3)), Verdict::Wait);
        assert_eq!(s.poll(fp("# nothing is limited\n", 3)), Verdict::Apply);
    }

    #[test]
    fn hashes_are_the_same_in_every_run() {
        assert_eq!(hash(b""), 0x1e92_4b9d_7377_00d7);
    }
}
