//! The SQLite schema, as numbered migrations applied in order (never edited once released: a
//! change is a new migration). Times are nanoseconds since the Unix epoch; states are those of
//! [`crate::store::state`].

use crate::error::Error;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

/// Migration `i` brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: jobs, lanes (counters, round-robin stamp, cached next slot), pace buckets, runs, rules.
    "
    CREATE TABLE jobs (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        lane        TEXT    NOT NULL,
        payload     BLOB    NOT NULL,
        key         TEXT    UNIQUE,
        state       INTEGER NOT NULL,
        attempt     INTEGER NOT NULL DEFAULT 0,
        failures    INTEGER NOT NULL DEFAULT 0,
        run_at      INTEGER NOT NULL,
        lease_until INTEGER,
        added_at    INTEGER NOT NULL,
        started_at  INTEGER,
        finished_at INTEGER,
        last_error  TEXT
    );
    CREATE INDEX jobs_ready     ON jobs (lane, id)      WHERE state = 0;
    CREATE INDEX jobs_scheduled ON jobs (run_at)        WHERE state = 1;
    CREATE INDEX jobs_running   ON jobs (lease_until)   WHERE state = 2;
    CREATE INDEX jobs_done      ON jobs (finished_at)   WHERE state = 3;
    CREATE INDEX jobs_dead      ON jobs (lane, id)      WHERE state = 4;
    CREATE TABLE lanes (
        lane          TEXT    PRIMARY KEY,
        ready         INTEGER NOT NULL DEFAULT 0,
        scheduled     INTEGER NOT NULL DEFAULT 0,
        running       INTEGER NOT NULL DEFAULT 0,
        dead          INTEGER NOT NULL DEFAULT 0,
        done          INTEGER NOT NULL DEFAULT 0,
        served        INTEGER NOT NULL DEFAULT 0,
        next_slot     INTEGER NOT NULL DEFAULT 0,
        paused_until  INTEGER NOT NULL DEFAULT 0,
        max_in_flight INTEGER
    ) WITHOUT ROWID;
    CREATE INDEX lanes_turn ON lanes (served) WHERE ready > 0;
    CREATE TABLE pace (
        lane      TEXT    NOT NULL,
        idx       INTEGER NOT NULL,
        count     INTEGER NOT NULL,
        period_ns INTEGER NOT NULL,
        burst     INTEGER NOT NULL,
        tat_ns    INTEGER NOT NULL,
        tat_frac  INTEGER NOT NULL,
        PRIMARY KEY (lane, idx)
    ) WITHOUT ROWID;
    CREATE TABLE runs (
        job        INTEGER NOT NULL,
        attempt    INTEGER NOT NULL,
        lane       TEXT    NOT NULL,
        slot       INTEGER NOT NULL,
        started_at INTEGER NOT NULL,
        PRIMARY KEY (job, attempt)
    ) WITHOUT ROWID;
    CREATE INDEX runs_lane ON runs (lane, started_at);
    CREATE TABLE rules (
        id      INTEGER PRIMARY KEY CHECK (id = 1),
        version INTEGER NOT NULL,
        text    TEXT    NOT NULL
    );
    CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO counters VALUES ('served', 0);
    ",
    // 2: priorities (ready jobs by lane, highest priority first, then by id), cancelled jobs
    // (state 5) and their count, paused lanes, a lane's claims into its weighted turn, and
    // schedules (a job per tick: (schedule, tick) unique among jobs).
    "
    ALTER TABLE jobs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
    DROP INDEX jobs_ready;
    CREATE INDEX jobs_ready ON jobs (lane, priority DESC, id) WHERE state = 0;
    CREATE INDEX jobs_cancelled ON jobs (finished_at) WHERE state = 5;
    ALTER TABLE lanes ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE lanes ADD COLUMN paused    INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE lanes ADD COLUMN credit    INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE schedules (
        name        TEXT    PRIMARY KEY,
        lane        TEXT    NOT NULL,
        payload     BLOB    NOT NULL,
        cron        TEXT,
        zone        TEXT,
        interval_ns INTEGER,
        missed      INTEGER NOT NULL,
        next_tick   INTEGER NOT NULL
    );
    CREATE INDEX schedules_due ON schedules (next_tick);
    ALTER TABLE jobs ADD COLUMN schedule TEXT;
    ALTER TABLE jobs ADD COLUMN tick     INTEGER;
    CREATE UNIQUE INDEX jobs_tick ON jobs (schedule, tick) WHERE schedule IS NOT NULL;
    ",
    // 3: adaptive lanes: a bucket's adapted count a period of its rule's quota (0: at the
    // quota) and its last back-off.
    "
    ALTER TABLE pace ADD COLUMN adapted    INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE pace ADD COLUMN backoff_ns INTEGER;
    ",
];

/// The schema version this crate writes.
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// Creates or migrates the schema, in one `BEGIN IMMEDIATE` transaction (so two processes
/// opening a new file at once do not both create it).
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), Error> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS leakgate_jobs_schema (version INTEGER NOT NULL)")?;
    let found: Option<i64> =
        tx.query_row("SELECT version FROM leakgate_jobs_schema", [], |r| r.get(0)).optional()?;
    let found = found.unwrap_or(0);
    if found > VERSION {
        return Err(Error::SchemaTooNew { found, supported: VERSION });
    }
    if found == 0 && !is_ours_or_empty(&tx)? {
        return Err(Error::Database(
            "the SQLite file holds other tables: give leakgate jobs a database of its own".into(),
        ));
    }
    for migration in &MIGRATIONS[found as usize..] {
        tx.execute_batch(migration)?;
    }
    if found == 0 {
        tx.execute("INSERT INTO leakgate_jobs_schema VALUES (?1)", [VERSION])?;
    } else if found < VERSION {
        tx.execute("UPDATE leakgate_jobs_schema SET version = ?1", [VERSION])?;
    }
    tx.commit()?;
    Ok(())
}

/// Whether a database without our version row has no tables but the version table.
fn is_ours_or_empty(conn: &Connection) -> Result<bool, Error> {
    let others: i64 = conn.query_row(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name <> 'leakgate_jobs_schema' \
         AND name NOT LIKE 'sqlite_%'",
        [],
        |r| r.get(0),
    )?;
    Ok(others == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file made by the first release (schema 1) with a job in it opens, is migrated, and its
    /// job is still there, ready, of priority 0, in a lane neither paused nor cancelled.
    #[test]
    fn a_version_1_file_is_migrated_and_keeps_its_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch(
            "CREATE TABLE leakgate_jobs_schema (version INTEGER NOT NULL);
             INSERT INTO leakgate_jobs_schema VALUES (1);
             INSERT INTO jobs (lane, payload, state, run_at, added_at) VALUES ('mail', x'68', 0, 1, 1);
             INSERT INTO lanes (lane, ready) VALUES ('mail', 1);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let version: i64 =
            conn.query_row("SELECT version FROM leakgate_jobs_schema", [], |r| r.get(0)).unwrap();
        assert_eq!(version, VERSION);
        let job: (i64, i64) = conn
            .query_row("SELECT state, priority FROM jobs", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!(job, (0, 0));
        let lane: (i64, i64, i64, i64) = conn
            .query_row("SELECT ready, paused, cancelled, credit FROM lanes", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .unwrap();
        assert_eq!(lane, (1, 0, 0, 0));
        migrate(&mut conn).unwrap(); // again: nothing to do
    }
}
