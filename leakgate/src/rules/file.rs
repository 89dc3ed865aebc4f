//! Rules from TOML (feature `rules-file`):
//!
//! ```toml
//! "" = "1000/s"                                  # the default rule
//! "rate_limit" = "1/s burst 10"
//! "rate_limit/192.168.11.3" = "100/s burst 500"  # paths with dots or slashes are quoted
//! api = ["10/s", "1000/h"]                       # several quotas: all must conform
//! "api/beta" = { quotas = ["5/s"], shadow = true, capacity = 10000, overflow = "deny" }
//! "ip" = { quota = "1/s burst 10", capacity = 100000, overflow = "shared 1000/s" }
//! ```
//!
//! Every top-level key is a rule path; its value is a quota, a list of quotas, or a table of
//! options (`quota` or `quotas`, `shadow`, `capacity`, `overflow`: `"deny"`, or `"shared QUOTA"`
//! for a bucket of that quota shared by the keys that find no room, see [`Rule::overflow`]).
//! Errors name the line, the rule and the bad part.

use super::{Rule, Rules};
use crate::keyed::OverflowPolicy;
use crate::quota::Quota;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use toml::{Spanned, Value};

/// Why a rules file was refused: where, for which rule, and what is wrong.
///
/// ```
/// let e = leakgate::Rules::from_toml("api = \"10/s\"\nweb = \"5/fortnight\"\n").unwrap_err();
/// assert_eq!(e.line(), Some(2));
/// assert_eq!(e.rule(), Some("web"));
/// assert!(e.to_string().contains("fortnight"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RulesFileError {
    pub(super) line: Option<usize>,
    pub(super) rule: Option<String>,
    pub(super) message: String,
}

impl RulesFileError {
    fn at(text: &str, offset: usize, rule: Option<&str>, message: String) -> Self {
        let line = text.get(..offset).map(|before| before.matches('\n').count() + 1);
        RulesFileError { line, rule: rule.map(str::to_string), message }
    }

    /// An error at `line` (from 1) of a rules text, for `rule`, saying `message`: for a format
    /// built on this one (a crate that adds options of its own to the rules TOML, as
    /// `leakgate-jobs` does) that reports its errors as this type.
    ///
    /// ```
    /// let e = leakgate::RulesFileError::new(Some(2), Some("b"), "max_in_flight must be 1 or more");
    /// assert_eq!(e.to_string(), "line 2: rule \"b\": max_in_flight must be 1 or more");
    /// assert_eq!(leakgate::RulesFileError::new(None, None, "no file").to_string(), "no file");
    /// ```
    pub fn new(line: Option<usize>, rule: Option<&str>, message: impl Into<String>) -> Self {
        RulesFileError { line, rule: rule.map(str::to_string), message: message.into() }
    }

    /// The line (from 1) the error is on, when it is in the text.
    ///
    /// ```
    /// let e = leakgate::Rules::from_toml("a = [").unwrap_err();
    /// assert_eq!(e.line(), Some(1));
    /// ```
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// The path of the rule at fault, when there is one.
    ///
    /// ```
    /// let e = leakgate::Rules::from_toml("a = 5").unwrap_err();
    /// assert_eq!(e.rule(), Some("a"));
    /// ```
    pub fn rule(&self) -> Option<&str> {
        self.rule.as_deref()
    }

