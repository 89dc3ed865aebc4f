//! Lane rules: leakgate's [`Rules`] (a lane gets the quotas of its longest configured prefix) plus
//! options of a queue: `max_in_flight` (runs of one lane at once), `max_waiting` (the leaky
//! bucket's capacity: jobs waiting in one lane), `weight` (the lane's share of the claims when
//! several lanes are ready: a lane of weight 3 is given 3 jobs a turn, where a lane of weight 1,
//! the default, is given 1), and `adaptive = true` with an optional `adaptive_floor = N` (a
//! "slow down" halves the lane's rate, each done job wins back a twentieth of the quota, never
//! below N a period, 1 by default: [`leakgate::AdaptiveRate`]'s steps, kept in the database).
//!
//! The file format is the core's rules TOML; a rule written as a table may also carry the
//! options, and a table with only options sets them without pacing the lane:
//!
//! ```toml
//! "refunds" = "1/s"                                            # every refunds/<bank>, paced
//! "refunds/bank-a" = { quotas = ["1/s", "3000/h"], max_in_flight = 1, max_waiting = 100000 }
//! "mail" = { max_in_flight = 4, weight = 3 }                   # not paced, 4 at once, 3 a turn
//! "partner" = { quota = "100/s", adaptive = true, adaptive_floor = 5 }
//! ```

use leakgate::{Quota, Rule, Rules, RulesFileError};
use std::collections::BTreeMap;
use std::fmt;

/// The options this crate adds to a rule.
const OPTIONS: [&str; 4] = ["max_in_flight", "max_waiting", "weight", "adaptive_floor"];

/// The largest `weight`.
const MAX_WEIGHT: u64 = 1000;

/// A lane's limits beyond its pace.
///
/// ```
/// let rules = leakgate_jobs::LaneRules::from_toml("bank = { quota = \"1/s\", max_in_flight = 1 }")?;
/// assert_eq!(rules.limits("bank/a").max_in_flight, Some(1));
/// assert_eq!(rules.limits("bank/a").max_waiting, None);
/// # Ok::<(), leakgate_jobs::RulesError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneLimits {
    /// The most runs of one lane at once, across all workers (`None`: no limit).
    pub max_in_flight: Option<u64>,
    /// The most jobs waiting in one lane: an `add` beyond it is refused (`None`: no limit).
    pub max_waiting: Option<u64>,
    /// The lane's share of the claims when several lanes are ready: it is given this many jobs
    /// a turn, 1 to 1000 (`None`: 1).
    pub weight: Option<u64>,
    /// Whether a "slow down" adapts the lane's rate, and its floor: `Some(n)` when the rule says
    /// `adaptive = true` (`n` from `adaptive_floor`, else 1: the fewest runs a period of each
    /// quota it backs off to); `None`: a slow-down only pauses the lane.
    pub adaptive_floor: Option<u64>,
}

impl LaneLimits {
    /// The weight in force: [`weight`](Self::weight), else 1.
    ///
    /// ```
    /// let rules = leakgate_jobs::LaneRules::from_toml("a = { weight = 3 }\nb = \"1/s\"")?;
    /// assert_eq!((rules.limits("a/x").turn(), rules.limits("b").turn()), (3, 1));
    /// # Ok::<(), leakgate_jobs::RulesError>(())
    /// ```
    pub fn turn(&self) -> i64 {
        self.weight.map_or(1, |w| w.clamp(1, MAX_WEIGHT) as i64)
    }
}

/// The rules of a queue: pace and limits by lane path. Stored in the database (see
/// [`Jobs::set_rules`](crate::Jobs::set_rules)), so that every worker paces by the same rules.
///
/// ```
/// let rules = leakgate_jobs::LaneRules::from_toml(r#"
///     "refunds" = "1/s"
///     "refunds/bank-a" = { quotas = ["2/s", "3000/h"], max_in_flight = 1 }
/// "#)?;
/// let (path, quotas) = rules.pace("refunds/bank-a");
/// assert_eq!((path, quotas.len()), ("refunds/bank-a", 2));
/// assert_eq!(rules.pace("refunds/bank-b").1[0].to_string(), "1/s");
/// assert!(rules.pace("mail/x").1.is_empty(), "a lane no rule matches is not paced");
/// # Ok::<(), leakgate_jobs::RulesError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaneRules {
    rules: Rules,
    limits: BTreeMap<String, LaneLimits>,
    text: String,
}

