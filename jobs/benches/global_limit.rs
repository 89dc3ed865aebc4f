//! The global-limit run, as a user runs it: 4 `leakgate jobs work` processes at
//! concurrency 10 on one lane of 50/s burst 1, each job a 50 ms command, on SQLite and on
//! PostgreSQL. From the runs' own recorded starts (the database's clock): the achieved rate
//! against the quota, and the most starts in any window against `burst + w/T`.
//!
//! `LEAKGATE_BIN=target/release/leakgate cargo bench -p leakgate-jobs --bench global_limit`
//! (`-- N` for N jobs a store, 500 by default; `BURST=B` for a burst of B, 1 by default). The
//! achieved rate is `(N - B) / (last start - first start)`: after the first B starts (a burst
//! may start at once), the rate kept. With burst 1 every start's lateness is lost capacity
//! (GCRA's next slot is a period after a late start); a burst lets the pace make it up.

use leakgate_jobs::Jobs;
use leakgate_test_support::postgres;
use std::process::{Command, Stdio};

const T_NS: i64 = 20_000_000; // 50/s

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
        let workers: Vec<_> = (0..4)
            .map(|_| {
                Command::new(&bin)
                    .args(["jobs", "work", "--db", &db, "--rules", rules.to_str().unwrap()])
                    .args(["--concurrency", "10", "--until-empty", "--quiet"])
                    .args(["--", "sh", "-c", "cat >/dev/null; sleep 0.05"])
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
        let span = (starts[n - 1] - starts[0]) as f64 / 1e9;
        let rate = (n - burst) as f64 / span;
        // Windows with more starts than burst + w/T.
        let mut over = 0;
        for i in 0..n {
            for j in i..n {
                if (j - i + 1) as i64 > burst as i64 + (starts[j] - starts[i]) / T_NS {
                    over += 1;
                }
            }
        }
        let late: Vec<f64> = {
            let mut l: Vec<f64> = runs.iter().map(|r| r.lateness().as_secs_f64() * 1e3).collect();
            l.sort_by(f64::total_cmp);
            l
        };
        println!(
            "  {name:<10} achieved {rate:.2}/s = {:.2} % of 50/s; windows above burst + w/T: {over}; \
             lateness p50 {:.2} ms, p99 {:.2} ms",
            rate / 50.0 * 100.0,
            late[n / 2],
            late[n * 99 / 100]
        );
    }
}
