//! envoyproxy/ratelimit's `replaces`: a limit that, when it applies to a request, switches off
//! the limits it names for that request.

use std::collections::HashMap;

/// Rule names and what each rule replaces, by rule path. Empty for rules files in leakgate's
/// own format.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Replaces {
    /// Rule path → the rule's `name`.
    pub(crate) names: HashMap<String, String>,
    /// Rule path → the names of the limits it replaces.
    pub(crate) replaces: HashMap<String, Vec<String>>,
}

impl Replaces {
    pub(crate) fn is_empty(&self) -> bool {
        self.replaces.is_empty()
    }

    /// Which of `paths` (the rule path of each part of one request, `None` for a part no rule
    /// limits) are switched off because another part's rule replaces them.
    pub(crate) fn replaced(&self, paths: &[Option<&str>]) -> Vec<bool> {
        let mut off = vec![false; paths.len()];
        if self.is_empty() {
            return off;
        }
        for replacer in paths.iter().flatten() {
            let Some(names) = self.replaces.get(*replacer) else { continue };
            for (i, path) in paths.iter().enumerate() {
                let Some(path) = path else { continue };
                if path == replacer {
                    continue;
                }
                if self.names.get(*path).is_some_and(|name| names.contains(name)) {
                    off[i] = true;
                }
            }
        }
        off
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_switches_off_the_named_ones_in_the_same_request() {
        let mut r = Replaces::default();
        r.names.insert("d/user".into(), "per_user".into());
        r.names.insert("d/user/vip".into(), "vip".into());
        r.replaces.insert("d/user/vip".into(), vec!["per_user".into()]);
        assert_eq!(r.replaced(&[Some("d/user"), Some("d/user/vip"), None]), [true, false, false]);
        assert_eq!(r.replaced(&[Some("d/user")]), [false]);
    }
}