impl LaneRules {
    /// No rules: no lane is paced or limited.
    ///
    /// ```
    /// assert!(leakgate_jobs::LaneRules::new().pace("any").1.is_empty());
    /// ```
    pub fn new() -> Self {
        LaneRules::default()
    }

    /// Rules from TOML text: the core's format, plus this crate's options (`max_in_flight`,
    /// `max_waiting`, `weight`, `adaptive`, `adaptive_floor`) in table rules. Errors name the line, the rule and the bad part.
    ///
    /// ```
    /// let e = leakgate_jobs::LaneRules::from_toml("a = { quota = \"1/s\", max_in_flight = 0 }");
    /// assert!(e.unwrap_err().to_string().contains("max_in_flight"));
    /// ```
    pub fn from_toml(text: &str) -> Result<Self, RulesError> {
        let Some(stripped) = strip_options(text)? else {
            // No option of ours: the core's parser reads the text as written.
            return Ok(LaneRules {
                rules: Rules::from_toml(text)?,
                limits: BTreeMap::new(),
                text: text.to_string(),
            });
        };
        let (core_text, limits, options_only) = stripped;
        let mut rules = Rules::from_toml(&core_text).map_err(|e| relocate(text, e))?;
        for path in options_only {
            rules.insert_rule(path, Rule::new([]));
        }
        Ok(LaneRules { rules, limits, text: text.to_string() })
    }

    /// Rules from a TOML file.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("leakgate-jobs-doc-{}.toml", std::process::id()));
    /// std::fs::write(&path, "bank = \"1/s\"\n")?;
    /// let rules = leakgate_jobs::LaneRules::from_file(&path)?;
    /// assert_eq!(rules.pace("bank/a").0, "bank");
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self, RulesError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            RulesError::new(None, None, format!("cannot read rules file {}: {e}", path.display()))
        })?;
        Self::from_toml(&text)
    }

    /// The text the rules were read from (what the database stores).
    ///
    /// ```
    /// let rules = leakgate_jobs::LaneRules::from_toml("a = \"1/s\"")?;
    /// assert_eq!(rules.text(), "a = \"1/s\"");
    /// # Ok::<(), leakgate_jobs::RulesError>(())
    /// ```
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The rule path and quotas that pace `lane` (no quotas: not paced). A rule in shadow mode
    /// does not pace.
    ///
    /// ```
    /// let rules = leakgate_jobs::LaneRules::from_toml("\"\" = \"5/s\"")?;
    /// assert_eq!(rules.pace("anything").0, "");
    /// # Ok::<(), leakgate_jobs::RulesError>(())
    /// ```
    pub fn pace(&self, lane: &str) -> (&str, &[Quota]) {
        match self.rules.rule_for(lane) {
            Some((path, rule)) if !rule.is_shadow() => (path, rule.quotas()),
            Some((path, _)) => (path, &[]),
            None => ("", &[]),
        }
    }

    /// The limits of `lane`: those of the rule that paces it.
    ///
    /// ```
    /// let rules = leakgate_jobs::LaneRules::from_toml("a = { max_waiting = 10 }")?;
    /// assert_eq!(rules.limits("a/b").max_waiting, Some(10));
    /// # Ok::<(), leakgate_jobs::RulesError>(())
    /// ```
    pub fn limits(&self, lane: &str) -> LaneLimits {
        self.rules
            .rule_for(lane)
            .and_then(|(path, _)| self.limits.get(path).copied())
            .unwrap_or_default()
    }

    /// The core rules (pace only).
    ///
    /// ```
    /// let rules = leakgate_jobs::LaneRules::from_toml("a = \"1/s\"")?;
    /// assert_eq!(rules.rules().len(), 1);
    /// # Ok::<(), leakgate_jobs::RulesError>(())
    /// ```
    pub fn rules(&self) -> &Rules {
        &self.rules
    }
}

