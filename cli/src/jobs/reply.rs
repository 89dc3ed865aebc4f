//! A job's reply to its worker: `jobs work` names a file in the command's environment,
//! `LEAKGATE_JOB_REPLY`, where a command that fails may write one line:
//!
//! * `retry-after DURATION`: run this job again after DURATION (instead of the backoff; still a
//!   failed attempt, counted towards `--max-attempts`), as an HTTP `Retry-After` for one job;
//! * `slow-down DURATION`: the lane runs nothing for DURATION, then resumes at its pace with no
//!   burst, and this job runs again without counting as a failure; `slow-down` alone: no pause.
//!   A lane whose rule says `adaptive = true` also halves its rate (see the jobs README).
//!
//! Both are stored in the database, so every worker obeys them. The reply is read only when the
//! command exits non-zero (exit 0 is done, whatever the file says); a reply that does not parse
//! is named in the run's error, and the exit status decides as if there were none.

use crate::duration::parse_duration;
use leakgate_jobs::Outcome;
use std::io::Read;
use std::path::Path;
use std::time::Duration;

/// The most of a reply file that is read.
const MAX_REPLY: u64 = 4096;

/// The start of the name of a worker's folder of replies, followed by its pid and a dash.
const FOLDER: &str = "leakgate-jobs-replies-";

/// A folder for this worker's reply files (mode 0700, a random name with the worker's pid in
/// it), removed when dropped. Folders of workers that died without removing theirs (`kill -9`)
/// are removed first: one whose pid is no longer a process.
pub(crate) fn folder() -> Result<tempfile::TempDir, String> {
    let tmp = std::env::temp_dir();
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let pid = name
                .to_str()
                .and_then(|n| n.strip_prefix(FOLDER)?.split('-').next()?.parse::<u32>().ok());
            if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(&format!("{FOLDER}{}-", std::process::id()))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(&tmp)
        .map_err(|e| {
            format!("cannot make a folder for the jobs' replies in {}: {e}", tmp.display())
        })
}

/// What a reply asks for, or why it is not understood; `Ok(None)` when there is none.
pub(crate) fn read(path: &Path) -> Result<Option<Outcome>, String> {
    let mut text = String::new();
    match std::fs::File::open(path) {
        Ok(file) => {
            file.take(MAX_REPLY)
                .read_to_string(&mut text)
                .map_err(|e| format!("the reply file could not be read: {e}"))?;
        }
        Err(_) => return Ok(None),
    }
    parse(&text)
}

/// The reply in `text`: its first line that is not blank.
fn parse(text: &str) -> Result<Option<Outcome>, String> {
    let Some(line) = text.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let duration = || {
        parse_duration(rest.trim())
            .map_err(|e| format!("the reply {line:?} has no duration it can use: {e}"))
    };
    match word {
        "retry-after" => Ok(Some(Outcome::RetryAfter(duration()?))),
        "slow-down" if rest.trim().is_empty() => Ok(Some(Outcome::SlowDown(Duration::ZERO))),
        "slow-down" => Ok(Some(Outcome::SlowDown(duration()?))),
        _ => Err(format!(
            "the reply {line:?} is neither \"retry-after DURATION\" nor \"slow-down [DURATION]\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A dead worker's folder is removed by the next worker; a live one's is left alone.
    #[test]
    fn folders_of_dead_workers_are_swept() {
        let tmp = std::env::temp_dir();
        let dead = tmp.join(format!("{FOLDER}{}-test", u32::MAX - 7)); // no such pid
        std::fs::create_dir_all(dead.join("inner")).unwrap();
        let mine = folder().unwrap();
        assert!(!dead.exists(), "a dead worker's folder is removed");
        let again = folder().unwrap();
        assert!(mine.path().exists(), "a live worker's folder stays");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(mine.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "only the worker's user reads and writes replies");
        drop((mine, again));
    }

    #[test]
    fn replies_parse_and_bad_ones_say_why() {
        let s = Duration::from_secs;
        assert_eq!(parse("retry-after 30s\n"), Ok(Some(Outcome::RetryAfter(s(30)))));
        assert_eq!(parse("\n  slow-down 2min  \n"), Ok(Some(Outcome::SlowDown(s(120)))));
        assert_eq!(parse("slow-down\n"), Ok(Some(Outcome::SlowDown(s(0)))));
        assert_eq!(parse(""), Ok(None));
        assert_eq!(parse(" \n"), Ok(None));
        assert!(parse("retry-after").unwrap_err().contains("no duration"));
        assert!(parse("retry-after soon").unwrap_err().contains("no duration"));
        assert!(parse("later 5s").unwrap_err().contains("neither"));
    }
}
