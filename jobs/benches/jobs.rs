//! Numbers for leakgate-jobs, SQLite and PostgreSQL in the same run (a benchmark, not a test):
//!
//! * `add`: jobs/s one at a time (each its own durable transaction) and batched (one
//!   transaction of many, as `add --lines` does);
//! * unpaced throughput through the library worker (no process per job) with 1, 2 and 4
//!   workers, each its own handle (connection) at concurrency 32, jobs of mixed priorities and
//!   schedules stored;
//! * a fleet of 3 workers on one lane of 20/s burst 1: the rate they really start jobs at (to
//!   set beside apalis's per-worker rate limit: `jobs/bench-apalis`);
//! * paced accuracy at 100/s burst 1: lateness of each start against its slot (p50, p99, max):
//!   the real start (the handler's own `SystemTime` at its start, against the run's slot on the
//!   database's clock, the same real-time clock on this machine) and the recorded one (the
//!   decision time, exact by construction when claimed ahead), for the worker claiming 40 ms
//!   ahead (the default) and not ahead (`claim_ahead(0)`), or the values of `PACED_AHEAD_MS`
//!   (ms, comma-separated), interleaved, `PACED_ROUNDS` rounds (3 by default); and the process's CPU while the worker paces, and while it waits with
//!   nothing due.
//!
//! `cargo bench -p leakgate-jobs --bench jobs` (add `-- --quick` for a smaller run). PostgreSQL
//! runs with its defaults (durable commits); SQLite with WAL and `synchronous = FULL`.

use leakgate_jobs::{Every, Jobs, LaneRules, NewJob, Outcome, Schedule};
use leakgate_test_support::postgres;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