impl fmt::Display for LaneRules {
    /// One line per rule: path, quotas, limits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (path, rule) in self.rules.iter() {
            write!(f, "{path:?} = {rule}")?;
            if let Some(l) = self.limits.get(path) {
                if let Some(n) = l.max_in_flight {
                    write!(f, ", max_in_flight {n}")?;
                }
                if let Some(n) = l.max_waiting {
                    write!(f, ", max_waiting {n}")?;
                }
                if let Some(n) = l.weight {
                    write!(f, ", weight {n}")?;
                }
                if let Some(n) = l.adaptive_floor {
                    write!(f, ", adaptive (floor {n})")?;
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

type Stripped = (String, BTreeMap<String, LaneLimits>, Vec<String>);

/// Takes this crate's options out of the table rules: `None` when there are none.
fn strip_options(text: &str) -> Result<Option<Stripped>, RulesError> {
    let Ok(mut table) = toml::from_str::<toml::Table>(text) else {
        return Ok(None); // not TOML: the core's parser says where
    };
    let mut limits = BTreeMap::new();
    let mut options_only = Vec::new();
    for (path, value) in table.iter_mut() {
        let toml::Value::Table(options) = value else { continue };
        let mut lane = LaneLimits::default();
        let mut found = false;
        let adaptive = match options.remove("adaptive") {
            None => false,
            Some(toml::Value::Boolean(on)) => {
                found = true;
                on
            }
            Some(other) => {
                let what = format!("adaptive must be true or false, found {other}");
                return Err(error_at(line_of(text, path), path, &what));
            }
        };
        for name in OPTIONS {
            let Some(v) = options.remove(name) else { continue };
            found = true;
            let n = match v {
                toml::Value::Integer(n)
                    if n >= 1 && (name != "weight" || n as u64 <= MAX_WEIGHT) =>
                {
                    n as u64
                }
                other => {
                    let line = line_of(text, path);
                    let what = if name == "weight" {
                        format!(
                            "weight must be a whole number from 1 to {MAX_WEIGHT}, found {other}"
                        )
                    } else {
                        format!("{name} must be a whole number, at least 1, found {other}")
                    };
                    return Err(error_at(line, path, &what));
                }
            };
            match name {
                "max_in_flight" => lane.max_in_flight = Some(n),
                "max_waiting" => lane.max_waiting = Some(n),
                "weight" => lane.weight = Some(n),
                _ => lane.adaptive_floor = Some(n),
            }
        }
        lane.adaptive_floor = adaptive.then(|| lane.adaptive_floor.unwrap_or(1));
        if found {
            limits.insert(path.clone(), lane);
            if options.is_empty() {
                options_only.push(path.clone());
            }
        }
    }
    if limits.is_empty() {
        return Ok(None);
    }
    table.retain(|path, _| !options_only.iter().any(|p| p == path));
    let core_text = toml::to_string(&table).unwrap_or_default();
    Ok(Some((core_text, limits, options_only)))
}

/// The line (from 1) where rule `path` is written, found by its key.
fn line_of(text: &str, path: &str) -> Option<usize> {
    let quoted = format!("{path:?}");
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.starts_with(&quoted)
                || l.starts_with(&format!("{path} "))
                || l.starts_with(&format!("{path}="))
        })
        .map(|i| i + 1)
}

/// An error from the core's parser of the rewritten text, placed on the original's line.
fn relocate(text: &str, e: RulesFileError) -> RulesError {
    match e.rule() {
        Some(path) => error_at(line_of(text, path), path, e.message()),
        None => e,
    }
}

fn error_at(line: Option<usize>, path: &str, message: &str) -> RulesError {
    RulesError::new(line, Some(path), message)
}

/// Why lane rules were refused: where, for which rule, and what is wrong. The core's
/// [`RulesFileError`]: errors in this crate's options read as errors in the core's format do.
///
/// ```
/// let e = leakgate_jobs::LaneRules::from_toml("a = \"1/s\"\nb = \"5/fortnight\"").unwrap_err();
/// assert_eq!((e.line(), e.rule()), (Some(2), Some("b")));
/// assert!(e.to_string().contains("fortnight"));
/// let e = leakgate_jobs::LaneRules::from_toml("a = { max_waiting = -1 }").unwrap_err();
/// assert!(e.message().contains("max_waiting"));
/// ```
pub type RulesError = RulesFileError;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_taken_out_and_the_rest_is_the_core_format() {
        let rules = LaneRules::from_toml(
            "\"refunds\" = \"1/s\"\n\"refunds/bank-a\" = { quotas = [\"1/s\", \"3000/h\"], max_in_flight = 1, max_waiting = 5 }\nmail = { max_in_flight = 4 }\n",
        )
        .unwrap();
        assert_eq!(rules.pace("refunds/bank-a").1.len(), 2);
        assert_eq!(rules.pace("refunds/bank-b").0, "refunds");
        let a = rules.limits("refunds/bank-a/x");
        assert_eq!((a.max_in_flight, a.max_waiting), (Some(1), Some(5)));
        assert_eq!(rules.limits("refunds/bank-b"), LaneLimits::default());
        assert!(rules.pace("mail/x").1.is_empty());
        assert_eq!(rules.limits("mail/x").max_in_flight, Some(4));
    }