    /// What is wrong, naming the bad part.
    ///
    /// ```
    /// let e = leakgate::Rules::from_toml("a = { shadow = \"yes\" }").unwrap_err();
    /// assert!(e.message().contains("shadow"));
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for RulesFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(rule) = &self.rule {
            write!(f, "rule {rule:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for RulesFileError {}

const OPTIONS: &str = "quota, quotas, shadow, capacity, overflow";

impl Rules {
    /// Rules from TOML text (see the format in the crate docs of `rules-file`).
    ///
    /// ```
    /// let rules = leakgate::Rules::from_toml(r#"
    ///     "rate_limit/192.168.11.3" = "100/s burst 500"
    ///     api = ["10/s", "1000/h"]
    ///     "api/beta" = { quota = "5/s", shadow = true }
    /// "#)?;
    /// assert_eq!(rules.get("api").unwrap().quotas().len(), 2);
    /// assert!(rules.get("api/beta").unwrap().is_shadow());
    /// # Ok::<(), leakgate::RulesFileError>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<Rules, RulesFileError> {
        let table: BTreeMap<Spanned<String>, Spanned<Value>> =
            toml::from_str(text).map_err(|e| {
                let offset = e.span().map_or(text.len(), |span| span.start);
                let message = e.message().trim_end().to_string();
                RulesFileError::at(text, offset, None, format!("not valid TOML: {message}"))
            })?;
        let mut rules = Rules::new();
        for (path, value) in table {
            let offset = path.span().start;
            let path = path.into_inner();
            let rule = parse_rule(value.get_ref())
                .map_err(|message| RulesFileError::at(text, offset, Some(&path), message))?;
            rules.insert_rule(path, rule);
        }
        Ok(rules)
    }

    /// Rules from a TOML file.
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("leakgate-doc-{}.toml", std::process::id()));
    /// std::fs::write(&path, "api = \"10/s\"\n")?;
    /// let rules = leakgate::Rules::from_file(&path)?;
    /// assert!(rules.get("api").is_some());
    /// # std::fs::remove_file(&path)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<Rules, RulesFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| RulesFileError {
            line: None,
            rule: None,
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        Rules::from_toml(&text)
    }
}

/// One rule's value: a quota, a list of quotas, or a table of options.
fn parse_rule(value: &Value) -> Result<Rule, String> {
    match value {
        Value::Table(options) => parse_options(options),
        quotas => Ok(Rule::new(parse_quotas(quotas)?)),
    }
}

fn parse_quotas(value: &Value) -> Result<Vec<Quota>, String> {
    match value {
        Value::String(s) => Ok(vec![parse_quota(s)?]),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => parse_quota(s),
                other => Err(format!(
                    "quota {} of the list is {}, expected a string like \"10/s\"",
                    i + 1,
                    describe(other)
                )),
            })
            .collect(),
        other => Err(format!(
            "expected a quota like \"10/s\", a list of them, or a table of options \
             ({OPTIONS}), found {}",
            describe(other)
        )),
    }
}

fn parse_quota(text: &str) -> Result<Quota, String> {
    text.parse().map_err(|e| format!("bad quota {text:?}: {e}"))
}

fn parse_options(options: &toml::Table) -> Result<Rule, String> {
    let mut rule = Rule::new([]);
    let mut has_quotas = false;
    for (name, value) in options {
        match (name.as_str(), value) {
            ("quota" | "quotas", quotas) => {
                if has_quotas {
                    return Err("give either \"quota\" or \"quotas\", not both".into());
                }
                has_quotas = true;
                let capacity = rule.table_capacity();
                let (shadow, overflow) = (rule.is_shadow(), rule.overflow_policy());
                rule = Rule::new(parse_quotas(quotas)?);
                rule.capacity(capacity).shadow(shadow).overflow(overflow);
            }
            ("shadow", Value::Boolean(on)) => {
                rule.shadow(*on);
            }
            ("capacity", Value::Integer(keys)) if *keys >= 1 => {
                let keys =
                    usize::try_from(*keys).map_err(|_| format!("capacity {keys} is too large"))?;
                rule.capacity(keys);
            }
            ("overflow", Value::String(policy)) => {
                rule.overflow(parse_policy(policy)?);
            }
            ("shadow", other) => {
                return Err(format!("shadow must be true or false, found {}", describe(other)))
            }
            ("capacity", other) => {
                return Err(format!(
                    "capacity must be a whole number of keys, at least 1, found {}",
                    describe(other)
                ))
            }
            ("overflow", other) => {
                return Err(format!("overflow must be a string, found {}", describe(other)))
            }
            (other, _) => {
                let hint = "quote a path that contains a dot";
                return Err(format!("unknown option {other:?} (expected {OPTIONS}; {hint})"));
            }
        }
    }
    if !has_quotas {
        return Err("the table gives no \"quota\" or \"quotas\"".into());
    }
    Ok(rule)
}

