//! The operator's own arguments for the engine (the words after `--` of `launch`, `cluster
//! launch`, `plan`), read once at the door into [`EngineArgs`]: the engine gets the words as given,
//! and every reader (the plan's fit, the name it serves, the flags the launch adds or leaves to the
//! operator, a relaunch's revision) asks it about a [`Flag`] by every spelling the engine takes.

use serde::{Deserialize, Serialize};

/// One flag of an engine, by every spelling it takes (`-c` and `--ctx-size`); each is also read
/// joined to its value (`--ctx-size=4096`). The first spelling is the one the launch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flag {
    spellings: &'static [&'static str],
}

impl Flag {
    pub const fn new(spellings: &'static [&'static str]) -> Flag {
        Flag { spellings }
    }

    pub fn spellings(self) -> &'static [&'static str] {
        self.spellings
    }

    /// The spelling the launch writes when it adds the flag itself.
    pub fn name(self) -> &'static str {
        self.spellings.first().copied().unwrap_or_default()
    }

    /// `word` with this flag's spelling `spelling` joined to its value (`--flag=VALUE`).
    fn joined<'a>(spelling: &str, word: &'a str) -> Option<&'a str> {
        word.strip_prefix(spelling).and_then(|rest| rest.strip_prefix('='))
    }

    /// Whether `word` is this flag, alone or joined to its value.
    fn is(self, word: &str) -> bool {
        self.spellings.iter().any(|spelling| word == *spelling || Flag::joined(spelling, word).is_some())
    }
}

/// The Hub revision the operator asks for (vLLM's `--revision`): the launch reads the model at it,
/// whatever the engine.
pub const REVISION: Flag = Flag::new(&["--revision"]);

/// The engine's own arguments, as the operator gave them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EngineArgs(Vec<String>);

impl EngineArgs {
    pub fn new(words: Vec<String>) -> EngineArgs {
        EngineArgs(words)
    }

    /// The words as given, for the engine's command line.
    pub fn words(&self) -> &[String] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The spelling `flag` is given by and its value (`--flag VALUE` or `--flag=VALUE`): its first
    /// spelling given, in the flag's order; None when no spelling is given with a value.
    pub fn given(&self, flag: Flag) -> Option<(&'static str, &str)> {
        flag.spellings.iter().find_map(|spelling| self.value_of(spelling).map(|value| (*spelling, value)))
    }

    /// The value `flag` is given (see [`EngineArgs::given`]).
    pub fn value(&self, flag: Flag) -> Option<&str> {
        self.given(flag).map(|(_, value)| value)
    }

    /// Whether `flag` is given by any spelling, with its value or alone (`--metrics`).
    pub fn gives(&self, flag: Flag) -> bool {
        self.0.iter().any(|word| flag.is(word))
    }

    /// These arguments without the flags `dropped`, by any spelling, and their values (a word after
    /// a flag is its value unless it is a flag itself; a negative number is a value).
    pub fn without(&self, dropped: &[Flag]) -> EngineArgs {
        let is_flag = |word: &String| word.starts_with('-') && word.parse::<f64>().is_err();
        let mut kept = Vec::new();
        let mut words = self.0.iter().peekable();
        while let Some(word) = words.next() {
            let joined = word.contains('=');
            let value = if joined { None } else { words.next_if(|next| !is_flag(next)) };
            if !dropped.iter().any(|flag| flag.is(word)) {
                kept.push(word.clone());
                kept.extend(value.cloned());
            }
        }
        EngineArgs(kept)
    }

    /// These arguments with `flag` (as the launch writes it) and `value` after them.
    pub fn with(mut self, flag: Flag, value: &str) -> EngineArgs {
        self.0.extend([flag.name().to_string(), value.to_string()]);
        self
    }

    pub fn into_words(self) -> Vec<String> {
        self.0
    }

    /// The value after `spelling`, given apart or joined.
    fn value_of(&self, spelling: &str) -> Option<&str> {
        let mut words = self.0.iter();
        while let Some(word) = words.next() {
            if word == spelling {
                return words.next().map(String::as_str);
            }
            if let Some(value) = Flag::joined(spelling, word) {
                return Some(value);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> EngineArgs {
        EngineArgs::new(words.iter().map(|word| word.to_string()).collect())
    }

    const CTX_SIZE: Flag = Flag::new(&["-c", "--ctx-size"]);

    #[test]
    fn values_in_both_spellings() {
        assert_eq!(args(&["--revision", "v1"]).value(REVISION), Some("v1"));
        let named = Flag::new(&["--served-model-name"]);
        assert_eq!(args(&["--max-model-len", "8", "--served-model-name=x"]).value(named), Some("x"));
        assert_eq!(args(&["--revisions=x"]).value(REVISION), None);
        assert_eq!(args(&["--revision"]).value(REVISION), None);
    }

    #[test]
    fn a_flag_by_its_short_and_long_spellings() {
        assert_eq!(args(&["--ctx-size=4096"]).given(CTX_SIZE), Some(("--ctx-size", "4096")));
        assert_eq!(args(&["-c", "8192", "--ctx-size", "4096"]).given(CTX_SIZE), Some(("-c", "8192")));
        assert!(args(&["--threads", "1", "-c=4096"]).gives(CTX_SIZE));
        assert!(args(&["--metrics"]).gives(Flag::new(&["--metrics"])));
        assert!(!args(&["-ctk", "q8_0", "--ctx-sizes=1"]).gives(CTX_SIZE));
    }

    #[test]
    fn without_drops_every_spelling_and_its_value() {
        let given = args(&["-c", "4096", "--device", "RPC0", "--revision=v1", "--main-gpu", "-1", "--no-mmap"]);
        let dropped = given.without(&[CTX_SIZE, REVISION, Flag::new(&["--main-gpu"])]);
        assert_eq!(dropped.words(), ["--device", "RPC0", "--no-mmap"]);
        assert_eq!(args(&["--ctx-size", "--no-mmap"]).without(&[CTX_SIZE]).words(), ["--no-mmap"]);
    }
}
