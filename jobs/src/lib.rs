//! Durable paced jobs: a persisted queue whose lanes are paced exactly across every worker, on
//! SQLite by default and PostgreSQL for many servers.
//!
//! A job is a payload (bytes) in a *lane*, a `/`-separated name such as `refunds/bank-a`. Lanes
//! are paced by [`LaneRules`]: leakgate's rules (a lane gets the quotas of its longest configured
//! prefix, a bucket of its own, several quotas all or nothing) plus `max_in_flight` and
//! `max_waiting`. Every run of a job, first or retry, is charged to its lane's GCRA buckets in
//! the same database transaction that claims it, and the buckets' state (their TATs) is stored
//! beside the jobs. So the pace holds exactly across every worker, process and server, and
//! across restarts: a restarted worker starts no fresh burst.
//!
//! * **Order and fairness.** Within a lane, higher [priority](NewJob::priority) first, and jobs
//!   of equal priority in the order they were added; ready lanes take turns, each as many jobs a
//!   turn as its `weight` in the rules (1 by default), and a lane waiting for its pace never
//!   holds back another.
//! * **Control.** [`Jobs::cancel`] (a waiting job never runs, a running one is stopped and not
//!   retried), [`Jobs::pause`] and [`Jobs::resume`] a lane.
//! * **Crashes.** A taken job has a lease its worker renews; a job whose worker dies runs again
//!   once the lease runs out, with its attempt number raised (a fencing token). A job runs more
//!   than once only then.
//! * **Stalls and timeouts.** A run past the worker's [`timeout`](Worker::timeout) is stopped
//!   and fails. On PostgreSQL a claim never waits for a lane another session holds, and every
//!   session carries timeouts derived from the lease, so the server ends a stalled worker's
//!   transaction within about half a lease; SQLite has one writer at a time, and a worker stalled
//!   inside a write holds up the file until it continues or dies (see the README).
//! * **Retries.** A failed run is retried after a doubling backoff (with jitter), through the
//!   pacer; after `max_attempts` the job is dead: kept, listed, requeued on demand. A "slow
//!   down" answer pauses the lane instead of counting as a failure.
//! * **Adding.** Idempotency keys, delays, a bound on waiting jobs per lane; a batch is added
//!   whole or not at all.
//! * **No polling for slots.** GCRA says when a lane's next slot is: a worker sleeps until the
//!   earliest slot, a run ending, or a new job (PostgreSQL `LISTEN/NOTIFY`; SQLite: a look at
//!   `PRAGMA data_version` every 50 ms, a read of shared memory).
//!
//! # Example
//!
//! ```
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! use leakgate_jobs::{Jobs, LaneRules, NewJob, Outcome};
//! use std::time::Duration;
//!
//! // A SQLite file (created if missing), or "postgres://user:password@host/db".
//! let dir = tempfile::tempdir()?;
//! let jobs = Jobs::open(dir.path().join("jobs.db").to_str().unwrap()).await?;
//!
//! // The bank takes one refund at a time, at most 20 a second.
//! jobs.set_rules(&LaneRules::from_toml(
//!     r#""refunds" = { quota = "20/s burst 1", max_in_flight = 1 }"#,
//! )?)
//! .await?;
//!
//! // Jobs are durably stored when `add` returns; a key makes adding idempotent.
//! for order in 1..=5 {
//!     let refund = NewJob::new("refunds/bank-a", format!("order {order}")).key(format!("refund-{order}"));
//!     jobs.add_job(refund).await?;
//! }
//!
//! // Any number of workers, in any number of processes, share the lane's pace.
//! let summary = jobs
//!     .worker()
//!     .concurrency(4)
//!     .until_empty(true)
//!     .run(|job| async move {
//!         // Send the refund; pass (id, attempt) to the bank as an idempotency key.
//!         let _fence = (job.id(), job.attempt());
//!         match job.payload() {
//!             b"order 3" if job.attempt() == 1 => Outcome::SlowDown(Duration::from_millis(100)),
//!             _ => Outcome::Done,
//!         }
//!     })
//!     .await?;
//! assert_eq!(summary.done, 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Or step by step: [`Jobs::take`] claims jobs whose turn has come, and [`Jobs::done`],
//! [`Jobs::fail`], [`Jobs::slow_down`] and [`Jobs::renew`] report on them.
//!
//! # SQLite or PostgreSQL
//!
//! SQLite (a file path) needs no server: several worker processes on one machine share the file
//! (WAL journal, `synchronous = FULL`, `BEGIN IMMEDIATE` claims, the system's real-time clock).
//! PostgreSQL (a `postgres://` URL) is for workers on many servers: claims lock lanes with
//! `FOR UPDATE SKIP LOCKED` and their pace rows in the same transaction, on the server's clock.
//! The schema is created and migrated by this crate (versioned) in either.
//!
//! # Metrics
//!
//! Workers count through the `metrics` facade: `leakgate_jobs_runs_total`,
//! `leakgate_jobs_done_total`, `leakgate_jobs_failed_total`, `leakgate_jobs_retries_total`,
//! `leakgate_jobs_dead_total`, `leakgate_jobs_slow_downs_total`,
//! `leakgate_jobs_lease_expiries_total`, the gauge `leakgate_jobs_lane_rate_per_second` (label
//! `lane`: an adaptive lane's rate in force, its first quota's, set when this worker moves it),
//! `leakgate_jobs_runs_cancelled_total` (runs stopped
//! because their job was cancelled), and the histograms `leakgate_jobs_claim_seconds` (one claim
//! transaction) and `leakgate_jobs_lateness_seconds` (each start against its slot). The
//! operations count too: `leakgate_jobs_cancelled_total` (jobs cancelled by
//! [`Jobs::cancel`]), `leakgate_jobs_lane_pauses_total` and `leakgate_jobs_lane_resumes_total`.
//! What is stored (cancelled jobs, paused lanes) is read with [`Jobs::status`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod builder;
mod control;
mod error;
mod job;
mod jobs;
mod operate;
mod pace;
mod retry;
mod rules;
mod schedule;
mod status;
mod store;
mod worker;

pub use builder::JobsBuilder;
pub use error::Error;
pub use job::{Added, Job, MAX_LANE, MAX_PAYLOAD, MAX_PRIORITY, NewJob, Outcome};
pub use jobs::Jobs;
pub use rules::{LaneLimits, LaneRules, RulesError};
pub use schedule::{Every, Missed, Schedule, ScheduleInfo};
pub use status::{DeadJob, LaneStatus, Requeue, Run};
pub use worker::{Event, Progress, Snapshot, Stop, Worker};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
