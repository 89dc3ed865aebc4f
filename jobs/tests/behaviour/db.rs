//! A fresh database per case, and the clock cases decide on.

use leakgate::ManualClock;
use leakgate_jobs::{Jobs, JobsBuilder};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

pub type Case = fn(Db) -> Pin<Box<dyn Future<Output = ()> + Send>>;

pub type Fresh = std::sync::Arc<dyn Fn() -> String + Send + Sync>;

pub enum Backend {
    Sqlite,
    Postgres(String, Fresh),
}

/// One case's database: a SQLite file in a temporary directory, or a new PostgreSQL database.
pub struct Db {
    pub url: String,
    /// Makes another fresh database of the same backend (for property tests).
    pub fresh: Fresh,
    pub is_sqlite: bool,
    _dir: Option<tempfile::TempDir>,
}

/// 2023-11-14, in ns since the epoch: where caller clocks start.
pub const EPOCH: Duration = Duration::from_secs(1_700_000_000);

impl Db {
    /// A handle deciding on `clock`.
    pub async fn at(&self, clock: &ManualClock) -> Jobs {
        self.builder().caller_clock(clock.clone()).open().await.unwrap()
    }

    /// A handle on the database's own clock.
    pub async fn real(&self) -> Jobs {
        self.builder().open().await.unwrap()
    }

    pub fn builder(&self) -> JobsBuilder {
        Jobs::builder(&self.url)
    }
}

/// A manual clock at [`EPOCH`].
pub fn clock() -> ManualClock {
    let clock = ManualClock::new();
    clock.set(EPOCH);
    clock
}

pub fn run(case: Case, backend: Backend) -> Result<(), libtest_mimic::Failed> {
    let (url, dir, is_sqlite, fresh) = match backend {
        Backend::Sqlite => {
            let dir = tempfile::tempdir().unwrap();
            let url = dir.path().join("jobs.db").to_str().unwrap().to_string();
            let base = dir.path().to_path_buf();
            let made = std::sync::atomic::AtomicU64::new(0);
            let fresh: Fresh = std::sync::Arc::new(move || {
                let n = made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                base.join(format!("fresh-{n}.db")).to_str().unwrap().to_string()
            });
            (url, Some(dir), true, fresh)
        }
        Backend::Postgres(url, fresh) => (url, None, false, fresh),
    };
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let db = Db { url, fresh, is_sqlite, _dir: dir };
    // A case that hangs fails instead of holding the run (and the server) forever.
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(120), case(db)).await })
        .map_err(|_| "the case did not finish within 120 s".into())
}
