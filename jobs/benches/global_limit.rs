//! The global-limit run, as a user runs it: 4 `leakgate jobs work` processes at
//! concurrency 10 on one lane of 50/s burst 1, each job a 50 ms command, on SQLite and on
//! PostgreSQL. From the runs' own recorded starts (the database's clock, what the contract
//! bounds): the achieved rate against the quota, and the windows with more starts than
//! `burst + w/T` (must be 0). From the commands' real starts (each job's command appends
//! bash's `$EPOCHREALTIME` to a file when it starts: this machine's real-time clock, as the
//! database's is): the achieved rate, the same window count and the most starts in any 1 s,
//! for information (a real start is its recorded one plus the worker's wake-up and the
//! process's start, so two of them may come closer than a period).
//!
//! `LEAKGATE_BIN=target/release/leakgate cargo bench -p leakgate-jobs --bench global_limit`
//! (`-- N` for N jobs a store, 500 by default; `BURST=B` for a burst of B, 1 by default;
//! `CLAIM_AHEAD=D` passes `--claim-ahead D` to the workers, their default when unset). The
//! achieved rate is `(N - B) / (last start - first start)`: after the first B starts (a burst
//! may start at once), the rate kept. With burst 1 every start's lateness is lost capacity
//! (GCRA's next slot is a period after a late start); a burst lets the pace make it up.

use leakgate_jobs::Jobs;
use leakgate_test_support::postgres;
use std::process::{Command, Stdio};

const T_NS: i64 = 20_000_000; // 50/s

/// The job: note its real start (µs since the epoch, no process forked for it), take its
/// payload, take 50 ms.
const STARTS: &str = "echo ${EPOCHREALTIME/./} >> \"$STARTS_FILE\"; cat >/dev/null; sleep 0.05";

/// The achieved rate after the first `burst` starts, the windows holding more than
/// `burst + w/T` starts, and the most starts any window holds above that bound (`starts`
/// sorted, ns).
fn rate_and_over(starts: &[i64], burst: usize) -> (f64, usize, i64) {
    let n = starts.len();
    let span = (starts[n - 1] - starts[0]) as f64 / 1e9;
    let (mut over, mut most_above) = (0, 0);
    for i in 0..n {
        for j in i..n {
            let above = (j - i + 1) as i64 - (burst as i64 + (starts[j] - starts[i]) / T_NS);
            if above > 0 {
                over += 1;
                most_above = most_above.max(above);
            }
        }
    }
    ((n - burst) as f64 / span, over, most_above)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return; // `cargo test --benches`: nothing to test here
    }
    let Ok(bin) = std::env::var("LEAKGATE_BIN") else {
        eprintln!("set LEAKGATE_BIN to a built `leakgate` binary");
        std::process::exit(2);
    };
    let n: usize = args.iter().skip(1).find_map(|a| a.parse().ok()).unwrap_or(500);
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    let burst: usize = std::env::var("BURST").ok().and_then(|b| b.parse().ok()).unwrap_or(1);
    std::fs::write(&rules, format!("\"api\" = \"50/s burst {burst}\"\n")).unwrap();
    let pg = postgres::Postgres::start_durable();
    let sqlite = dir.path().join("jobs.db").to_str().unwrap().to_string();
    println!(
        "global limit: 4 processes x concurrency 10, one lane at 50/s burst {burst}, 50 ms jobs, {n} jobs"
    );
    for (name, db) in [("SQLite", sqlite), ("PostgreSQL", pg.database())] {
        let mut add = Command::new(&bin)
            .args(["jobs", "add", "--db", &db, "api/x", "--lines"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let lines: String = (0..n).map(|i| format!("{i}\n")).collect();
        std::io::Write::write_all(&mut add.stdin.take().unwrap(), lines.as_bytes()).unwrap();
        assert!(add.wait().unwrap().success());
        let real_file = dir.path().join(format!("{name}.starts"));
        let ahead: Vec<String> = match std::env::var("CLAIM_AHEAD") {
            Ok(d) => vec!["--claim-ahead".into(), d],
            Err(_) => vec![],
        };
        let workers: Vec<_> = (0..4)
            .map(|_| {
                Command::new(&bin)
                    .args(["jobs", "work", "--db", &db, "--rules", rules.to_str().unwrap()])
                    .args(["--concurrency", "10", "--until-empty", "--quiet"])
                    .args(&ahead)
                    .args(["--", "bash", "-c", STARTS])
                    .env("STARTS_FILE", &real_file)
                    .stdin(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut w in workers {
            assert!(w.wait().unwrap().success());
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let runs =
            rt.block_on(async { Jobs::open(&db).await.unwrap().runs("api/x").await.unwrap() });
        assert_eq!(runs.len(), n, "every job ran once");
        let mut starts: Vec<i64> = runs.iter().map(|r| r.started_ns).collect();
        starts.sort_unstable();
        let (rate, over, _) = rate_and_over(&starts, burst);
        let mut real: Vec<i64> = std::fs::read_to_string(&real_file)
            .unwrap()
            .lines()
            .map(|l| l.trim().parse::<i64>().unwrap() * 1000)
            .collect();
        real.sort_unstable();
        assert_eq!(real.len(), n, "one real start a run");
        let (real_rate, real_over, real_above) = rate_and_over(&real, burst);
        // How much later than its recorded start each command really started: the k-th real
        // start against the k-th recorded one (both sorted).
        let mut jitter: Vec<f64> =
            real.iter().zip(&starts).map(|(r, s)| (r - s) as f64 / 1e6).collect();
        jitter.sort_by(f64::total_cmp);
        // The most real starts in any 1 s window (the pace allows 50 + burst).
        let most =
            (0..n).map(|i| real[i..].partition_point(|&b| b - real[i] < 1_000_000_000)).max();
        let late: Vec<f64> = {
            let mut l: Vec<f64> = runs.iter().map(|r| r.lateness().as_secs_f64() * 1e3).collect();
            l.sort_by(f64::total_cmp);
            l
        };
        println!(
            "  {name:<10} recorded: achieved {rate:.2}/s = {:.2} % of 50/s, windows above burst + w/T: {over}, \
             lateness p50 {:.2} ms, p99 {:.2} ms; real: achieved {real_rate:.2}/s = {:.2} %, windows above: {real_over} \
             (by at most {real_above} start), most in 1 s: {}, real - recorded p50 {:.2} ms, \
             p99 {:.2} ms, max {:.2} ms",
            rate / 50.0 * 100.0,
            late[n / 2],
            late[n * 99 / 100],
            real_rate / 50.0 * 100.0,
            most.unwrap_or(0),
            jitter[n / 2],
            jitter[n * 99 / 100],
            jitter[n - 1],
        );
    }
}
