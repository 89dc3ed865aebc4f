//! Keeping the rules current: the rules file read again on SIGHUP and when its bytes change
//! (polled, as `leakgate::RulesWatcher` does: it sees every change on any file system, and
//! editors that replace the file by renaming), and, with `--redis`, rules pushed through Redis.
//! A changed file is applied only once two polls in a row read it alike, and never when it is
//! empty (see `crate::rules::settle`: a poll that lands mid-write never puts half a file in force). A
//! file that does not parse is refused with its reason in the log, and the rules in force stay;
//! every reload keeps each tracked key's level, and logs what it put in force (how many rules,
//! from where, the file's length and hash).

use crate::limits::Limits;
use crate::rules::file::{RulesError, RulesFormat};
use crate::rules::settle::{Fingerprint, Verdict};
use crate::rules::LoadedRules;
use leakgate::Clock;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// Why an empty rules file is not applied.
const EMPTY: &str = "the file is empty (0 bytes), as it is while being written: not applied, \
                     the rules in force stay (a file with only a comment lifts every limit)";

/// Loads the rules file and puts it in force (what SIGHUP does). Returns how many rules it has.
pub(crate) fn reload_file<C: Clock + 'static>(
    limits: &Limits<C>,
    path: &Path,
) -> Result<usize, RulesError> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let bytes = std::fs::read(path).map_err(|e| RulesError {
        path: Some(path.to_path_buf()),
        message: format!("cannot read the file: {e}"),
    });
    let bytes = match bytes {
        Ok(bytes) => bytes,
        Err(e) => return refused(limits, e),
    };
    let fingerprint = Fingerprint::of(&bytes, modified);
    let result = apply_bytes(limits, &bytes, path, fingerprint);
    if result.is_ok() {
        limits.rules_file.lock().unwrap_or_else(PoisonError::into_inner).applied(fingerprint);
    }
    result
}

/// Parses a rules file's bytes and puts them in force, refusing an empty file.
fn apply_bytes<C: Clock + 'static>(
    limits: &Limits<C>,
    bytes: &[u8],
    path: &Path,
    fingerprint: Fingerprint,
) -> Result<usize, RulesError> {
    if bytes.is_empty() {
        let e = RulesError { path: Some(path.to_path_buf()), message: EMPTY.into() };
        return refused(limits, e);
    }
    let loaded = LoadedRules::from_bytes(bytes, RulesFormat::of(path))
        .map_err(|e| RulesError { path: Some(path.to_path_buf()), ..e });
    let source = format!("file {}", path.display());
    let applied = apply(limits, loaded, path, source);
    if let Ok(count) = applied {
        let hash = format!("{:016x}", fingerprint.hash);
        tracing::info!(rules = count, bytes = fingerprint.len, %hash, file = %path.display(), "rules file applied");
    }
    applied
}

/// Counts and logs a refused reload.
fn refused<C: Clock + 'static>(limits: &Limits<C>, e: RulesError) -> Result<usize, RulesError> {
    // Relaxed: statistics.
    limits.metrics.reloads.rejected.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(error = %e, "rules refused: the rules in force stay");
    Err(e)
}

/// Puts `loaded` in force (or logs and counts why not).
fn apply<C: Clock + 'static>(
    limits: &Limits<C>,
    loaded: Result<LoadedRules, RulesError>,
    path: &Path,
    source: String,
) -> Result<usize, RulesError> {
    let reloads = &limits.metrics.reloads;
    let result = loaded.and_then(|loaded| {
        limits
            .put_rules(loaded, source.clone())
            .map_err(|message| RulesError { path: Some(path.to_path_buf()), message })
    });
    match &result {
        Ok(0) => {
            reloads.applied.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%source, "rules in force: none, so nothing is limited");
        }
        Ok(count) => {
            // Relaxed: statistics.
            reloads.applied.fetch_add(1, Ordering::Relaxed);
            tracing::info!(rules = count, %source, "rules in force");
        }
        Err(e) => {
            reloads.rejected.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "rules refused: the rules in force stay");
        }
    }
    result
}

/// Follows the rules pushed through the Redis at `url` (`leakgate rules push`): each new
/// version is put in force, replacing the file's rules (until the file changes or SIGHUP).
pub(crate) fn follow_redis<C: Clock + 'static>(
    limits: Arc<Limits<C>>,
    url: &str,
    every: Duration,
) -> Result<leakgate_redis::RulesFollower, leakgate_redis::Error> {
    let on_event = put_in_force(limits, PathBuf::from(url));
    leakgate_redis::RulesFollower::start(url, "leakgate:", every, on_event)
}

/// [`follow_redis`] on a Redis Cluster reached through `seeds`.
pub(crate) fn follow_redis_cluster<C: Clock + 'static>(
    limits: Arc<Limits<C>>,
    seeds: &[String],
    every: Duration,
) -> Result<leakgate_redis::RulesFollower, leakgate_redis::Error> {
    let on_event = put_in_force(limits, PathBuf::from(seeds.join(",")));
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    leakgate_redis::RulesFollower::start_cluster(&seeds, "leakgate:", every, on_event)
}

/// What a follower does with each event: a pushed version is put in force.
fn put_in_force<C: Clock + 'static>(
    limits: Arc<Limits<C>>,
    source_path: PathBuf,
) -> impl FnMut(leakgate_redis::FollowEvent) -> Result<(), String> + Send + 'static {
    use leakgate_redis::FollowEvent;
    move |event| match event {
        FollowEvent::Pushed(pushed) => {
            let loaded = Ok(LoadedRules { rules: pushed.rules, ..LoadedRules::default() });
            let source = format!("redis version {}", pushed.version);
            apply(&limits, loaded, &source_path, source).map(|_| ()).map_err(|e| e.to_string())
        }
        FollowEvent::Refused { version, reason } => {
            tracing::warn!(version, %reason, "pushed rules refused: the rules in force stay");
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Reads `path` every `every` and reloads it once a change is stable (see `crate::rules::settle`),
/// until `shutdown`.
pub(crate) async fn watch_file<C: Clock + 'static>(
    limits: Arc<Limits<C>>,
    path: PathBuf,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    // A full `every` between the end of one poll and the start of the next, however late the
    // runtime ran the poll: two polls never read the file less than `every` apart.
    let every = every.max(Duration::from_millis(10));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        // The time first: a write after it changes the bytes or the time the next poll reads.
        let modified: Option<SystemTime> =
            tokio::fs::metadata(&path).await.and_then(|m| m.modified()).ok();
        // An unreadable file (being replaced, say) is tried again next time.
        let Ok(bytes) = tokio::fs::read(&path).await else { continue };
        let fingerprint = Fingerprint::of(&bytes, modified);
        let verdict =
            limits.rules_file.lock().unwrap_or_else(PoisonError::into_inner).poll(fingerprint);
        match verdict {
            Verdict::Same => {}
            Verdict::Wait => {
                tracing::debug!(file = %path.display(), "the rules file changed: applied once stable")
            }
            Verdict::Apply | Verdict::Empty => {
                let _ =
                    crate::limits::blocking(|| apply_bytes(&limits, &bytes, &path, fingerprint));
            }
        }
    }
}
