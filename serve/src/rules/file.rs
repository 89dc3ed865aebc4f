//! Reading a rules file: leakgate's TOML, or envoyproxy/ratelimit's YAML (by the file's
//! extension, `.yaml` or `.yml`).

use super::replaces::Replaces;
use super::LoadedRules;
use leakgate::Rules;
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a rules file was refused: which file and what is wrong (the line and the rule where
/// known).
///
/// ```
/// let e = leakgate_serve::LoadedRules::from_toml("api = \"10/fortnight\"\n").unwrap_err();
/// assert!(e.to_string().contains("fortnight"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesError {
    pub(crate) path: Option<PathBuf>,
    pub(crate) message: String,
}

impl fmt::Display for RulesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{}: {}", path.display(), self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for RulesError {}

/// The two formats a rules file may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RulesFormat {
    /// leakgate's TOML (`leakgate rules check --help` describes it).
    Toml,
    /// envoyproxy/ratelimit's YAML configuration (see the crate docs for what is translated).
    EnvoyYaml,
}

impl RulesFormat {
    /// The format of the file at `path`: Envoy's YAML for `.yaml` and `.yml`, TOML otherwise.
    ///
    /// ```
    /// use leakgate_serve::RulesFormat;
    /// assert_eq!(RulesFormat::of("limits/config.yaml"), RulesFormat::EnvoyYaml);
    /// assert_eq!(RulesFormat::of("rules.toml"), RulesFormat::Toml);
    /// ```
    pub fn of(path: impl AsRef<Path>) -> RulesFormat {
        match path.as_ref().extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") => {
                RulesFormat::EnvoyYaml
            }
            _ => RulesFormat::Toml,
        }
    }
}

impl LoadedRules {
    /// Rules in leakgate's TOML format.
    ///
    /// ```
    /// let loaded = leakgate_serve::LoadedRules::from_toml("\"\" = \"100/s\"\n")?;
    /// assert!(loaded.rules().get("").is_some());
    /// # Ok::<(), leakgate_serve::RulesError>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<LoadedRules, RulesError> {
        let rules = Rules::from_toml(text)
            .map_err(|e| RulesError { path: None, message: e.to_string() })?;
        Ok(LoadedRules { rules, replaces: Replaces::default() })
    }

    /// Rules from envoyproxy/ratelimit's YAML configuration (one or more documents, one
    /// domain each).
    ///
    /// ```
    /// let loaded = leakgate_serve::LoadedRules::from_envoy_yaml(
    ///     "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: { unit: second, requests_per_unit: 10 }\n",
    /// )?;
    /// assert_eq!(loaded.rules().get("edge/remote_address").unwrap().to_string(), "10/s");
    /// # Ok::<(), leakgate_serve::RulesError>(())
    /// ```
    pub fn from_envoy_yaml(text: &str) -> Result<LoadedRules, RulesError> {
        crate::rules::envoy_yaml::translate(text)
            .map_err(|message| RulesError { path: None, message })
    }

    /// Rules from `text` in `format`.
    ///
    /// ```
    /// use leakgate_serve::{LoadedRules, RulesFormat};
    /// let loaded = LoadedRules::parse("api = \"1/s\"", RulesFormat::Toml)?;
    /// assert_eq!(loaded.rules().len(), 1);
    /// # Ok::<(), leakgate_serve::RulesError>(())
    /// ```
    pub fn parse(text: &str, format: RulesFormat) -> Result<LoadedRules, RulesError> {
        match format {
            RulesFormat::Toml => LoadedRules::from_toml(text),
            RulesFormat::EnvoyYaml => LoadedRules::from_envoy_yaml(text),
        }
    }

    /// Rules from the file at `path`, in the format its extension names ([`RulesFormat::of`]).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("serve-doc-{}.toml", std::process::id()));
    /// std::fs::write(&path, "api = \"10/s\"\n")?;
    /// let loaded = leakgate_serve::LoadedRules::from_file(&path)?;
    /// assert!(loaded.rules().get("api").is_some());
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<LoadedRules, RulesError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| RulesError {
            path: Some(path.to_path_buf()),
            message: format!("cannot read the file: {e}"),
        })?;
        LoadedRules::from_bytes(&bytes, RulesFormat::of(path))
            .map_err(|e| RulesError { path: Some(path.to_path_buf()), ..e })
    }

    /// Rules from a file's bytes.
    pub(crate) fn from_bytes(bytes: &[u8], format: RulesFormat) -> Result<LoadedRules, RulesError> {
        let text = std::str::from_utf8(bytes).map_err(|e| RulesError {
            path: None,
            message: format!("the file is not UTF-8 text: {e}"),
        })?;
        LoadedRules::parse(text, format)
    }

    /// Whether the file used envoyproxy/ratelimit's `replaces` (which only `leakgate serve`
    /// applies: it is not part of [`Rules`]).
    ///
    /// ```
    /// let loaded = leakgate_serve::LoadedRules::from_toml("api = \"10/s\"\n")?;
    /// assert!(!loaded.has_replaces());
    /// # Ok::<(), leakgate_serve::RulesError>(())
    /// ```
    pub fn has_replaces(&self) -> bool {
        !self.replaces.is_empty()
    }

    /// The rules.
    ///
    /// ```
    /// let loaded = leakgate_serve::LoadedRules::from_toml("api = \"10/s\"\n")?;
    /// assert_eq!(loaded.rules().get("api").unwrap().quotas()[0].to_string(), "10/s");
    /// # Ok::<(), leakgate_serve::RulesError>(())
    /// ```
    pub fn rules(&self) -> &Rules {
        &self.rules
    }
}
