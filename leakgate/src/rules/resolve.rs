//! Which rule a key gets: its longest configured prefix cut at `/`, then the default rule `""`.
//!
//! # Implementation details
//!
//! The candidates for a key are the key itself and each prefix that ends right before a `/`.
//! Instead of cutting the key at every `/` (a long key of many segments, chosen by a client,
//! would cost a lookup per segment), the resolver keeps the distinct lengths of the configured
//! paths, longest first, and tries only those: a length `l` is a candidate when the key is `l`
//! bytes long or has a `/` at byte `l`, and then one hash lookup of `key[..l]` decides. So a check
//! costs at most one lookup per distinct configured length, whatever the key, and allocates
//! nothing. Many paths of one length go to a hash map with the keyed tables' fast seeded hasher.

use crate::keyed::{head, RandomSeed};
use std::collections::HashMap;

/// Rule paths and their rule numbers, ready for lookups.
#[derive(Debug)]
pub(crate) struct Resolver {
    /// The non-empty paths grouped by length, longest first.
    lengths: Box<[(usize, Paths)]>,
    /// The rule of the path `""`, if configured.
    default: Option<usize>,
}

/// The paths of one length.
#[derive(Debug)]
enum Paths {
    /// A few: compared one by one, first on their first 8 bytes packed in a word.
    Few(Box<[(u64, Box<str>, usize)]>),
    /// Many: a hash map.
    Many(HashMap<Box<str>, usize, RandomSeed>),
}

/// Up to this many paths of one length are compared one by one.
const FEW: usize = 8;

impl Paths {
    #[inline]
    fn get(&self, prefix: &str) -> Option<usize> {
        match self {
            Paths::Few(paths) => {
                let bytes = prefix.as_bytes();
                let want = head(bytes);
                // Every path here is as long as `prefix`: up to 8 bytes the heads say it all.
                // (Comparing empty tails is skipped on purpose: `memcmp` of zero bytes at a
                // dangling address costs a masked-load fault assist on some CPUs.)
                let same = |path: &str| bytes.len() <= 8 || path.as_bytes()[8..] == bytes[8..];
                paths.iter().find(|(first, path, _)| *first == want && same(path)).map(|e| e.2)
            }
            Paths::Many(map) => map.get(prefix).copied(),
        }
    }
}

impl Resolver {
    /// A resolver for `paths`, numbered in order.
    pub(crate) fn new<'a>(paths: impl IntoIterator<Item = &'a str>) -> Self {
        let mut by_length: std::collections::BTreeMap<usize, Vec<(&str, usize)>> =
            Default::default();
        let mut default = None;
        for (rule, path) in paths.into_iter().enumerate() {
            if path.is_empty() {
                default = Some(rule);
            } else {
                by_length.entry(path.len()).or_default().push((path, rule));
            }
        }
        let lengths = by_length
            .into_iter()
            .rev()
            .map(|(len, paths)| {
                let paths = if paths.len() <= FEW {
                    let few =
                        paths.into_iter().map(|(p, rule)| (head(p.as_bytes()), p.into(), rule));
                    Paths::Few(few.collect())
                } else {
                    let mut map = HashMap::with_capacity_and_hasher(paths.len(), RandomSeed::new());
                    map.extend(paths.into_iter().map(|(p, rule)| (p.into(), rule)));
                    Paths::Many(map)
                };
                (len, paths)
            })
            .collect();
        Resolver { lengths, default }
    }

    /// The number of the rule `key` gets, if any.
    #[inline(always)]
    pub(crate) fn resolve(&self, key: &str) -> Option<usize> {
        let bytes = key.as_bytes();
        for (len, paths) in self.lengths.iter() {
            let len = *len;
            // `len` is a char boundary when it is the end or a `/` follows (ASCII).
            let candidate = match bytes.get(len) {
                None if len == bytes.len() => key.get(..len),
                Some(b'/') => key.get(..len),
                _ => None,
            };
            if let Some(rule) = candidate.and_then(|prefix| paths.get(prefix)) {
                return Some(rule);
            }
        }
        self.default
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver() -> Resolver {
        Resolver::new(["rate_limit", "rate_limit/192.168.11.3", "api", "", "a/b/c", "x/"])
    }

    #[test]
    fn longest_prefix_cut_at_a_slash_wins() {
        let r = resolver();
        assert_eq!(r.resolve("rate_limit/10.0.0.1"), Some(0));
        assert_eq!(r.resolve("rate_limit/192.168.11.3"), Some(1));
        assert_eq!(r.resolve("rate_limit/192.168.11.3/x"), Some(1));
        assert_eq!(r.resolve("rate_limit/192.168.11.30"), Some(0));
        assert_eq!(r.resolve("rate_limit"), Some(0));
        assert_eq!(r.resolve("rate_limitX"), Some(3), "not cut at a slash: the default");
        assert_eq!(r.resolve("api"), Some(2));
        assert_eq!(r.resolve("a/b/c/d"), Some(4));
        assert_eq!(r.resolve("a/b"), Some(3));
        assert_eq!(r.resolve("x//y"), Some(5), "a path may end in a slash");
        assert_eq!(r.resolve(""), Some(3));
        assert_eq!(r.resolve("é/ü"), Some(3), "multi-byte keys never split a char");
    }

    #[test]
    fn many_paths_of_one_length_go_to_a_map() {
        let paths: Vec<String> = (0..100).map(|i| format!("ip/10.0.0.{i:03}")).collect();
        let r = Resolver::new(paths.iter().map(String::as_str).chain(["ip"]));
        assert_eq!(r.resolve("ip/10.0.0.042/x"), Some(42));
        assert_eq!(r.resolve("ip/10.0.0.420"), Some(100));
        assert_eq!(r.resolve("ip/10.0.0.04"), Some(100));
    }

    #[test]
    fn no_default_means_no_rule() {
        let r = Resolver::new(["api"]);
        assert_eq!(r.resolve("web/x"), None);
        assert_eq!(r.resolve("apix"), None);
        assert_eq!(r.resolve("api/x"), Some(0));
    }
}
