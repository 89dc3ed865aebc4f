//! Claiming a paced run ahead of its slot (`Jobs::take_ahead`, what a worker's `claim_ahead`
//! does), on the caller's clock: charged at its slot, never before `now` nor after `now + ahead`,
//! never more than the pace allows in any window; delayed jobs and paused lanes not ahead.

use crate::db::{Case, Db, EPOCH, clock};
use crate::worker::within_pace;
use leakgate_jobs::{Jobs, LaneRules, NewJob, Outcome};
use leakgate_test_support::Rng;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

macro_rules! cases {
    ($list:ident: $($name:ident),* $(,)?) => {
        pub const $list: &[(&str, Case)] = &[$((stringify!($name), |db| Box::pin($name(db)))),*];
    };
}

cases!(ALL: a_claim_ahead_is_charged_at_the_slot, claims_ahead_at_random_times_keep_the_pace,
    delays_pauses_and_limits_are_not_claimed_ahead, a_worker_never_starts_a_run_before_its_slot,
    a_run_cancelled_while_it_waits_for_its_slot_never_starts);

const MS: Duration = Duration::from_millis(1);
const AHEAD: Duration = Duration::from_millis(5);

async fn rules(jobs: &Jobs, text: &str) {
    jobs.set_rules(&LaneRules::from_toml(text).unwrap()).await.unwrap();
}

/// Nanoseconds since the epoch of a point `d` after [`EPOCH`].
fn at(d: Duration) -> i64 {
    (EPOCH + d).as_nanos() as i64
}

async fn a_claim_ahead_is_charged_at_the_slot(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "p = \"10/s burst 1\"").await;
    for i in 0..4 {
        jobs.add("p/x", format!("{i}")).await.unwrap();
    }
    assert_eq!(jobs.take_ahead(10, AHEAD).await.unwrap().len(), 1, "burst 1: one now");
    // The next slot is at 100 ms. 6 ms before it: nothing, and the lane says when.
    clock.advance(94 * MS);
    assert!(jobs.take_ahead(10, AHEAD).await.unwrap().is_empty(), "6 ms before: too early");
    assert_eq!(jobs.status().await.unwrap()[0].next_slot_in, Some(6 * MS), "its slot");
    // 3 ms before: taken, charged (and started) at the slot.
    clock.advance(3 * MS);
    let early = jobs.take_ahead(10, AHEAD).await.unwrap();
    assert_eq!(early.len(), 1, "one, not the burst of the next slots too");
    assert_eq!(early[0].started(), UNIX_EPOCH + EPOCH + 100 * MS);
    assert_eq!(early[0].lateness(), Duration::ZERO);
    // After its slot (200 ms): charged at the claim's time.
    clock.advance(110 * MS); // 207 ms
    let late = jobs.take_ahead(10, AHEAD).await.unwrap();
    assert_eq!(late[0].started(), UNIX_EPOCH + EPOCH + 207 * MS);
    assert_eq!(late[0].lateness(), 7 * MS);
    // Ahead 0 is a plain take: 3 ms before the slot (307 ms), nothing.
    clock.advance(97 * MS);
    assert!(jobs.take_ahead(10, Duration::ZERO).await.unwrap().is_empty());
    assert!(jobs.take(10).await.unwrap().is_empty());
    clock.advance(3 * MS);
    assert_eq!(jobs.take_ahead(10, Duration::ZERO).await.unwrap()[0].lateness(), Duration::ZERO);
    let runs = jobs.runs("p/x").await.unwrap();
    let got: Vec<(i64, i64)> = runs.iter().map(|r| (r.started_ns, r.slot_ns)).collect();
    let want = [(0, 0), (100, 100), (207, 200), (307, 307)];
    let want: Vec<(i64, i64)> = want.iter().map(|&(s, t)| (at(s * MS), at(t * MS))).collect();
    assert_eq!(got, want, "recorded starts are the charge times, slots the pace's");
}

async fn claims_ahead_at_random_times_keep_the_pace(db: Db) {
    let clock = clock();
    let jobs = db.at(&clock).await;
    rules(&jobs, "one = \"50/s burst 1\"\nthree = \"20/s burst 3\"").await;
    let batch = (0..300)
        .flat_map(|i| [NewJob::new("one", format!("{i}")), NewJob::new("three", format!("{i}"))])
        .collect();
    jobs.add_all(batch).await.unwrap();
    let mut rng = Rng::new(0x9E37_79B9_7F4A_7C15);
    let mut now = EPOCH;
    for _ in 0..250 {
        // Forward up to 40 ms, sometimes back up to 2 ms (the charge rule must hold either way).
        now = match rng.below(10) {
            0 => now.saturating_sub(Duration::from_micros(rng.below(2000))),
            _ => now + Duration::from_micros(rng.below(40_000)),
        };
        clock.set(now);
        let ahead = [Duration::ZERO, AHEAD, 30 * MS][rng.below(3) as usize];
        let max = 1 + rng.below(4) as usize;
        let now_ns = now.as_nanos() as i64;
        for job in jobs.take_ahead(max, ahead).await.unwrap() {
            let start = job.started().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64;
            assert!(start >= now_ns, "charged at {start}, before the claim's time {now_ns}");
            assert!(start <= now_ns + ahead.as_nanos() as i64, "charged more than {ahead:?} ahead");
        }
    }
    for (lane, burst, t_ns) in [("one", 1, 20_000_000), ("three", 3, 50_000_000)] {
        let runs = jobs.runs(lane).await.unwrap();
        assert!(runs.len() > 50, "{lane}: only {} runs: the test tests little", runs.len());
        let starts: Vec<i64> = runs.iter().map(|r| r.started_ns).collect();
        within_pace(&starts, burst, t_ns).unwrap_or_else(|e| panic!("{lane}: {e}"));
    }
}

