//! The worker's loop.
//!
//! One loop, one transaction per turn: the outcomes of the runs that ended since the last turn
//! are recorded in the same transaction that takes the next jobs (so a worker at concurrency 1
//! commits once per job). The transaction also reports the earliest time anything may become
//! takeable (a lane's next slot, a delayed job, a lease's end); the loop then sleeps until that
//! time, a run ending, a lease renewal (every third of the lease), a stop, or a change to the
//! database (an add through this handle, PostgreSQL `NOTIFY`, or SQLite's `data_version` seen
//! to move, see [`crate::store`]). It never polls to find out when a lane may go.
//!
//! Leases are renewed at the top of each turn when due, before the claim: a claim that fails
//! (the database away) retries no later than the next renewal, and a renewal is never skipped.
//! Runs are tracked by (job id, attempt) (see [`super::runs`]): a job this worker takes back
//! while its first run still goes on is two runs, each renewed on its own. A run past the
//! worker's timeout is stopped (see [`Worker::timeout`]). A run whose lease is found lost at a
//! renewal because its job was cancelled is stopped (its future dropped) and forgotten.
//!
//! Claiming ahead ([`Worker::claim_ahead`]): the transaction's wake-up for a paced lane is
//! `claim_ahead` before its slot, and a run it takes then is charged at its slot. Its task waits
//! until that time, mapped to this clock from the instant by which the claim's clock reading was
//! made (never early), before calling the handler; a cancel during the wait means the handler
//! never runs (the run is forgotten as a cancelled one is). The run holds its lease and its
//! place in the concurrency from the claim.

use super::progress::Counter;
use super::runs::Runs;
use super::{Event, Snapshot, Worker, rules_file};
use crate::error::Error;
use crate::job::{Job, Outcome};
use crate::store::{Completion, Taken};
use futures_util::FutureExt;
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// How often done jobs past the retention are purged.
const PURGE_EVERY: Duration = Duration::from_secs(600);

/// A run that ends this close before the next slot has its outcome recorded in that slot's claim.
const RIDE_ALONG: Duration = Duration::from_millis(50);

/// How long to wait before retrying after a failed database operation (doubling to a minute).
const RETRY_FIRST: Duration = Duration::from_millis(250);

/// How soon to try again to record outcomes that a busy lane put off (doubling to
/// [`DEFER_MAX`] while they stay put off).
const DEFER_FIRST: Duration = Duration::from_millis(2);
const DEFER_MAX: Duration = Duration::from_millis(250);

/// A run that ended, and how long it took.
struct Ended {
    completion: Completion,
    took: Duration,
    /// Stopped because its job was cancelled.
    cancelled: bool,
}

/// For each run going on, the way to stop it (its job was cancelled).
type Stoppers = HashMap<(i64, u32), oneshot::Sender<()>>;

