//! The PostgreSQL schema: the same tables as SQLite's, as numbered migrations applied in order
//! under an advisory lock (so servers starting together do not both migrate).

use crate::error::Error;
use tokio_postgres::Client;

/// Migration `i` brings the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: jobs, lanes, pace buckets, runs, rules, the round-robin sequence.
    "
    CREATE TABLE jobs (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        lane        TEXT     NOT NULL,
        payload     BYTEA    NOT NULL,
        key         TEXT     UNIQUE,
        state       SMALLINT NOT NULL,
        attempt     BIGINT   NOT NULL DEFAULT 0,
        failures    BIGINT   NOT NULL DEFAULT 0,
        run_at      BIGINT   NOT NULL,
        lease_until BIGINT,
        added_at    BIGINT   NOT NULL,
        started_at  BIGINT,
        finished_at BIGINT,
        last_error  TEXT
    );
    CREATE INDEX jobs_ready     ON jobs (lane, id)    WHERE state = 0;
    CREATE INDEX jobs_scheduled ON jobs (run_at)      WHERE state = 1;
    CREATE INDEX jobs_running   ON jobs (lease_until) WHERE state = 2;
    CREATE INDEX jobs_done      ON jobs (finished_at) WHERE state = 3;
    CREATE INDEX jobs_dead      ON jobs (lane, id)    WHERE state = 4;
    CREATE TABLE lanes (
        lane          TEXT   PRIMARY KEY,
        ready         BIGINT NOT NULL DEFAULT 0,
        scheduled     BIGINT NOT NULL DEFAULT 0,
        running       BIGINT NOT NULL DEFAULT 0,
        dead          BIGINT NOT NULL DEFAULT 0,
        done          BIGINT NOT NULL DEFAULT 0,
        served        BIGINT NOT NULL DEFAULT 0,
        next_slot     BIGINT NOT NULL DEFAULT 0,
        paused_until  BIGINT NOT NULL DEFAULT 0,
        max_in_flight BIGINT
    );
    CREATE INDEX lanes_turn ON lanes (served, lane) WHERE ready > 0;
    CREATE TABLE pace (
        lane      TEXT   NOT NULL,
        idx       BIGINT NOT NULL,
        count     BIGINT NOT NULL,
        period_ns BIGINT NOT NULL,
        burst     BIGINT NOT NULL,
        tat_ns    BIGINT NOT NULL,
        tat_frac  BIGINT NOT NULL,
        PRIMARY KEY (lane, idx)
    );
    CREATE TABLE runs (
        job        BIGINT NOT NULL,
        attempt    BIGINT NOT NULL,
        lane       TEXT   NOT NULL,
        slot       BIGINT NOT NULL,
        started_at BIGINT NOT NULL,
        PRIMARY KEY (job, attempt)
    );
    CREATE INDEX runs_lane ON runs (lane, started_at);
    CREATE TABLE rules (
        id      INT    PRIMARY KEY CHECK (id = 1),
        version BIGINT NOT NULL,
        text    TEXT   NOT NULL
    );
    CREATE SEQUENCE leakgate_jobs_served;
    ",
    // 2: priorities (ready jobs by lane, highest priority first, then by id), cancelled jobs
    // (state 5) and their count, paused lanes, a lane's claims into its weighted turn, and
    // schedules (a job per tick: (schedule, tick) unique among jobs).
    "
    ALTER TABLE jobs ADD COLUMN priority INT NOT NULL DEFAULT 0;
    DROP INDEX jobs_ready;
    CREATE INDEX jobs_ready ON jobs (lane, priority DESC, id) WHERE state = 0;
    CREATE INDEX jobs_cancelled ON jobs (finished_at) WHERE state = 5;
    ALTER TABLE lanes ADD COLUMN cancelled BIGINT  NOT NULL DEFAULT 0;
    ALTER TABLE lanes ADD COLUMN paused    BOOLEAN NOT NULL DEFAULT FALSE;
    ALTER TABLE lanes ADD COLUMN credit    BIGINT  NOT NULL DEFAULT 0;
    CREATE TABLE schedules (
        name        TEXT    PRIMARY KEY,
        lane        TEXT    NOT NULL,
        payload     BYTEA    NOT NULL,
        cron        TEXT,
        zone        TEXT,
        interval_ns BIGINT,
        missed      BIGINT NOT NULL,
        next_tick   BIGINT NOT NULL
    );
    CREATE INDEX schedules_due ON schedules (next_tick);
    ALTER TABLE jobs ADD COLUMN schedule TEXT;
    ALTER TABLE jobs ADD COLUMN tick     BIGINT;
    CREATE UNIQUE INDEX jobs_tick ON jobs (schedule, tick) WHERE schedule IS NOT NULL;
    ",
    // 3: adaptive lanes: a bucket's adapted count a period of its rule's quota (0: at the
    // quota) and its last back-off.
    "
    ALTER TABLE pace ADD COLUMN adapted    BIGINT NOT NULL DEFAULT 0;
    ALTER TABLE pace ADD COLUMN backoff_ns BIGINT;
    ",
];

/// The schema version this crate writes.
pub(crate) const VERSION: i64 = MIGRATIONS.len() as i64;

/// An arbitrary key for the advisory lock that serialises migrations.
const MIGRATION_LOCK: i64 = 0x6c65_616b_6a6f_6273; // "leakjobs"

/// Creates or migrates the schema in one transaction.
pub(crate) async fn migrate(client: &mut Client) -> Result<(), Error> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS leakgate_jobs_schema (version BIGINT NOT NULL)")
        .await?;
    let found: i64 = tx
        .query_opt("SELECT version FROM leakgate_jobs_schema", &[])
        .await?
        .map_or(0, |row| row.get(0));
    if found > VERSION {
        return Err(Error::SchemaTooNew { found, supported: VERSION });
    }
    if found == 0 {
        let others: i64 = tx
            .query_one(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() \
                 AND table_name IN ('jobs', 'lanes', 'pace', 'runs', 'rules')",
                &[],
            )
            .await?
            .get(0);
        if others > 0 {
            return Err(Error::Database(
                "the database has tables named like leakgate's (jobs, lanes, ...) that it did not \
                 make: give leakgate jobs a database or schema of its own"
                    .into(),
            ));
        }
    }
    for migration in &MIGRATIONS[found as usize..] {
        tx.batch_execute(migration).await?;
    }
    if found == 0 {
        tx.execute("INSERT INTO leakgate_jobs_schema VALUES ($1)", &[&VERSION]).await?;
    } else if found < VERSION {
        tx.execute("UPDATE leakgate_jobs_schema SET version = $1", &[&VERSION]).await?;
    }
    tx.commit().await?;
    Ok(())
}