/// `deny`, or `shared QUOTA`.
fn parse_policy(text: &str) -> Result<OverflowPolicy, String> {
    match text.trim().split_once(' ') {
        None if text.trim() == "deny" => Ok(OverflowPolicy::Deny),
        Some(("shared", quota)) => Ok(OverflowPolicy::SharedBucket(parse_quota(quota.trim())?)),
        _ => Err(format!(
            "unknown overflow policy {text:?} (expected \"deny\" or \"shared QUOTA\", like \
             \"shared 100/s\")"
        )),
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("the string {s:?}"),
        Value::Integer(i) => format!("the number {i}"),
        Value::Float(x) => format!("the number {x}"),
        Value::Boolean(b) => format!("{b}"),
        Value::Datetime(d) => format!("the date {d}"),
        Value::Array(_) => "a list".into(),
        Value::Table(_) => "a table".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formats_parse() {
        let rules = Rules::from_toml(
            r#"
"" = "1000/s"
"rate_limit/192.168.11.3" = "100/s burst 500"
api = ["10/s", "1000/h"]
"api/beta" = { quotas = ["5/s"], shadow = true, capacity = 100, overflow = "deny" }
ip = { quota = "1/s", overflow = "shared 100/s burst 5" }
["web/static"]
quota = "50/s"
"#,
        )
        .unwrap();
        assert_eq!(rules.len(), 6);
        let shared = OverflowPolicy::SharedBucket("100/s burst 5".parse().unwrap());
        assert_eq!(rules.get("ip").unwrap().overflow_policy(), shared);
        assert_eq!(rules.get("").unwrap().quotas()[0].to_string(), "1000/s");
        assert_eq!(rules.get("rate_limit/192.168.11.3").unwrap().quotas()[0].burst(), 500);
        let beta = rules.get("api/beta").unwrap();
        assert!(beta.is_shadow());
        assert_eq!(beta.table_capacity(), 100);
        assert_eq!(rules.get("web/static").unwrap().quotas().len(), 1);
        assert_eq!(Rules::from_toml("").unwrap().len(), 0);
    }

    #[test]
    fn errors_name_the_line_the_rule_and_the_bad_part() {
        // (text, line, rule, a part of the message)
        let cases: [(&str, usize, Option<&str>, &str); 11] = [
            ("a = \"1/s\"\n\nb = [\"1/s\", \"x/s\"]\n", 3, Some("b"), "\"x/s\""),
            ("a = \"1/s\"\na.b = \"1/s\"\n", 2, None, "not valid TOML"),
            ("x = { quota = \"1/s\", shadw = true }", 1, Some("x"), "\"shadw\""),
            ("x = { quota = \"1/s\", capacity = 0 }", 1, Some("x"), "capacity"),
            ("x = { quota = \"1/s\", overflow = \"drop\" }", 1, Some("x"), "\"drop\""),
            (
                "x = { quota = \"1/s\", overflow = \"shared 5/fortnight\" }",
                1,
                Some("x"),
                "fortnight",
            ),
            ("x = { shadow = true }", 1, Some("x"), "no \"quota\""),
            ("x = 3", 1, Some("x"), "the number 3"),
            ("x = [1]", 1, Some("x"), "quota 1 of the list"),
            ("x = \"1/s\"\ny = \n", 2, None, "not valid TOML"),
            ("x = \"1/s\"\n\"\" = { quota = \"1/s\", shadow = 1 }", 2, Some(""), "shadow"),
        ];
        for (text, line, rule, says) in cases {
            let e = Rules::from_toml(text).unwrap_err();
            assert_eq!((e.line(), e.rule()), (Some(line), rule), "{text:?}: {e}");
            assert!(e.message().contains(says), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
        }
    }
}
