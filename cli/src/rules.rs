//! `leakgate rules check FILE` and `leakgate rules explain FILE KEY`: validate a rules file and
//! show which rule a key gets.

use crate::out::{errln, print, Delivery};
use leakgate::Rules;
use leakgate_jobs::LaneRules;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const LONG_HELP: &str = "\
A rules file is TOML: every top-level key is a rule path, its value a quota, a list of quotas
(all must conform), or a table of options:

    \"\" = \"1000/s\"                                  # the default rule
    \"rate_limit\" = \"1/s burst 10\"
    \"rate_limit/192.168.11.3\" = \"100/s burst 500\"  # paths with dots or slashes are quoted
    api = [\"10/s\", \"1000/h\"]
    \"api/beta\" = { quota = \"5/s\", shadow = true, capacity = 10000, overflow = \"shared 50/s\" }

A rules file for `leakgate jobs` may also give a table rule `max_in_flight` and `max_waiting`
(see `leakgate jobs --help`): `rules check` accepts them and says they are for `leakgate jobs`
only (`leakgate serve` and `rules push` refuse them).

A key gets the rule of its longest configured prefix cut at `/`, then the default rule \"\"; a
key no rule matches is admitted and not tracked. `rules check` warns (on stderr; the exit status
stays 0) about a path with an empty segment (\"a/\", \"/x\", \"a//b\"): keys are cut at each `/`,
so a key such as \"a/1\" tries \"a/1\", \"a\" and \"\", and never reaches \"a/\".

Exit status: 0 when the file is valid, 1 when it is not (the error names the line, the rule and
the bad part), 2 for a usage error.";

/// The arguments of `leakgate rules`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = LONG_HELP)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Validate a rules file and print its rules, default rule first
    Check {
        /// The rules file (TOML)
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Show which rule KEY gets under a rules file, and the paths tried on the way
    Explain {
        /// The rules file (TOML)
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// A full key, like `rate_limit/10.0.0.1`
        #[arg(value_name = "KEY")]
        key: String,
    },
    /// Store a rules file in Redis with a new version, for every `leakgate serve --redis` on it
    Push {
        /// The Redis that the instances use (redis://host:port/db)
        #[arg(long, value_name = "URL", required_unless_present = "redis_cluster")]
        redis: Option<String>,
        /// Or the Redis Cluster they use: the URLs of any of its nodes, comma-separated
        #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',', conflicts_with = "redis")]
        redis_cluster: Vec<String>,
        /// The start of the Redis key (the instances' default)
        #[arg(long, value_name = "PREFIX", default_value = "leakgate:")]
        prefix: String,
        /// The rules file (TOML, or Envoy's YAML for .yaml/.yml)
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// Runs `leakgate rules`.
pub(crate) fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Check { file } => check(&file),
        Command::Explain { file, key } => explain(&file, &key),
        Command::Push { redis, redis_cluster, prefix, file } => {
            crate::rules_push::push(redis.as_deref(), &redis_cluster, &prefix, &file)
        }
    }
}

/// Validates the rules file at `path` and prints the rules it resolves to, one per line, default
/// rule first, and on stderr a warning for each path no key is likely meant to reach. Exit code
/// 0 when valid (warnings or not), 1 when not (the error on stderr names the line, the rule and
/// the bad part).
fn check(path: &Path) -> ExitCode {
    let (rules, jobs) = match load(path) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let mut text = String::new();
    let plural = if rules.len() == 1 { "" } else { "s" };
    // Writing to a String cannot fail.
    let _ = writeln!(text, "{}: {} rule{plural}", path.display(), rules.len());
    let width = rules.iter().map(|(p, _)| p.len() + 2).max().unwrap_or(0);
    for (rule_path, rule) in rules.iter() {
        let quoted = format!("{rule_path:?}");
        let shown = match &jobs {
            Some(_) if rule.quotas().is_empty() => "not paced".to_owned(),
            _ => rule.to_string(),
        };
        let _ = write!(text, "  {quoted:<width$}  {shown}");
        if let Some(jobs) = &jobs {
            let limits = jobs.limits(rule_path);
            if let Some(n) = limits.max_in_flight {
                let _ = write!(text, ", max_in_flight {n}");
            }
            if let Some(n) = limits.max_waiting {
                let _ = write!(text, ", max_waiting {n}");
            }
            if let Some(n) = limits.adaptive_floor {
                let _ = write!(text, ", adaptive (floor {n})");
            }
        }
        text.push('\n');
    }
    if rules.get("").is_none() {
        text.push_str("  (no default rule \"\": keys that match no rule are not limited)\n");
    }
    if jobs.is_some() {
        text.push_str(
            "  (max_in_flight and max_waiting are options of leakgate jobs: valid for \
             `leakgate jobs work --rules`; `leakgate serve` and `rules push` refuse them)\n",
        );
    }
    for (rule_path, _) in rules.iter() {
        if let Some(why) = suspicious(rule_path) {
            errln!("leakgate rules: {}: warning: rule {rule_path:?} {why}", path.display());
        }
    }
    finish(print(&text), ExitCode::SUCCESS)
}

/// The rules of the file at `path`: the core's format, or the format of `leakgate jobs` (the
/// core's plus `max_in_flight` and `max_waiting`; then the jobs rules too). A file that is
/// neither is reported (with the jobs error when it uses the jobs options) and exits 1.
fn load(path: &Path) -> Result<(Rules, Option<LaneRules>), ExitCode> {
    let core = match Rules::from_file(path) {
        Ok(rules) => return Ok((rules, None)),
        Err(e) => e,
    };
    match LaneRules::from_file(path) {
        Ok(jobs) => Ok((jobs.rules().clone(), Some(jobs))),
        Err(e) if ["max_in_flight", "max_waiting"].iter().any(|o| core.message().contains(o)) => {
            errln!("leakgate rules: {}: {e}", path.display());
            Err(ExitCode::from(1))
        }
        Err(_) if core.message().contains("unknown option") => {
            errln!(
                "leakgate rules: {}: {core} (a rules file for leakgate jobs may also set \
                 max_in_flight and max_waiting)",
                path.display()
            );
            Err(ExitCode::from(1))
        }
        Err(_) => Err(invalid(path, &core)),
    }
}

/// Why a rule path reaches no key a user is likely to mean, if it does not: a path with an
/// empty segment (`"a/"`, `"/x"`, `"a//b"`) is matched only by keys with the same empty
/// segment, because keys are cut at each `/` from the right and a cut never leaves a trailing
/// `/` (`"a/x"` tries `"a/x"`, then `"a"`, never `"a/"`).
fn suspicious(rule_path: &str) -> Option<String> {
    if rule_path.is_empty() || !rule_path.split('/').any(str::is_empty) {
        return None;
    }
    let trimmed: Vec<&str> = rule_path.split('/').filter(|s| !s.is_empty()).collect();
    let meant = trimmed.join("/");
    let what = if rule_path.ends_with('/') {
        "ends with \"/\""
    } else if rule_path.starts_with('/') {
        "starts with \"/\""
    } else {
        "has an empty segment (\"//\")"
    };
    let example = if meant.is_empty() { "x/1".to_owned() } else { format!("{meant}/1") };
    let tried: Vec<String> =
        Rules::new().candidates(&example).iter().map(|(c, _)| format!("{c:?}")).collect();
    let hint =
        if meant.is_empty() { "the default rule \"\"".to_owned() } else { format!("{meant:?}") };
    Some(format!(
        "{what}: it matches only the key {rule_path:?} and keys that begin with \"{rule_path}/\"; \
         a key such as {example:?} tries {} and never reaches it (did you mean {hint}?)",
        tried.join(", ")
    ))
}

/// Prints which rule `key` gets under the rules file at `path`, and the paths tried on the way.
/// Exit code 0 (whether or not a rule matches), 1 when the file is invalid.
fn explain(path: &Path, key: &str) -> ExitCode {
    let rules = match load(path) {
        Ok((rules, _)) => rules,
        Err(code) => return code,
    };
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = match rules.rule_for(key) {
        Some((rule_path, rule)) => writeln!(text, "{key:?} -> rule {rule_path:?}: {rule}"),
        None => writeln!(text, "{key:?} -> no rule: admitted and not tracked"),
    };
    for (candidate, configured) in rules.candidates(key) {
        let verdict = if configured { "rule" } else { "-" };
        let _ = writeln!(text, "  tried {candidate:?}: {verdict}");
        if configured {
            break;
        }
    }
    finish(print(&text), ExitCode::SUCCESS)
}

/// The exit code once the output went as `delivery` says: a reader that left early changes
/// nothing (the output is a report, and the file's validity is the answer); a failed write is 1.
fn finish(delivery: Delivery, code: ExitCode) -> ExitCode {
    match delivery {
        Delivery::Written | Delivery::ReaderGone => code,
        Delivery::Failed => ExitCode::FAILURE,
    }
}

fn invalid(path: &Path, e: &leakgate::RulesFileError) -> ExitCode {
    errln!("leakgate rules: {}: {e}", path.display());
    ExitCode::from(1)
}