impl Worker {
    /// Runs jobs with `handler` until stopped (or, with [`until_empty`](Self::until_empty), until
    /// the queue is empty); answers the counts. A handler that panics fails its run.
    ///
    /// Errors only when the rules file cannot be used at start; database errors later are
    /// reported as [`Event::Retrying`] and retried.
    ///
    /// ```no_run
    /// # async fn f(jobs: leakgate_jobs::Jobs) -> Result<(), leakgate_jobs::Error> {
    /// let summary = jobs.worker().run(|job| async move {
    ///     if job.payload().is_empty() { leakgate_jobs::Outcome::Failed("empty".into()) }
    ///     else { leakgate_jobs::Outcome::Done }
    /// }).await?;
    /// println!("{} done", summary.done);
    /// # Ok(()) }
    /// ```
    pub async fn run<F, Fut>(self, handler: F) -> Result<Snapshot, Error>
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let mut rules = match &self.rules_file {
            Some(path) => {
                Some(rules_file::RulesFile::load(&self.jobs, path, self.rules_poll).await?)
            }
            None => None,
        };
        if let Some(r) = &rules {
            self.emit(&Event::RulesLoaded { rules: r.len() });
        }
        let handler = Arc::new(handler);
        let (ended_tx, mut ended_rx) = mpsc::unbounded_channel::<Ended>();
        let mut stop = self.stop.subscribe();
        let mut runs = Runs::default();
        let mut stoppers = Stoppers::new();
        let lease = self.jobs.policy().lease;
        let mut renew_at = Instant::now() + lease / 3;
        let mut purge_at = Instant::now();
        let mut retry_wait = RETRY_FIRST;
        let mut defer_wait = DEFER_FIRST;
        // Whether the next claim should first look without locks (after a wake-up by a change
        // elsewhere, which may be nothing for this worker); not when a slot or a run ended.
        let mut look_first = true;
        loop {
            while let Ok(e) = ended_rx.try_recv() {
                self.ended(&mut runs, &mut stoppers, e);
            }
            let stopping = *stop.borrow();
            if stopping && runs.is_idle() {
                break;
            }
            // Renewals come before the claim, so that neither a claim that fails (the database
            // away) nor one that takes a job back skips them.
            if Instant::now() >= renew_at {
                renew_at = Instant::now() + self.renew(&mut runs, &mut stoppers).await;
            }
            let room = if stopping { 0 } else { self.concurrency.saturating_sub(runs.going()) };
            let started = Instant::now();
            let result =
                self.jobs.take_raw(runs.ended().to_vec(), room, look_first, self.claim_ahead).await;
            // The database read its clock before this (a fallback for the claim's own instant).
            let received = Instant::now();
            let taken = match result {
                Ok(taken) => taken,
                Err(e) => {
                    self.emit(&Event::Retrying(e));
                    // Back off, but wake for the next renewal.
                    let mut until = Instant::now() + retry_wait;
                    if !runs.leases().is_empty() {
                        until = until.min(renew_at);
                    }
                    tokio::time::sleep_until(until).await;
                    retry_wait = (retry_wait * 2).min(Duration::from_secs(60));
                    continue;
                }
            };
            retry_wait = RETRY_FIRST;
            metrics::histogram!("leakgate_jobs_claim_seconds").record(started.elapsed());
            self.count(runs.ended(), &taken);
            for &run in &taken.lost {
                // Its outcome was not recorded.
                if runs.lose(run) {
                    self.emit(&Event::LeaseLost { job: run.0 });
                }
            }
            let deferred = !taken.deferred.is_empty();
            runs.recorded(taken.deferred);
            let took = taken.jobs.len();
            // The charge times, mapped to this clock from the instant by which the claim's clock
            // reading was made (see `Taken::claim_clock`): never early.
            let (claim_now, read_by) = taken
                .claim_clock
                .map_or((taken.now, received), |(now, at)| (now, Instant::from_std(at)));
            for job in taken.jobs {
                runs.start((job.id, job.attempt));
                let (stop_tx, stop_rx) = oneshot::channel();
                stoppers.insert((job.id, job.attempt), stop_tx);
                // A run claimed ahead starts at its charge time, mapped to this clock.
                let ahead = job.started_ns.saturating_sub(claim_now).max(0) as u64;
                // `None`: a charge time centuries away (a huge `claim_ahead`) that this clock
                // cannot hold; the run then waits for ever rather than start early.
                let target = read_by.checked_add(Duration::from_nanos(ahead));
                self.spawn(job, target, handler.clone(), ended_tx.clone(), stop_rx);
            }
            self.progress.set(Counter::Running, runs.going() as u64);
            self.progress.set(Counter::Remaining, taken.remaining.max(0) as u64);
            if runs.is_idle() && (stopping || (self.until_empty && taken.remaining == 0)) {
                break;
            }
            // When to look again: the earliest slot (if there is room to take), the next lease
            // renewal (if running), outcomes put off by a busy lane, the rules file, the purge.
            let now = Instant::now();
            let mut until = now + Duration::from_secs(3600);
            // The database's time was read at the start of the transaction: count the wait from
            // then, not from its end.
            let wake_at = taken.wake.map(|wake| {
                started + Duration::from_nanos(wake.saturating_sub(taken.now).max(0) as u64)
            });
            if room > took
                && let Some(at) = wake_at
            {
                // Nothing taken yet something due now: another process holds it; look again
                // shortly rather than at once.
                let at = if took == 0 { at.max(now + Duration::from_millis(1)) } else { at };
                until = until.min(at);
            }
            if deferred {
                until = until.min(now + defer_wait);
                defer_wait = (defer_wait * 2).min(DEFER_MAX);
            } else {
                defer_wait = DEFER_FIRST;
            }
            if !runs.leases().is_empty() {
                until = until.min(renew_at);
            }
            if let Some(r) = &rules {
                until = until.min(r.next_check());
            }
            if self.retention.is_some() {
                until = until.min(purge_at);
            }
            look_first = false;
            while until > Instant::now() {
                let can_take = room > took;
                tokio::select! {
                    Some(e) = ended_rx.recv() => {
                        self.ended(&mut runs, &mut stoppers, e);
                        // A slot coming soon: record this outcome in its transaction (one
                        // commit instead of two, and no commit in flight when the slot comes).
                        let soon = Instant::now() + RIDE_ALONG;
                        match wake_at {
                            Some(at) if at > Instant::now() && at <= soon && !stopping => until = until.min(at),
                            _ => break,
                        }
                    }
                    _ = sleep_until(until) => break,
                    _ = self.jobs.changed(until.saturating_duration_since(Instant::now())), if can_take => {
                        look_first = true;
                        break;
                    }
                    _ = stop.changed() => break,
                }
            }
            let now = Instant::now();
            if let Some(r) = &mut rules
                && now >= r.next_check()
                && let Some(event) = r.check(&self.jobs).await
            {
                self.emit(&event);
            }
            if let Some(keep) = self.retention.filter(|_| now >= purge_at) {
                purge_at = now + PURGE_EVERY;
                match self.jobs.purge(keep).await {
                    Ok(0) => {}
                    Ok(n) => self.emit(&Event::Purged { jobs: n }),
                    Err(e) => self.emit(&Event::Retrying(e)),
                }
            }
        }
        Ok(self.progress.snapshot())
    }

    /// Runs `job` with `handler` on a task of its own, not before `target` (its charge time: a
    /// run claimed ahead waits for it here, and a cancel during the wait means the handler never
    /// runs; `None`: a time this clock cannot hold, never), within the timeout if one is set (counted from its start); its outcome comes back
    /// on `ended`. A handler that panics fails its run.
    ///
    /// The job's start (`started_ns`, what [`Job::lateness`] and the lateness metric see) is
    /// moved from its charge time by how late the wait ended: the lateness is the claim's and
    /// this wake-up's together.
    fn spawn<F, Fut>(
        &self,
        mut job: Job,
        target: Option<Instant>,
        handler: Arc<F>,
        ended: mpsc::UnboundedSender<Ended>,
        cancel: oneshot::Receiver<()>,
    ) where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let (timeout, grace) = (self.timeout, self.stop_grace);
        let (id, attempt, lane) = (job.id, job.attempt, job.lane.clone());
        // Fused: a sender dropped during the wait leaves it pending, never polled again.
        let mut cancel = cancel.fuse();
        tokio::spawn(async move {
            let wait = async move {
                match target {
                    Some(at) => sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let waited = tokio::select! {
                () = wait => true,
                Ok(()) = &mut cancel => false,
            };
            if !waited {
                let completion =
                    Completion { id, attempt, lane, outcome: Outcome::Failed("cancelled".into()) };
                let _ = ended.send(Ended { completion, took: Duration::ZERO, cancelled: true });
                return;
            }
            let start = Instant::now();
            let late = target.map_or(Duration::ZERO, |at| start.saturating_duration_since(at));
            job.started_ns = job.started_ns.saturating_add(crate::job::ns(late));
            metrics::histogram!("leakgate_jobs_lateness_seconds").record(job.lateness());
            let limit = timeout.map(|t| (start + t, t, grace));
            job.deadline = limit.map(|(at, _, _)| at.into_std());
            let run = AssertUnwindSafe(handler(job)).catch_unwind();
            let panicked = |_| Outcome::Failed("the handler panicked".into());
            let timed = async move {
                match limit {
                    None => run.await.unwrap_or_else(panicked),
                    Some((deadline, timeout, grace)) => {
                        tokio::pin!(run);
                        match tokio::time::timeout_at(deadline, &mut run).await {
                            // Ended before its deadline. (`timeout_at` polls the run first: a run
                            // whose end and deadline were both passed when the task was polled
                            // late, on a loaded machine, ended past its time.)
                            Ok(outcome) if Instant::now() < deadline => {
                                outcome.unwrap_or_else(panicked)
                            }
                            Ok(_) => Outcome::Failed(format!("timed out after {timeout:?}")),
                            Err(_) => {
                                // Past its time: the handler, told by its job's deadline, has the
                                // grace to wind down; then it is dropped. A failed attempt either way.
                                let _ = tokio::time::timeout(grace, &mut run).await;
                                Outcome::Failed(format!("timed out after {timeout:?}"))
                            }
                        }
                    }
                }
            };
            // A cancel drops the run's future (for `leakgate jobs work`, that stops the command's
            // process group); a dropped sender (the run was not cancelled) changes nothing.
            let (outcome, cancelled) = tokio::select! {
                outcome = timed => (outcome, false),
                Ok(()) = &mut cancel => (Outcome::Failed("cancelled".into()), true),
            };
            let took = start.elapsed();
            let completion = Completion { id, attempt, lane, outcome };
            let _ = ended.send(Ended { completion, took, cancelled });
        });
    }

    /// A run ended: tell the owner, and keep its outcome for the next claim (a stopped run of a
    /// cancelled job has none to keep).
    fn ended(&self, runs: &mut Runs, stoppers: &mut Stoppers, e: Ended) {
        let c = &e.completion;
        stoppers.remove(&(c.id, c.attempt));
        if e.cancelled {
            self.progress.add(Counter::Cancelled, 1);
            metrics::counter!("leakgate_jobs_runs_cancelled_total").increment(1);
            self.emit(&Event::Cancelled { job: c.id });
            runs.forget((c.id, c.attempt));
            return;
        }
        self.emit(&Event::Finished {
            job: c.id,
            lane: c.lane.clone(),
            attempt: c.attempt,
            outcome: c.outcome.clone(),
            took: e.took,
        });
        runs.end(e.completion);
    }

    /// Counts what one transaction recorded and took.
    fn count(&self, ended: &[Completion], taken: &Taken) {
        let p = &self.progress;
        let recorded: Vec<&Completion> = ended
            .iter()
            .filter(|c| {
                let run = (c.id, c.attempt);
                !taken.lost.contains(&run)
                    && !taken.deferred.iter().any(|d| (d.id, d.attempt) == run)
            })
            .collect();
        for c in &recorded {
            let (counter, metric) = match c.outcome {
                Outcome::Done => (Counter::Done, "leakgate_jobs_done_total"),
                Outcome::Failed(_) | Outcome::RetryAfter(_) => {
                    (Counter::Failed, "leakgate_jobs_failed_total")
                }
                Outcome::SlowDown(_) => (Counter::Slowed, "leakgate_jobs_slow_downs_total"),
            };
            p.add(counter, 1);
            metrics::counter!(metric).increment(1);
        }
        p.add(Counter::Lost, taken.lost.len() as u64);
        let dead = taken.died + taken.expired_dead;
        p.add(Counter::Dead, dead);
        p.add(Counter::Started, taken.jobs.len() as u64);
        metrics::counter!("leakgate_jobs_runs_total").increment(taken.jobs.len() as u64);
        metrics::counter!("leakgate_jobs_dead_total").increment(dead);
        metrics::counter!("leakgate_jobs_lease_expiries_total").increment(taken.expired);
        metrics::counter!("leakgate_jobs_schedule_ticks_total").increment(taken.ticked);
        for (lane, rate) in &taken.rates {
            metrics::gauge!("leakgate_jobs_lane_rate_per_second", "lane" => lane.clone())
                .set(*rate);
        }
        let retries = recorded
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Failed(_) | Outcome::RetryAfter(_)))
            .count() as u64;
        metrics::counter!("leakgate_jobs_retries_total")
            .increment(retries.saturating_sub(taken.died));
    }

    /// Renews the leases of the runs going on or waiting to be recorded; a run whose lease was
    /// lost is marked and not renewed again (its job is back in the queue; the run still takes
    /// its place in the concurrency until it ends). Answers when to renew next: a third of the
    /// lease from now, or sooner after a failure.
    async fn renew(&self, runs: &mut Runs, stoppers: &mut Stoppers) -> Duration {
        let every = self.jobs.policy().lease / 3;
        let leases = runs.leases();
        if leases.is_empty() {
            return every;
        }
        match self.jobs.renew_raw(leases).await {
            Ok(lost) => {
                // Lost because the job was cancelled: stop the run (one look, only when a lease
                // was lost; a failed look leaves the runs going, as any lost lease does).
                let ids: Vec<i64> = lost.iter().map(|r| r.0).collect();
                let cancelled = match ids.is_empty() {
                    true => vec![],
                    false => self.jobs.store().cancelled_among(ids).await.unwrap_or_default(),
                };
                for run in lost {
                    if cancelled.contains(&run.0)
                        && let Some(stop) = stoppers.remove(&run)
                    {
                        let _ = stop.send(());
                        runs.lose(run);
                    } else if runs.lose(run) {
                        self.emit(&Event::LeaseLost { job: run.0 });
                    }
                }
                every
            }
            Err(e) => {
                self.emit(&Event::Retrying(e));
                every.min(RETRY_FIRST)
            }
        }
    }

    fn emit(&self, event: &Event) {
        if let Some(sink) = &self.events {
            sink(event);
        }
    }
}

/// Sleeps until `at`, to within tens of microseconds: tokio's timer wakes on whole milliseconds
/// (its driver waits in `epoll_wait`, whose timeout is in milliseconds), which alone would make
/// a start up to a millisecond late; so the last 2 ms are slept on a blocking thread
/// (`nanosleep`). A timed sleep either way, never a poll.
async fn sleep_until(at: Instant) {
    const FINE: Duration = Duration::from_millis(2);
    let now = Instant::now();
    if at <= now {
        return;
    }
    if at - now > FINE {
        tokio::time::sleep_until(at - FINE).await;
    }
    let left = at.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(left)).await;
    }
}