struct Sizes {
    single: usize,
    batch: usize,
    sqlite_jobs: usize,
    pg_jobs: usize,
    paced: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches`: nothing to test here
    }
    let quick = args.iter().any(|a| a == "--quick");
    // Sections by name (add, unpaced, paced); all when none is named.
    let named: Vec<&str> =
        args.iter().skip(1).filter(|a| !a.starts_with('-')).map(String::as_str).collect();
    let wants = |section: &str| named.is_empty() || named.contains(&section);
    let sizes = if quick {
        Sizes { single: 100, batch: 2_000, sqlite_jobs: 4_000, pg_jobs: 2_000, paced: 100 }
    } else {
        Sizes { single: 500, batch: 20_000, sqlite_jobs: 20_000, pg_jobs: 10_000, paced: 300 }
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    println!(
        "leakgate-jobs numbers ({} cores, {cpu})",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pg = postgres::Postgres::start_durable();
    let mut n = 0;
    let mut sqlite = || {
        n += 1;
        dir.path().join(format!("bench-{n}.db")).to_str().unwrap().to_string()
    };
    rt.block_on(async {
        if wants("add") {
            println!("\nadd (jobs/s)                 single durable    batched");
            let s = (
                add_single(&sqlite(), sizes.single).await,
                add_batch(&sqlite(), sizes.batch).await,
            );
            println!("  SQLite                     {:>14.0} {:>10.0}", s.0, s.1);
            let p = (
                add_single(&pg.database(), sizes.single).await,
                add_batch(&pg.database(), sizes.batch).await,
            );
            println!("  PostgreSQL                 {:>14.0} {:>10.0}", p.0, p.1);
        }
        if wants("unpaced") {
            println!("\nunpaced, library worker (jobs/s)   1 worker  2 workers  4 workers");
            let s: Vec<f64> = futures(&[1, 2, 4], |w| {
                throughput_owned(sqlite_path(&dir, w), w, sizes.sqlite_jobs)
            })
            .await;
            println!(
                "  SQLite ({} jobs)         {:>10.0} {:>10.0} {:>10.0}",
                sizes.sqlite_jobs, s[0], s[1], s[2]
            );
            let mut p = Vec::new();
            for w in [1, 2, 4] {
                p.push(throughput(&pg.database(), w, sizes.pg_jobs).await);
            }
            println!(
                "  PostgreSQL ({} jobs)     {:>10.0} {:>10.0} {:>10.0}",
                sizes.pg_jobs, p[0], p[1], p[2]
            );
        }
        if wants("paced") {
            println!(
                "\npaced at 100/s burst 1, {} jobs: lateness of each start against its slot",
                sizes.paced
            );
            println!(
                "                  ahead   real p50  real p99  real max   rec p50   rec p99   rec max   CPU pacing"
            );
            let rounds: usize =
                std::env::var("PACED_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3);
            // The worker's `claim_ahead` values compared (ms), `PACED_AHEAD_MS=0,5,10`.
            let aheads: Vec<Duration> = std::env::var("PACED_AHEAD_MS")
                .unwrap_or_else(|_| "0,40".into())
                .split(',')
                .filter_map(|a| a.trim().parse().ok())
                .map(Duration::from_millis)
                .collect();
            for round in 1..=rounds {
                for &ahead in &aheads {
                    let s = paced(&sqlite(), sizes.paced, ahead).await;
                    println!("  SQLite     #{round} {:>4.0}ms {s}", ms(ahead));
                    let p = paced(&pg.database(), sizes.paced, ahead).await;
                    println!("  PostgreSQL #{round} {:>4.0}ms {p}", ms(ahead));
                }
            }
            let (s, p) = (idle(&sqlite()).await, idle(&pg.database()).await);
            println!("  CPU idle-waiting: SQLite {s}, PostgreSQL {p}");
        }
        if wants("fleet") {
            let n = if quick { 120 } else { 240 };
            println!(
                "\nfleet: 3 workers (each its own handle) on one lane of 20/s burst 1, {n} jobs"
            );
            println!("  SQLite     {}", fleet(&sqlite(), n).await);
            println!("  PostgreSQL {}", fleet(&pg.database(), n).await);
        }
    });
}

fn sqlite_path(dir: &tempfile::TempDir, workers: usize) -> String {
    dir.path().join(format!("throughput-{workers}.db")).to_str().unwrap().to_string()
}

async fn futures<F, Fut>(list: &[usize], f: F) -> Vec<f64>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = f64>,
{
    let mut out = Vec::new();
    for &w in list {
        out.push(f(w).await);
    }
    out
}

async fn add_single(db: &str, n: usize) -> f64 {
    let jobs = Jobs::open(db).await.unwrap();
    let t = Instant::now();
    for i in 0..n {
        jobs.add("bench", format!("job {i}")).await.unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

async fn add_batch(db: &str, n: usize) -> f64 {
    let jobs = Jobs::open(db).await.unwrap();
    let batch: Vec<NewJob> = (0..n).map(|i| NewJob::new("bench", format!("job {i}"))).collect();
    let t = Instant::now();
    jobs.add_all(batch).await.unwrap();
    n as f64 / t.elapsed().as_secs_f64()
}

async fn throughput_owned(db: String, workers: usize, n: usize) -> f64 {
    throughput(&db, workers, n).await
}

/// `workers` workers on `db` (each its own handle), each running up to `concurrency` jobs at
/// once, every job done, until the queue is empty: the jobs they ran.
async fn drain(db: &str, workers: usize, concurrency: usize) -> u64 {
    let mut running = Vec::new();
    for _ in 0..workers {
        let handle = Jobs::open(db).await.unwrap();
        running.push(tokio::spawn(async move {
            let worker = handle.worker().concurrency(concurrency).until_empty(true);
            worker.run(|_| async { Outcome::Done }).await.unwrap().done
        }));
    }
    let mut done = 0;
    for r in running {
        done += r.await.unwrap();
    }
    done
}

/// `n` jobs over 8 lanes, of priorities 0 to 3, with 3 schedules stored (ticking hourly: present
/// in every claim, due in none), then `workers` workers (each its own handle) drain them.
async fn throughput(db: &str, workers: usize, n: usize) -> f64 {
    let jobs = Jobs::open(db).await.unwrap();
    for k in 0..3 {
        let every = Every::Interval(Duration::from_secs(3600));
        jobs.every(Schedule::new(format!("s{k}"), every, format!("lane/{k}"), "tick"))
            .await
            .unwrap();
    }
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let batch = chunk
            .iter()
            .map(|i| {
                NewJob::new(format!("lane/{}", i % 8), format!("{i}")).priority((i % 4) as u32)
            })
            .collect();
        jobs.add_all(batch).await.unwrap();
    }
    let t = Instant::now();
    let done = drain(db, workers, 32).await;
    assert_eq!(done as usize, n);
    n as f64 / t.elapsed().as_secs_f64()
}

/// Process CPU time (user + system) from /proc/self/stat, in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|u| u.parse::<f64>().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0 // USER_HZ
}

/// Real and recorded lateness percentiles at 100/s with the worker claiming `ahead`, and the
/// CPU used pacing.
async fn paced(db: &str, n: usize, ahead: Duration) -> String {
    let jobs = Jobs::open(db).await.unwrap();
    jobs.set_rules(&LaneRules::from_toml("paced = \"100/s burst 1\"").unwrap()).await.unwrap();
    jobs.add_all((0..n).map(|i| NewJob::new("paced", format!("{i}"))).collect()).await.unwrap();
    let (cpu, t) = (cpu_seconds(), Instant::now());
    let worker = jobs
        .worker()
        .concurrency(4)
        .claim_ahead(ahead)
        .until_empty(true)
        .on_event(|e| eprintln!("event: {e}"));
    // (events are database errors being retried: none is expected)
    let real = Arc::new(Mutex::new(HashMap::new()));
    let log = real.clone();
    worker
        .run(move |job| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64;
            log.lock().unwrap().insert(job.id(), now);
            async { Outcome::Done }
        })
        .await
        .unwrap();
    let pacing = (cpu_seconds() - cpu) / t.elapsed().as_secs_f64();
    let runs = jobs.runs("paced").await.unwrap();
    let real = real.lock().unwrap();
    let real_late: Vec<Duration> = runs
        .iter()
        .skip(1)
        .map(|r| Duration::from_nanos(real[&r.job].saturating_sub(r.slot_ns).max(0) as u64))
        .collect();
    let recorded: Vec<Duration> = runs.iter().skip(1).map(|r| r.lateness()).collect();
    let (r, d) = (percentiles(real_late), percentiles(recorded));
    format!(
        "{:>7.2}ms {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>7.2}ms {:>10.1}%",
        r[0],
        r[1],
        r[2],
        d[0],
        d[1],
        d[2],
        pacing * 100.0
    )
}

/// p50, p99 and max in ms.
fn percentiles(mut late: Vec<Duration>) -> [f64; 3] {
    late.sort();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize];
    [ms(at(0.5)), ms(at(0.99)), ms(*late.last().unwrap())]
}

/// The CPU a worker uses waiting with nothing due: one job due in 3 s; the worker sleeps until
/// then (SQLite also polls data_version).
async fn idle(db: &str) -> String {
    let jobs = Jobs::open(db).await.unwrap();
    jobs.add_job(NewJob::new("idle", "x").after(Duration::from_secs(3))).await.unwrap();
    let (cpu, t) = (cpu_seconds(), Instant::now());
    let worker = jobs.worker().until_empty(true);
    worker.run(|_| async { Outcome::Done }).await.unwrap();
    format!("{:.2} %", (cpu_seconds() - cpu) / t.elapsed().as_secs_f64() * 100.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The rate 3 workers really start jobs at on a lane of 20/s burst 1.
async fn fleet(db: &str, n: usize) -> String {
    let jobs = Jobs::open(db).await.unwrap();
    jobs.set_rules(&LaneRules::from_toml("fleet = \"20/s burst 1\"").unwrap()).await.unwrap();
    jobs.add_all((0..n).map(|i| NewJob::new("fleet", format!("{i}"))).collect()).await.unwrap();
    drain(db, 3, 4).await;
    let mut starts: Vec<i64> =
        jobs.runs("fleet").await.unwrap().iter().map(|r| r.started_ns).collect();
    starts.sort();
    let span = (starts[starts.len() - 1] - starts[0]) as f64 / 1e9;
    let rate = (starts.len() - 1) as f64 / span;
    let most = (0..starts.len())
        .map(|i| starts[i..].iter().take_while(|&&b| b - starts[i] < 1_000_000_000).count())
        .max()
        .unwrap_or(0);
    format!(
        "{rate:.1} jobs/s over {span:.2} s ({:.2}x the 20/s configured); most starts in any 1 s window: {most}",
        rate / 20.0
    )
}
