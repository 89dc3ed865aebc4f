//! PostgreSQL (in progress).
#![allow(dead_code, missing_docs)]
use crate::error::Error;
use crate::job::{Added, NewJob};
use crate::rules::LaneRules;
use crate::status::{DeadJob, LaneStatus, Requeue, Run};
use crate::store::{Take, Taken};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
pub(crate) struct Postgres;

fn todo<T>() -> Result<T, Error> {
    Err(Error::Connect("PostgreSQL store not built yet".into()))
}

impl Postgres {
    pub(crate) async fn open(_db: &str, _n: usize) -> Result<Postgres, Error> {
        todo()
    }
    pub(crate) async fn add(
        &self,
        _jobs: Vec<NewJob>,
        _now: Option<i64>,
    ) -> Result<Vec<Added>, Error> {
        todo()
    }
    pub(crate) async fn take(&self, _take: Take) -> Result<Taken, Error> {
        todo()
    }
    pub(crate) async fn renew(
        &self,
        _l: Vec<(i64, u32)>,
        _lease: Duration,
        _now: Option<i64>,
    ) -> Result<Vec<i64>, Error> {
        todo()
    }
    pub(crate) async fn set_rules(&self, _t: String, _r: LaneRules) -> Result<i64, Error> {
        todo()
    }
    pub(crate) async fn rules(&self) -> Result<Arc<LaneRules>, Error> {
        todo()
    }
    pub(crate) async fn status(&self, _now: Option<i64>) -> Result<Vec<LaneStatus>, Error> {
        todo()
    }
    pub(crate) async fn dead(
        &self,
        _lane: Option<String>,
        _limit: i64,
    ) -> Result<Vec<DeadJob>, Error> {
        todo()
    }
    pub(crate) async fn runs(&self, _lane: String) -> Result<Vec<Run>, Error> {
        todo()
    }
    pub(crate) async fn requeue(&self, _w: Requeue, _now: Option<i64>) -> Result<u64, Error> {
        todo()
    }
    pub(crate) async fn purge(&self, _d: Duration, _now: Option<i64>) -> Result<u64, Error> {
        todo()
    }
    pub(crate) async fn changed(&self, timeout: Duration) {
        tokio::time::sleep(timeout).await
    }
}
