//! `leakgate rules push --redis URL FILE` (or `--redis-cluster URL[,URL...]`): validates a rules
//! file and stores it in Redis with a new version, for every `leakgate serve --redis URL` and
//! every `RedisRuleLimiter` that follows pushed rules to put in force within about a second.

use std::path::Path;
use std::process::ExitCode;

/// Pushes the rules of `file` (TOML, or Envoy's YAML for `.yaml`/`.yml`) under `prefix`, to the
/// Redis at `redis` or else to the cluster of the seed URLs `cluster`. Exit code 0 once stored
/// (the version is printed), 1 when the file is invalid or Redis cannot store it.
pub(crate) fn push(redis: Option<&str>, cluster: &[String], prefix: &str, file: &Path) -> ExitCode {
    let loaded = match leakgate_serve::LoadedRules::from_file(file) {
        Ok(loaded) => loaded,
        Err(e) => {
            crate::out::errln!("leakgate rules push: {e}");
            return ExitCode::from(1);
        }
    };
    if loaded.has_replaces() {
        crate::out::errln!(
            "leakgate rules push: {}: `replaces` cannot be pushed (pushed rules are leakgate's \
             TOML); serve this file with --rules instead",
            file.display()
        );
        return ExitCode::from(1);
    }
    let pushed = match redis {
        Some(url) => leakgate_redis::push_rules(url, prefix, loaded.rules()),
        None => {
            let seeds: Vec<&str> = cluster.iter().map(String::as_str).collect();
            leakgate_redis::push_rules_cluster(&seeds, prefix, loaded.rules())
        }
    };
    match pushed {
        Ok(version) => {
            let count = loaded.rules().len();
            crate::out::outln!(
                "{}: {count} rule{} pushed as version {version}",
                file.display(),
                if count == 1 { "" } else { "s" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            crate::out::errln!("leakgate rules push: {e}");
            ExitCode::from(1)
        }
    }
}
