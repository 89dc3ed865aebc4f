//! The rules the service enforces, apart from the protocols that ask about them: reading a rules
//! file (`file.rs`: leakgate's TOML, or envoyproxy/ratelimit's YAML translated by
//! `envoy_yaml.rs`, with its `replaces` in `replaces.rs`), and keeping them current (`reload.rs`,
//! once a changed file is stable: `settle.rs`). [`LoadedRules`], what they all pass along, is
//! defined here, so that the readers and the translator import it from none of the others.

pub(crate) mod envoy_yaml;
pub(crate) mod file;
pub(crate) mod reload;
pub(crate) mod replaces;
pub(crate) mod settle;

use leakgate::Rules;
use replaces::Replaces;

/// Rules read from a file, with what envoyproxy/ratelimit's format adds (`replaces`).
///
/// ```
/// let loaded = leakgate_serve::LoadedRules::from_toml("api = \"10/s\"\n")?;
/// assert_eq!(loaded.rules().len(), 1);
/// # Ok::<(), leakgate_serve::RulesError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadedRules {
    pub(crate) rules: Rules,
    pub(crate) replaces: Replaces,
}
