//! `leakgate rules check FILE` and `leakgate rules explain FILE KEY`: validate a rules file and
//! show which rule a key gets.

use leakgate::Rules;
use std::path::Path;
use std::process::ExitCode;

/// Validates the rules file at `path` and prints the rules it resolves to, one per line, default
/// rule first. Exit code 0 when valid, 1 when not (the error on stderr names the line, the rule
/// and the bad part).
pub(crate) fn check(path: &Path) -> ExitCode {
    let rules = match Rules::from_file(path) {
        Ok(rules) => rules,
        Err(e) => return invalid(path, &e),
    };
    println!("{}: {} rule{}", path.display(), rules.len(), if rules.len() == 1 { "" } else { "s" });
    let width = rules.iter().map(|(p, _)| p.len() + 2).max().unwrap_or(0);
    for (rule_path, rule) in rules.iter() {
        let quoted = format!("{rule_path:?}");
        println!("  {quoted:<width$}  {rule}");
    }
    if rules.get("").is_none() {
        println!("  (no default rule \"\": keys that match no rule are not limited)");
    }
    ExitCode::SUCCESS
}

/// Prints which rule `key` gets under the rules file at `path`, and the paths tried on the way.
/// Exit code 0 (whether or not a rule matches), 1 when the file is invalid.
pub(crate) fn explain(path: &Path, key: &str) -> ExitCode {
    let rules = match Rules::from_file(path) {
        Ok(rules) => rules,
        Err(e) => return invalid(path, &e),
    };
    match rules.rule_for(key) {
        Some((rule_path, rule)) => println!("{key:?} -> rule {rule_path:?}: {rule}"),
        None => println!("{key:?} -> no rule: admitted and not tracked"),
    }
    for (candidate, configured) in rules.candidates(key) {
        let verdict = if configured { "rule" } else { "-" };
        println!("  tried {candidate:?}: {verdict}");
        if configured {
            break;
        }
    }
    ExitCode::SUCCESS
}

fn invalid(path: &Path, e: &leakgate::RulesFileError) -> ExitCode {
    eprintln!("leakgate rules: {}: {e}", path.display());
    ExitCode::from(1)
}

/// `leakgate rules SUBCOMMAND ...` for the hand-written argument parser.
pub(crate) fn run(args: &[String]) -> ExitCode {
    match args {
        [sub, file] if sub == "check" => check(Path::new(file)),
        [sub, file, key] if sub == "explain" => explain(Path::new(file), key),
        _ => {
            eprintln!("usage: leakgate rules check FILE | leakgate rules explain FILE KEY");
            ExitCode::from(2)
        }
    }
}
