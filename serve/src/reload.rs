//! Keeping the rules current: the rules file read again on SIGHUP and when its bytes change
//! (polled, as `leakgate::RulesWatcher` does: it sees every change on any file system, and
//! editors that replace the file by renaming), and, with `--redis`, rules pushed through Redis.
//! A file that does not parse is refused with its reason in the log, and the rules in force
//! stay; every reload keeps each tracked key's level.

use crate::limits::Limits;
use crate::rules_file::{LoadedRules, RulesError, RulesFormat};
use leakgate::Clock;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Loads the rules file and puts it in force. Returns how many rules it has.
pub(crate) fn reload_file<C: Clock + 'static>(
    limits: &Limits<C>,
    path: &Path,
) -> Result<usize, RulesError> {
    let loaded = LoadedRules::from_file(path);
    apply(limits, loaded, path, format!("file {}", path.display()))
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
    use leakgate_redis::{FollowEvent, RulesFollower};
    let source_path = PathBuf::from(url);
    RulesFollower::start(url, "leakgate:", every, move |event| match event {
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
    })
}

/// Reads `path` every `every` and reloads it when its bytes differ from the last ones seen
/// (`first`: the bytes in force when the service started), until `shutdown`.
pub(crate) async fn watch_file<C: Clock + 'static>(
    limits: Arc<Limits<C>>,
    path: PathBuf,
    first: Option<Vec<u8>>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut last = first;
    let mut ticks = tokio::time::interval(every.max(Duration::from_millis(10)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = shutdown.changed() => return,
        }
        // An unreadable file (being replaced, say) is tried again next time.
        let Ok(bytes) = tokio::fs::read(&path).await else { continue };
        if last.as_ref() == Some(&bytes) {
            continue;
        }
        let loaded = LoadedRules::from_bytes(&bytes, RulesFormat::of(&path))
            .map_err(|e| RulesError { path: Some(path.clone()), ..e });
        last = Some(bytes);
        let source = format!("file {}", path.display());
        let _ = crate::limits::blocking(|| apply(&limits, loaded, &path, source));
    }
}