async fn delays_pauses_and_limits_are_not_claimed_ahead(db: Db) {
    let clock = clock();
    let jobs = db.builder().caller_clock(clock.clone()).max_attempts(1).open().await.unwrap();
    rules(&jobs, "bank = \"10/s burst 5\"\nlimited = { quota = \"10/s\", max_in_flight = 1 }")
        .await;
    // A delayed job is due at its time, not `ahead` before it.
    jobs.add_job(NewJob::new("mail", "later").after(3 * MS)).await.unwrap();
    assert!(jobs.take_ahead(5, AHEAD).await.unwrap().is_empty(), "due in 3 ms: not yet");
    clock.advance(3 * MS);
    assert_eq!(jobs.take_ahead(5, AHEAD).await.unwrap().len(), 1);
    // A lane paused by a slow-down resumes at the pause's end, not `ahead` before it.
    jobs.add("bank", "1").await.unwrap();
    let job = jobs.take_ahead(1, AHEAD).await.unwrap().remove(0);
    jobs.slow_down(&job, Duration::from_secs(1)).await.unwrap();
    clock.advance(997 * MS);
    assert!(jobs.take_ahead(5, AHEAD).await.unwrap().is_empty(), "paused for 3 ms more");
    clock.advance(3 * MS);
    assert_eq!(jobs.take_ahead(5, AHEAD).await.unwrap().len(), 1);
    // A run claimed ahead holds its lane's `max_in_flight` from the claim.
    for i in 0..3 {
        jobs.add("limited", format!("{i}")).await.unwrap();
    }
    let first = jobs.take_ahead(5, AHEAD).await.unwrap().remove(0);
    jobs.done(&first).await.unwrap();
    clock.advance(97 * MS);
    let ahead = jobs.take_ahead(5, AHEAD).await.unwrap();
    assert_eq!(ahead.len(), 1, "claimed 3 ms before its slot");
    clock.advance(200 * MS);
    assert!(jobs.take_ahead(5, AHEAD).await.unwrap().is_empty(), "its run still holds the lane");
    jobs.done(&ahead[0]).await.unwrap();
    assert_eq!(jobs.take_ahead(5, AHEAD).await.unwrap().len(), 1);
}

fn ns_of(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// On the database's own clock (PostgreSQL's `clock_timestamp()` and SQLite's `SystemTime` are
/// this machine's real-time clock): an ordering bound, not a timing. Claimed 30 ms ahead of
/// 50 ms slots, a worker that did not wait would start each run some 30 ms early.
async fn a_worker_never_starts_a_run_before_its_slot(db: Db) {
    let jobs = db.real().await;
    rules(&jobs, "p = \"20/s burst 1\"").await;
    for i in 0..8 {
        jobs.add("p", format!("{i}")).await.unwrap();
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let summary = jobs
        .worker()
        .concurrency(4)
        .claim_ahead(30 * MS)
        .until_empty(true)
        .run(move |job| {
            let real = ns_of(SystemTime::now());
            log.lock().unwrap().push((job.id(), real, ns_of(job.started())));
            async { Outcome::Done }
        })
        .await
        .unwrap();
    assert_eq!(summary.done, 8);
    let runs = jobs.runs("p").await.unwrap();
    let starts: Vec<i64> = runs.iter().map(|r| r.started_ns).collect();
    within_pace(&starts, 1, 50_000_000).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 8);
    for &(id, real, told) in seen.iter() {
        let recorded = runs.iter().find(|r| r.job == id).unwrap().started_ns;
        assert!(real >= recorded, "job {id} started {} ns before its slot", recorded - real);
        assert!(told >= recorded, "job {id}: its start {told} is before its charge {recorded}");
    }
}

/// A run claimed ahead waits for its slot inside its own task; its job cancelled meanwhile (seen
/// at the next lease renewal), the handler never runs.
async fn a_run_cancelled_while_it_waits_for_its_slot_never_starts(db: Db) {
    let jobs = db.builder().lease(Duration::from_millis(300)).open().await.unwrap();
    rules(&jobs, "slow = \"1/10s burst 1\"").await;
    let first = jobs.add("slow", "first").await.unwrap();
    let taken = jobs.take(1).await.unwrap().remove(0);
    assert_eq!(taken.id(), first);
    jobs.done(&taken).await.unwrap();
    let second = jobs.add("slow", "second").await.unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let log = ran.clone();
    let worker = jobs.worker().claim_ahead(Duration::from_secs(20)).until_empty(true);
    let progress = worker.progress();
    let run = tokio::spawn(worker.run(move |job| {
        log.lock().unwrap().push(job.id());
        async { Outcome::Done }
    }));
    // Claimed (its slot some 10 s away), then cancelled.
    while progress.snapshot().started == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(jobs.cancel(&[second]).await.unwrap(), 1);
    let summary = run.await.unwrap().unwrap();
    assert_eq!(summary.cancelled, 1, "{summary:?}");
    assert!(ran.lock().unwrap().is_empty(), "the handler ran: {:?}", ran.lock().unwrap());
    assert_eq!(jobs.status().await.unwrap()[0].cancelled, 1);
}
