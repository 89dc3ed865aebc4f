//! The runs a worker is responsible for, by run: going on, or ended with their outcome not yet
//! recorded, and which of them still hold their lease.
//!
//! A run is its job's id *and* its attempt: when a worker's lease runs out (it was stopped, its
//! database was away) the job may be taken again, by this same worker too, while the first run
//! still goes on. Both runs are tracked, each is renewed until its own lease is lost, and the
//! end of one never touches the other. A run that ended stays renewed until its outcome is
//! recorded, which a busy lane (PostgreSQL) or a database outage may put off.

use crate::store::Completion;
use std::collections::HashSet;

/// One run: (job id, attempt).
pub(super) type RunId = (i64, u32);

/// The runs of one worker loop.
#[derive(Debug, Default)]
pub(super) struct Runs {
    /// Runs going on.
    going: HashSet<RunId>,
    /// Runs that ended, in the order they ended; their outcomes go to the next claim.
    ended: Vec<Completion>,
    /// Runs (going or ended) whose lease was found lost: not renewed again.
    lost: HashSet<RunId>,
}

impl Runs {
    /// A run was taken and started.
    pub(super) fn start(&mut self, run: RunId) {
        self.going.insert(run);
    }

    /// A run ended with this outcome, to be recorded.
    pub(super) fn end(&mut self, completion: Completion) {
        self.going.remove(&(completion.id, completion.attempt));
        self.ended.push(completion);
    }

    /// A run of a cancelled job was stopped: it is forgotten (its job's state says cancelled,
    /// there is no outcome to record).
    pub(super) fn forget(&mut self, run: RunId) {
        self.going.remove(&run);
        self.lost.remove(&run);
    }

    /// Runs going on now (what takes room in the concurrency).
    pub(super) fn going(&self) -> usize {
        self.going.len()
    }

    /// Nothing going on and nothing left to record.
    pub(super) fn is_idle(&self) -> bool {
        self.going.is_empty() && self.ended.is_empty()
    }

    /// Outcomes to record.
    pub(super) fn ended(&self) -> &[Completion] {
        &self.ended
    }

    /// The outcomes given to a claim were recorded (or found lost), except `deferred`, which are
    /// kept for the next one.
    pub(super) fn recorded(&mut self, deferred: Vec<Completion>) {
        let done: Vec<RunId> = self
            .ended
            .iter()
            .map(|c| (c.id, c.attempt))
            .filter(|r| !deferred.iter().any(|d| (d.id, d.attempt) == *r))
            .collect();
        for run in done {
            self.lost.remove(&run);
        }
        self.ended = deferred;
    }

    /// The leases to renew: every run going on or waiting to be recorded, unless lost.
    pub(super) fn leases(&self) -> Vec<RunId> {
        let ended = self.ended.iter().map(|c| (c.id, c.attempt));
        let mut leases: Vec<RunId> =
            self.going.iter().copied().chain(ended).filter(|r| !self.lost.contains(r)).collect();
        leases.sort_unstable();
        leases.dedup();
        leases
    }

    /// A run's lease was found lost: it is not renewed again (it still takes its room until it
    /// ends). Answers whether this is news.
    pub(super) fn lose(&mut self, run: RunId) -> bool {
        let known =
            self.going.contains(&run) || self.ended.iter().any(|c| (c.id, c.attempt) == run);
        known && self.lost.insert(run)
    }

    /// How many runs of each job are going on (for tests and messages).
    #[cfg(test)]
    fn by_job(&self) -> std::collections::HashMap<i64, usize> {
        let mut by = std::collections::HashMap::new();
        for &(id, _) in &self.going {
            *by.entry(id).or_default() += 1;
        }
        by
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Outcome;

    fn done(id: i64, attempt: u32) -> Completion {
        Completion { id, attempt, lane: "l".into(), outcome: Outcome::Done }
    }

    #[test]
    fn the_end_of_a_first_run_leaves_the_second_run_of_the_same_job_renewed() {
        let mut runs = Runs::default();
        runs.start((7, 1));
        assert!(runs.lose((7, 1)), "its lease ran out while the worker was stopped");
        runs.start((7, 2)); // the same worker took the job back
        assert_eq!(runs.by_job()[&7], 2);
        runs.end(done(7, 1));
        assert_eq!(runs.going(), 1);
        assert_eq!(runs.leases(), [(7, 2)], "the second run is still renewed; the lost one not");
        runs.recorded(vec![]);
        assert_eq!(runs.leases(), [(7, 2)]);
        runs.end(done(7, 2));
        assert_eq!(runs.leases(), [(7, 2)], "renewed until its outcome is recorded");
        runs.recorded(vec![]);
        assert!(runs.is_idle() && runs.leases().is_empty());
    }

    #[test]
    fn deferred_outcomes_stay_renewed_and_are_given_again() {
        let mut runs = Runs::default();
        for id in 1..=3 {
            runs.start((id, 1));
            runs.end(done(id, 1));
        }
        runs.recorded(vec![done(2, 1)]);
        assert_eq!(runs.ended(), [done(2, 1)]);
        assert_eq!(runs.leases(), [(2, 1)]);
        assert!(!runs.is_idle());
        assert!(!runs.lose((9, 1)), "a run this worker does not have is no news");
    }
}
