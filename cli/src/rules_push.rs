//! `leakgate rules push --redis URL FILE`: validates a rules file and stores it in Redis with a
//! new version, for every `leakgate serve --redis URL` and every `RedisRuleLimiter` that
//! follows pushed rules to put in force within about a second.

use std::path::Path;
use std::process::ExitCode;

/// Pushes the rules of `file` (TOML, or Envoy's YAML for `.yaml`/`.yml`) under `prefix`.
/// Exit code 0 once stored (the version is printed), 1 when the file is invalid or Redis cannot
/// store it.
pub(crate) fn push(redis: &str, prefix: &str, file: &Path) -> ExitCode {
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
    match leakgate_redis::push_rules(redis, prefix, loaded.rules()) {
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
