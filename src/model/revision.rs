//! Revisions as the cache records them: a commit is 40 lowercase hex characters (the name of a
//! `snapshots/` folder and the whole content of a `refs/` file); a revision asked for is a branch,
//! a tag, `refs/pr/N` or a commit. Both are checked before they become paths.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest revision name accepted (git's own limit is the file system's).
const MAX_REVISION: usize = 255;

/// A commit of a Hub repository.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Commit(String);

impl Commit {
    /// Exactly 40 lowercase hex characters, as huggingface_hub's `REGEX_COMMIT_HASH`.
    pub fn parse(text: &str) -> Option<Commit> {
        (text.len() == 40 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .then(|| Commit(text.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 characters, for tables.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }
}

impl fmt::Display for Commit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Commit {
    type Error = String;

    fn try_from(text: String) -> std::result::Result<Commit, String> {
        Commit::parse(&text).ok_or_else(|| format!("{text:?} is not a 40-hex commit"))
    }
}

impl From<Commit> for String {
    fn from(commit: Commit) -> String {
        commit.0
    }
}

/// A revision asked for: a branch, a tag, `refs/pr/N`, or a commit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Revision(String);

impl Revision {
    /// `main`: what the Hub's client asks for when no revision is given.
    pub fn main() -> Revision {
        Revision("main".into())
    }

    /// A name whose `refs/NAME` stays inside `refs/`: `/`-separated parts of letters, digits,
    /// `.`, `_`, `-` and `+`, none empty, none `.` or `..`.
    pub fn parse(text: &str) -> Result<Revision> {
        let valid = !text.is_empty()
            && text.len() <= MAX_REVISION
            && text.split('/').all(|part| {
                !part.is_empty()
                    && part != "."
                    && part != ".."
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
            });
        if valid {
            Ok(Revision(text.to_string()))
        } else {
            Err(Error::Usage(format!(
                "--revision {text:?}: not a branch, tag or commit name. Fix: give a branch (main), a tag, refs/pr/N \
                 or a 40-hex commit"
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The commit itself, when the revision is one: the cache then keeps no ref for it.
    pub fn commit(&self) -> Option<Commit> {
        Commit::parse(&self.0)
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for Revision {
    type Error = Error;

    fn try_from(text: String) -> Result<Revision> {
        Revision::parse(&text)
    }
}

impl From<Revision> for String {
    fn from(revision: Revision) -> String {
        revision.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "c12a728b0b9a3d8c0a9e6a1d5b1f4e2c3d4e5f60";

    #[test]
    fn a_commit_is_forty_lowercase_hex() {
        assert_eq!(Commit::parse(COMMIT).unwrap().short(), "c12a728b0b9a");
        for bad in ["", "c12a728b", &COMMIT.to_uppercase(), &format!("{COMMIT}\n"), &format!("{}g", &COMMIT[..39])] {
            assert!(Commit::parse(bad).is_none(), "{bad:?}");
        }
        assert!(serde_json::from_str::<Commit>("\"main\"").is_err());
    }

    #[test]
    fn revisions_stay_inside_refs() {
        for good in ["main", "v1.0", "refs/pr/1", COMMIT, "release_2+x"] {
            assert_eq!(Revision::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", "../x", "a/../b", "/main", "main/", "a//b", "a b", ".", "a\0b", &"x".repeat(256)] {
            assert!(matches!(Revision::parse(bad), Err(Error::Usage(_))), "{bad:?}");
        }
        assert_eq!(Revision::parse(COMMIT).unwrap().commit().unwrap().as_str(), COMMIT);
        assert!(Revision::main().commit().is_none());
    }
}
