//! `leakgate jobs demo`: the refund case end to end, on a SQLite file of its own.
//!
//! Refunds are added to one lane that the bank paces; two worker processes (`leakgate jobs
//! work`, as a user would run them) share the file and send them; worker A is killed with
//! SIGKILL mid-refund; worker B finishes the queue, taking the killed worker's refund once its
//! lease runs out. The summary is read back from the database: every refund done, which ran
//! twice and why, and the pace held across both workers and the kill.

use super::block_on;
use leakgate::Quota;
use leakgate_jobs::{Jobs, NewJob};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The arguments of `leakgate jobs demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Refunds to send
    #[arg(long, value_name = "N", default_value_t = 12, value_parser = clap::value_parser!(u32).range(2..=1000))]
    refunds: u32,
    /// The bank's rate, as a quota
    #[arg(long, value_name = "RATE", default_value = "4/s burst 1")]
    rate: Quota,
    /// Kill worker A once it has sent this many refunds
    #[arg(long, value_name = "N", default_value_t = 3)]
    kill_after: u64,
}

/// What each job runs: says who sends what, then takes half a second (the bank's answer).
const SEND: &str =
    "echo \"worker $DEMO_WORKER sends $(cat) (job $LEAKGATE_JOB_ID, attempt $LEAKGATE_JOB_ATTEMPT)\"; sleep 0.5";

/// Runs the demo.
pub(crate) fn run(args: Args) -> ExitCode {
    let dir = std::env::temp_dir().join(format!("leakgate-jobs-demo-{}", std::process::id()));
    let code = block_on("demo", demo(&args, &dir));
    let _ = std::fs::remove_dir_all(&dir);
    code
}

async fn demo(args: &Args, dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    let db = dir.join("jobs.db");
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, format!("\"refunds/bank-a\" = \"{}\"\n", args.rate))
        .map_err(|e| e.to_string())?;
    let db_text = db.to_str().ok_or("the temporary directory is not UTF-8")?.to_string();
    let queue = Jobs::open(&db_text).await.map_err(|e| e.to_string())?;
    let refunds = (1..=args.refunds).map(|i| {
        NewJob::new(
            "refunds/bank-a",
            format!("refund #{i} (order {}, {}.99 EUR)", 1000 + i, 10 + i),
        )
        .key(format!("refund-{i}"))
    });
    queue.add_all(refunds.collect()).await.map_err(|e| e.to_string())?;
    crate::out::outln!("leakgate jobs demo");
    crate::out::outln!("  {} refunds for bank-a are stored in {}", args.refunds, db.display());
    crate::out::outln!("  the bank takes {}; two workers share the file:", args.rate);
    crate::out::outln!(
        "    leakgate jobs work --db {} --rules {} --lease 2s --until-empty -- sh -c '...'",
        db.display(),
        rules.display()
    );
    crate::out::outln!(
        "  worker A is killed with SIGKILL (kill -9) once it has sent {} refunds\n",
        args.kill_after
    );
    let start = Instant::now();
    let (mut a, sent_by_a) = spawn_worker("A", &db, &rules, start)?;
    let (mut b, _) = spawn_worker("B", &db, &rules, start)?;
    while sent_by_a.load(Ordering::Relaxed) < args.kill_after
        && start.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = a.kill(); // SIGKILL
    let _ = a.wait();
    crate::out::outln!(
        "{:>7.2}s  worker A killed with SIGKILL mid-refund: that refund's lease runs out in 2 s, then worker B sends it",
        start.elapsed().as_secs_f64()
    );
    let status = tokio::task::spawn_blocking(move || b.wait()).await.map_err(|e| e.to_string())?;
    let status = status.map_err(|e| format!("worker B: {e}"))?;
    if !status.success() {
        return Err(format!("worker B failed ({status})"));
    }
    summary(&queue, args).await
}

/// Starts `leakgate jobs work` as worker `name`; a thread prints its lines with their time.
fn spawn_worker(
    name: &str,
    db: &Path,
    rules: &Path,
    start: Instant,
) -> Result<(Child, Arc<AtomicU64>), String> {
    let exe: PathBuf =
        std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut child = Command::new(exe)
        .args(["jobs", "work", "--db"])
        .arg(db)
        .arg("--rules")
        .arg(rules)
        .args(["--lease", "2s", "--until-empty", "--", "sh", "-c", SEND])
        .env("DEMO_WORKER", name)
        // Its folder of job replies inside the demo's folder, removed with it: the worker killed
        // with SIGKILL cannot remove its own.
        .env("TMPDIR", db.parent().unwrap_or(db))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start worker {name}: {e}"))?;
    let sent = Arc::new(AtomicU64::new(0));
    let counter = sent.clone();
    let out = child.stdout.take().ok_or("no stdout")?;
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            crate::out::outln!("{:>7.2}s  {line}", start.elapsed().as_secs_f64());
            // Relaxed: a count read for display and for when to kill, nothing published by it.
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    Ok((child, sent))
}

/// What the database says happened.
async fn summary(queue: &Jobs, args: &Args) -> Result<(), String> {
    let lanes = queue.status().await.map_err(|e| e.to_string())?;
    let lane = lanes.iter().find(|l| l.lane == "refunds/bank-a").ok_or("the lane is gone")?;
    let runs = queue.runs("refunds/bank-a").await.map_err(|e| e.to_string())?;
    let mut twice: Vec<i64> = runs.iter().filter(|r| r.attempt > 1).map(|r| r.job).collect();
    twice.dedup();
    crate::out::outln!("\nsummary (read back from the database)");
    crate::out::outln!(
        "  {} refunds added, {} done, {} waiting, {} dead: nothing lost",
        args.refunds,
        lane.done,
        lane.waiting(),
        lane.dead
    );
    for job in &twice {
        crate::out::outln!(
            "  job {job} ran twice: its first run's worker was killed; a job runs again only then \
             (pass LEAKGATE_JOB_ID and LEAKGATE_JOB_ATTEMPT to the bank as an idempotency key)"
        );
    }
    let starts: Vec<i64> = runs.iter().map(|r| r.started_ns).collect();
    let t = args.rate.period().as_nanos() as f64 / args.rate.count() as f64;
    let mut worst = 0.0f64;
    for (i, a) in starts.iter().enumerate() {
        for (j, b) in starts.iter().enumerate().skip(i) {
            let allowed = args.rate.burst() as f64 + (b - a) as f64 / t;
            worst = worst.max((j - i + 1) as f64 - allowed);
        }
    }
    let span = (starts.last().unwrap_or(&0) - starts.first().unwrap_or(&0)) as f64 / 1e9;
    crate::out::outln!(
        "  {} runs started over {span:.2} s by two workers and a kill; in every window the starts \
         stayed within burst + w/T of {}: {}",
        runs.len(),
        args.rate,
        if worst <= 0.0 { "the pace held" } else { "the pace was EXCEEDED" }
    );
    if worst > 0.0 {
        return Err("the pace was exceeded".into());
    }
    Ok(())
}