    #[test]
    fn bad_options_and_bad_quotas_name_their_line_and_rule() {
        let e = LaneRules::from_toml("a = \"1/s\"\nb = { quota = \"1/s\", max_in_flight = 0 }\n")
            .unwrap_err();
        assert_eq!((e.line(), e.rule()), (Some(2), Some("b")), "{e}");
        assert!(e.to_string().contains("max_in_flight"), "{e}");
        let e = LaneRules::from_toml(
            "a = \"1/s\"\n\nb = { quota = \"1/fortnight\", max_in_flight = 2 }\n",
        )
        .unwrap_err();
        assert_eq!((e.line(), e.rule()), (Some(3), Some("b")), "{e}");
        assert!(e.to_string().contains("fortnight"), "{e}");
        let e = LaneRules::from_toml("a = [").unwrap_err();
        assert_eq!(e.line(), Some(1));
    }

    #[test]
    fn adaptive_takes_a_floor_and_only_a_boolean() {
        let rules = LaneRules::from_toml(
            "a = { quota = \"10/s\", adaptive = true }\nb = { quota = \"10/s\", adaptive = true, adaptive_floor = 3 }\nc = { quota = \"1/s\", adaptive_floor = 3 }\n",
        )
        .unwrap();
        assert_eq!(rules.limits("a").adaptive_floor, Some(1));
        assert_eq!(rules.limits("b").adaptive_floor, Some(3));
        assert_eq!(rules.limits("c").adaptive_floor, None, "a floor alone does not turn it on");
        assert_eq!(rules.pace("b").1.len(), 1);
        let e = LaneRules::from_toml("a = { quota = \"1/s\", adaptive = 1 }").unwrap_err();
        assert!(e.to_string().contains("adaptive must be true or false"), "{e}");
    }

    #[test]
    fn messages_read_as_before_the_core_type_carried_them() {
        let e = LaneRules::from_toml("a = \"1/s\"\nb = { quota = \"1/s\", max_in_flight = 0 }\n");
        assert_eq!(
            e.unwrap_err().to_string(),
            "line 2: rule \"b\": max_in_flight must be a whole number, at least 1, found 0"
        );
        let e = LaneRules::from_toml("a = \"1/s\"\nb = \"5/fortnight\"").unwrap_err();
        assert!(e.to_string().starts_with("line 2: rule \"b\": "), "{e}");
        let missing = std::env::temp_dir().join("leakgate-jobs-no-such-dir/rules.toml");
        let e = LaneRules::from_file(&missing).unwrap_err();
        assert!(e.to_string().starts_with("cannot read rules file "), "{e}");
        assert_eq!((e.line(), e.rule()), (None, None));
    }
}
