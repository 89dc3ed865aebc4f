//! The behaviour of a queue, each case run against SQLite (a real file) and PostgreSQL (a real
//! server this binary starts, and stops when the cases are done, also when one fails).
//!
//! A custom harness (libtest-mimic) so that one server serves every case and its guard is dropped
//! before the process exits; cases that need time to pass use a caller clock (`ManualClock`), so
//! nothing here depends on how fast the machine is, except the worker cases, which only bound.

#![allow(unreachable_pub)]

mod adaptive;
mod ahead;
mod cases;
mod control;
mod db;
mod model;
mod runs;
mod schedules;
mod worker;

use leakgate_test_support::postgres;
use libtest_mimic::{Arguments, Trial};

fn main() {
    let args = Arguments::from_args();
    // No server for a listing, for `--ignored` (no case is ignored), or for a SQLite-only filter.
    let wants_pg =
        args.filter.as_deref().is_none_or(|f| f.contains("postgres") || !f.contains("sqlite"));
    let pg = (wants_pg && !args.list && !args.ignored)
        .then(|| std::sync::Arc::new(postgres::Postgres::start()));
    let mut trials = Vec::new();
    for (name, case) in cases::ALL
        .iter()
        .chain(control::ALL)
        .chain(schedules::ALL)
        .chain(worker::ALL)
        .chain(runs::ALL)
        .chain(model::ALL)
        .chain(adaptive::ALL)
        .chain(ahead::ALL)
    {
        let (name, case) = (*name, *case);
        trials.push(Trial::test(format!("sqlite::{name}"), move || {
            db::run(case, db::Backend::Sqlite)
        }));
        let pg = pg.clone();
        trials.push(Trial::test(format!("postgres::{name}"), move || {
            let pg = pg.ok_or("no PostgreSQL server was started for this filter")?;
            let server = pg.clone();
            let fresh: db::Fresh = std::sync::Arc::new(move || server.database());
            db::run(case, db::Backend::Postgres(pg.database(), fresh))
        }));
    }
    for (name, case) in cases::SQLITE_ONLY {
        trials.push(Trial::test(format!("sqlite::{name}"), move || {
            db::run(*case, db::Backend::Sqlite)
        }));
    }
    for (name, case) in cases::POSTGRES_ONLY {
        let pg = pg.clone();
        trials.push(Trial::test(format!("postgres::{name}"), move || {
            let pg = pg.ok_or("no PostgreSQL server was started for this filter")?;
            let url = format!("postgres://postgres:wrong@127.0.0.1:{}/postgres", pg.port());
            db::run(*case, db::Backend::Postgres(url, std::sync::Arc::new(String::new)))
        }));
    }
    for (name, case) in runs::POSTGRES_ONLY {
        let pg = pg.clone();
        trials.push(Trial::test(format!("postgres::{name}"), move || {
            let pg = pg.ok_or("no PostgreSQL server was started for this filter")?;
            db::run(*case, db::Backend::Postgres(pg.database(), std::sync::Arc::new(String::new)))
        }));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    drop(pg); // stops the server before the process exits
    conclusion.exit();
}
