//! A byte filter over the exempt path prefixes, so that most paths skip the prefix match.

use alloc::string::String;

/// A quick test that rules most paths out of the exempt prefixes: a path can only start
/// with one of them if it is at least as long as the shortest and its second byte (after
/// the `/`) is one of theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExemptFilter {
    min_len: usize,
    second_bytes: [u64; 4],
}

impl ExemptFilter {
    pub(crate) fn new(prefixes: &[String]) -> Self {
        let mut filter = ExemptFilter {
            min_len: usize::MAX,
            second_bytes: [0; 4],
        };
        for prefix in prefixes {
            let bytes = prefix.as_bytes();
            filter.min_len = filter.min_len.min(bytes.len());
            match bytes.get(1) {
                Some(&b) => filter.second_bytes[usize::from(b >> 6)] |= 1 << (b & 63),
                // A prefix of one byte (or none) matches any second byte.
                None => filter.second_bytes = [u64::MAX; 4],
            }
        }
        filter
    }

    /// `false` when `path` starts with none of the prefixes; `true` when it may.
    #[inline]
    pub(crate) fn may_match(&self, path: &str) -> bool {
        let bytes = path.as_bytes();
        if bytes.len() < self.min_len {
            return false;
        }
        match bytes.get(1) {
            Some(&b) => self.second_bytes[usize::from(b >> 6)] & (1 << (b & 63)) != 0,
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ExemptFilter;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    #[test]
    fn the_exempt_filter_never_rules_out_a_matching_path() {
        let prefixes: Vec<String> = ["/readyz", "/livez", "/healthz", "/metrics", "/x"]
            .map(String::from)
            .to_vec();
        let filter = ExemptFilter::new(&prefixes);
        for path in [
            "/readyz",
            "/readyz/etcd",
            "/livez",
            "/healthzx",
            "/metrics",
            "/x",
            "/xyz",
        ] {
            assert!(filter.may_match(path), "{path}");
        }
        for path in ["/", "", "/api/v1/pods", "/sleep", "/watch", "/w"] {
            assert!(!filter.may_match(path), "{path}");
            assert!(
                !prefixes.iter().any(|p| path.starts_with(p.as_str())),
                "{path}"
            );
        }
        // A one-byte prefix matches every path that starts with it.
        let all = ExemptFilter::new(&["/".to_string()]);
        assert!(all.may_match("/") && all.may_match("/api"));
        // No prefixes: nothing is exempt.
        let none = ExemptFilter::new(&[]);
        assert!(!none.may_match("/readyz"));
    }
}
