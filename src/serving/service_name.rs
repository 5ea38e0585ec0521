//! A service's name: the model id its clients send (`"model": NAME`) and the key of everything
//! about it on every node: its record, its logs, its route, its stop. Any text an OpenAI client
//! may send as a model id is a name (`Qwen/Qwen3-32B`, `tiny.gguf`), within bounds: 1 to 128
//! characters, no control character, not starting with `-` (it would read as a flag). On disk a
//! name is written file-safe and reversibly: every byte outside `[A-Za-z0-9._-]` as `%XX`
//! (`Qwen/Qwen3-32B` → `Qwen%2FQwen3-32B`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

/// The most characters a name has.
pub const MAX_CHARS: usize = 128;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceName(String);

impl ServiceName {
    /// `name` when it is one; else a usage error saying why.
    pub fn parse(name: &str) -> Result<ServiceName> {
        let why = if name.is_empty() {
            Some("it is empty".to_string())
        } else if name.chars().count() > MAX_CHARS {
            Some(format!("it is longer than {MAX_CHARS} characters"))
        } else if name.chars().any(char::is_control) {
            Some("it has a control character".to_string())
        } else if name.starts_with('-') {
            Some("it starts with '-'".to_string())
        } else {
            None
        };
        match why {
            None => Ok(ServiceName(name.to_string())),
            Some(why) => Err(Error::Usage(format!(
                "{name:?} cannot name a service ({why}). Fix: give `--name NAME` (1 to {MAX_CHARS} characters, no \
                 control character, not starting with '-')"
            ))),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// As a file's name: each byte outside `[A-Za-z0-9._-]` as `%XX`.
    pub fn file_safe(&self) -> String {
        let mut safe = String::with_capacity(self.0.len());
        for byte in self.0.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
                safe.push(char::from(byte));
            } else {
                safe.push_str(&format!("%{byte:02X}"));
            }
        }
        safe
    }

    /// The name a file-safe spelling stands for, if it is one.
    pub fn from_file_safe(safe: &str) -> Option<ServiceName> {
        ServiceName::parse(&percent_decoded(safe)?).ok()
    }
}

/// `%XX` sequences decoded (a file's or a path's name); None when that is not UTF-8 or a `%` is
/// not followed by two hex digits.
pub fn percent_decoded(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut rest = text.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = tail.get(2..)?;
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

impl fmt::Display for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for ServiceName {
    type Err = Error;

    fn from_str(name: &str) -> Result<ServiceName> {
        ServiceName::parse(name)
    }
}

impl Serialize for ServiceName {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ServiceName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<ServiceName, D::Error> {
        let name = String::deserialize(deserializer)?;
        ServiceName::parse(&name).map_err(|error| serde::de::Error::custom(error.to_string()))
    }
}

/// The one service of `names` a command means when it was given none: the only one; none when
/// there is none; a usage error listing them when there are several (`command` says what to give).
pub fn the_only_one<'a>(names: &[&'a str], command: &str) -> Result<Option<&'a str>> {
    match names {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        several => Err(Error::Usage(format!(
            "the cluster serves {} services ({}): say which. Fix: `{command}`",
            several.len(),
            several.join(", ")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_a_client_may_send_within_bounds() {
        for good in ["Qwen/Qwen3-32B", "tiny.gguf", "a", "café", "/models/tiny.gguf", &"x".repeat(MAX_CHARS)] {
            assert_eq!(ServiceName::parse(good).unwrap().as_str(), good);
        }
        for bad in ["", "-rf", "a\nb", "tab\there", &"x".repeat(MAX_CHARS + 1)] {
            let error = ServiceName::parse(bad).unwrap_err();
            assert!(matches!(error, Error::Usage(_)), "{bad:?}: {error}");
            assert!(error.to_string().contains("--name"), "{error}");
        }
        assert!(serde_json::from_str::<ServiceName>("\"-x\"").is_err());
        assert_eq!(serde_json::to_string(&ServiceName::parse("a/b").unwrap()).unwrap(), "\"a/b\"");
    }

    #[test]
    fn a_file_safe_name_reads_back_as_itself() {
        let cases = [
            ("Qwen/Qwen3-32B", "Qwen%2FQwen3-32B"),
            ("tiny.gguf", "tiny.gguf"),
            ("100%", "100%25"),
            ("café", "caf%C3%A9"),
            ("/m/a b", "%2Fm%2Fa%20b"),
        ];
        for (name, safe) in cases {
            let name = ServiceName::parse(name).unwrap();
            assert_eq!(name.file_safe(), safe);
            assert_eq!(ServiceName::from_file_safe(safe), Some(name));
        }
        for not_one in ["%", "%2", "%zz", "%ff", "%2D"] {
            assert_eq!(ServiceName::from_file_safe(not_one), None, "{not_one}");
        }
    }

    #[test]
    fn a_command_without_a_name_means_the_only_service() {
        assert_eq!(the_only_one(&[], "cluster stop NAME").unwrap(), None);
        assert_eq!(the_only_one(&["a"], "cluster stop NAME").unwrap(), Some("a"));
        let several = the_only_one(&["a", "b"], "cluster stop NAME").unwrap_err().to_string();
        assert!(several.contains("a, b") && several.contains("cluster stop NAME"), "{several}");
    }
    #[test]
    fn percent_escapes_are_decoded_and_a_broken_one_is_none() {
        assert_eq!(percent_decoded("Qwen%2FQwen3-8B").as_deref(), Some("Qwen/Qwen3-8B"));
        assert_eq!(percent_decoded("Qwen/Qwen3-8B").as_deref(), Some("Qwen/Qwen3-8B"));
        assert_eq!(percent_decoded("caf%C3%A9").as_deref(), Some("café"));
        for bad in ["%", "%2", "%zz", "%ff", "a%é"] {
            assert_eq!(percent_decoded(bad), None, "{bad}");
        }
    }
}
