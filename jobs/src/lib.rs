//! Durable paced jobs: a persisted queue whose lanes are paced exactly across every worker.
//!
//! (crate docs: written in the docs slice)
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod job;
mod jobs;
mod pace;
mod rules;
mod status;
mod store;
mod worker;

pub use error::Error;
pub use job::{Added, Job, NewJob, Outcome, MAX_LANE, MAX_PAYLOAD};
pub use jobs::{Jobs, JobsBuilder};
pub use rules::{LaneLimits, LaneRules, RulesError};
pub use status::{DeadJob, LaneStatus, Requeue, Run};
pub use worker::{Event, Progress, Snapshot, Stop, Worker};
