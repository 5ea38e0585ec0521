//! A Hub repository id (`org/name`, or `name`), validated as huggingface_hub's `validate_repo_id`
//! does before anything touches the Hub or a disk: the same rule also rules out every path
//! trick (`..`, `/`, leading dots), since the id becomes a folder name in the cache.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The longest name (and namespace) the Hub accepts.
const MAX_PART: usize = 96;

/// A valid model repository id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RepoId(String);

impl RepoId {
    /// `text` when huggingface_hub would accept it as a repo id: at most one `/`; each part of
    /// word characters, `-` and `.`, starting and ending with a word character; no `--`, no
    /// `..`, no `.git` at the end.
    pub fn parse(text: &str) -> Result<RepoId> {
        let bad = |why: &str| {
            Error::Usage(format!(
                "{text:?} is not a Hugging Face model id ({why}). Fix: give it as `org/name` (as on the Hub), or a path \
                 inside the toolbox starting with / or ./"
            ))
        };
        if text.matches('/').count() > 1 {
            return Err(bad("more than one '/'"));
        }
        if text.contains("--") || text.contains("..") {
            return Err(bad("'--' and '..' are not allowed"));
        }
        if text.ends_with(".git") {
            return Err(bad("it ends with .git"));
        }
        for part in text.split('/') {
            if part.is_empty() || part.len() > MAX_PART {
                return Err(bad("each part has 1 to 96 characters"));
            }
            if !part.chars().all(|c| is_word(c) || c == '-' || c == '.') {
                return Err(bad("only letters, digits, '_', '-' and '.'"));
            }
            let (first, last) = (part.chars().next(), part.chars().last());
            if !first.is_some_and(is_word) || !last.is_some_and(is_word) {
                return Err(bad("each part starts and ends with a letter, digit or '_'"));
            }
        }
        Ok(RepoId(text.to_string()))
    }

    /// Whether `model` names a Hub repository rather than a path (`/models/x`, `./x`).
    pub fn looks_like(model: &str) -> bool {
        RepoId::parse(model).is_ok()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its folder in the cache: `models--org--name` (`file_download.repo_folder_name`).
    pub fn folder_name(&self) -> String {
        let mut name = String::from("models");
        for part in self.0.split('/') {
            name.push_str("--");
            name.push_str(part);
        }
        name
    }

    /// The id a cache folder stands for (`models--org--name` → `org/name`); None for anything
    /// else (datasets, spaces, foreign files).
    pub fn from_folder_name(folder: &str) -> Option<RepoId> {
        let rest = folder.strip_prefix("models--")?;
        RepoId::parse(&rest.replacen("--", "/", 1)).ok()
    }
}

/// `\w` of an ASCII id: the Hub's ids are ASCII.
fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl fmt::Display for RepoId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for RepoId {
    type Error = Error;

    fn try_from(text: String) -> Result<RepoId> {
        RepoId::parse(&text)
    }
}

impl From<RepoId> for String {
    fn from(id: RepoId) -> String {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids_pass_and_paths_do_not() {
        for good in ["gpt2", "acme/tiny", "Qwen/Qwen2.5-0.5B-Instruct", "a/b", "org_1/m.v2-x"] {
            assert_eq!(RepoId::parse(good).unwrap().as_str(), good);
            assert!(RepoId::looks_like(good));
        }
        for bad in [
            "",
            "/models/x",
            "./x",
            "../x",
            "a/b/c",
            "a--b/c",
            "a/b..c",
            "-a/b",
            "a/b-",
            ".a/b",
            "a/.b",
            "a/b.git",
            "a b/c",
            "a/",
            "/a",
            "~/x",
            "a/b\0",
            "ä/b",
        ] {
            let error = RepoId::parse(bad).unwrap_err();
            assert!(matches!(error, Error::Usage(_)), "{bad:?}: {error}");
            assert!(!RepoId::looks_like(bad), "{bad:?}");
        }
        assert!(RepoId::parse(&"a".repeat(96)).is_ok());
        assert!(RepoId::parse(&"a".repeat(97)).is_err());
    }

    #[test]
    fn the_cache_folder_is_the_hubs_and_reads_back() {
        let id = RepoId::parse("acme/tiny").unwrap();
        assert_eq!(id.folder_name(), "models--acme--tiny");
        assert_eq!(RepoId::from_folder_name("models--acme--tiny"), Some(id));
        assert_eq!(RepoId::parse("gpt2").unwrap().folder_name(), "models--gpt2");
        assert_eq!(RepoId::from_folder_name("models--gpt2").unwrap().as_str(), "gpt2");
        for foreign in ["datasets--a--b", ".locks", "CACHEDIR.TAG", "models--a--b--c", "models--"] {
            assert_eq!(RepoId::from_folder_name(foreign), None, "{foreign}");
        }
    }

    #[test]
    fn it_travels_as_a_string_and_is_checked_on_arrival() {
        let id = RepoId::parse("acme/tiny").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"acme/tiny\"");
        assert!(serde_json::from_str::<RepoId>("\"../../etc\"").is_err());
    }
}
