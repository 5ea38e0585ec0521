//! Images by name: references (one parser for every way an image is named) and digests as people
//! read them.

pub mod reference;

/// A digest or an id as people read it: without `sha256:`, at most 12 characters (cut on a
/// character boundary: ids from labels are untrusted text).
pub fn short_digest(digest: &str) -> &str {
    let digest = digest.strip_prefix("sha256:").unwrap_or(digest);
    digest.char_indices().nth(12).map_or(digest, |(end, _)| &digest[..end])
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_digests_drop_the_algorithm_and_keep_twelve_characters() {
        assert_eq!(super::short_digest("sha256:0123456789abcdef"), "0123456789ab");
        assert_eq!(super::short_digest("abc"), "abc");
        assert_eq!(super::short_digest("ééééééééééééé"), "éééééééééééé");
    }
}
