//! Which GGUF file(s) of a Hub repository a llama.cpp launch serves, chosen from the repository's
//! file list the way `llama-server -hf REPO:QUANT` chooses (llama.cpp's `common/download.cpp`,
//! `find_best_model` and `get_split_files`): the quant matched case-insensitively in the path,
//! followed by `.` or `-`; projectors, imatrix and draft files are never the model; a split model
//! is all its parts, named by the first. Unlike llama.cpp, which takes the first match, two
//! different models matching is an error that lists them: the operator says which.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How the operator named the GGUF in a Hub repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", content = "value", rename_all = "lowercase")]
pub enum GgufPick {
    /// `REPO:QUANT` (`unsloth/Qwen3-235B-A22B-GGUF:Q4_K_M`).
    Quant(String),
    /// `--file NAME.gguf`: a path in the repository.
    File(String),
    /// The repository's only model GGUF.
    Only,
}

impl std::fmt::Display for GgufPick {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GgufPick::Quant(quant) => write!(f, "quant {quant}"),
            GgufPick::File(file) => write!(f, "file {file}"),
            GgufPick::Only => f.write_str("its only GGUF"),
        }
    }
}

/// The files of `repo` (its paths, as the Hub lists them) that `pick` names: the model's first
/// part first, then the other parts of a split model in order.
pub fn pick_gguf(repo: &str, files: &[String], pick: &GgufPick) -> Result<Vec<String>> {
    let models: Vec<&String> = files.iter().filter(|path| is_model(path)).collect();
    let firsts: Vec<&String> =
        models.iter().copied().filter(|path| split_of(path).is_none_or(|s| s.index == 1)).collect();
    let chosen: Vec<&String> = match pick {
        GgufPick::File(name) => {
            let Some(found) = files.iter().find(|path| *path == name) else {
                return Err(no_match(repo, files, &format!("no file {name}")));
            };
            if let Some(split) = split_of(found).filter(|split| split.index != 1) {
                return Err(no_match(
                    repo,
                    files,
                    &format!("{name} is part {} of a split model: name its first part", split.index),
                ));
            }
            vec![found]
        }
        GgufPick::Quant(quant) => firsts.into_iter().filter(|path| names_quant(path, quant)).collect(),
        GgufPick::Only => firsts,
    };
    match chosen.as_slice() {
        [first] => Ok(parts_of(first, files)),
        [] => Err(no_match(repo, files, &format!("no GGUF model matches {pick}"))),
        several => {
            let names: Vec<&str> = several.iter().map(|path| path.as_str()).collect();
            Err(no_match(repo, files, &format!("{pick} names {} models ({})", names.len(), names.join(", "))))
        }
    }
}

/// Every file of a GGUF model given by its path: a split model (`NAME-00001-of-00003.gguf`) is
/// all its parts, named by the first (llama.cpp's `llama_split_path` naming); anything else is
/// itself.
pub fn gguf_parts(path: &str) -> Result<Vec<String>> {
    let Some(split) = split_of(path) else { return Ok(vec![path.to_string()]) };
    let (index, count) = (split.index, split.count);
    if count == 0 || index == 0 || index > count {
        return Err(Error::Usage(format!("{path}: part {index} of {count} is not a part of a split GGUF model")));
    }
    let part = |n: u32| format!("{}-{n:05}-of-{count:05}.gguf", split.prefix);
    if index != 1 {
        return Err(Error::Usage(format!(
            "{path} is part {index} of a split model: llama-server takes the first part, {}",
            part(1)
        )));
    }
    Ok((1..=count).map(part).collect())
}

/// `QUANT` followed by `.` or `-` anywhere in the path, case-insensitively (llama.cpp's
/// `QUANT[.-]` pattern, the quant taken literally).
fn names_quant(path: &str, quant: &str) -> bool {
    let (path, quant) = (path.to_ascii_uppercase(), quant.to_ascii_uppercase());
    !quant.is_empty()
        && path.match_indices(&quant).any(|(at, _)| matches!(path.as_bytes().get(at + quant.len()), Some(b'.' | b'-')))
}

/// A GGUF that is a model, not a projector, an imatrix or a draft model's file.
fn is_model(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.ends_with(".gguf")
        && !["mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-"].iter().any(|w| name.contains(w))
}

/// A part of a split model: `PREFIX-00002-of-00003.gguf`.
struct Split<'a> {
    prefix: &'a str,
    index: u32,
    count: u32,
}

/// The split naming llama.cpp reads: five digits each, the prefix with its directories.
fn split_of(path: &str) -> Option<Split<'_>> {
    let rest = path.strip_suffix(".gguf")?;
    let (rest, count) = rest.rsplit_once("-of-")?;
    let (prefix, index) = rest.rsplit_once('-')?;
    let five = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if prefix.is_empty() || !five(index) || !five(count) {
        return None;
    }
    Some(Split { prefix, index: index.parse().ok()?, count: count.parse().ok()? })
}

/// `first` and, when it is the first part of a split model, every other part the repo has, in order.
fn parts_of(first: &str, files: &[String]) -> Vec<String> {
    let Some(split) = split_of(first).filter(|split| split.count > 1) else { return vec![first.to_string()] };
    let mut parts: Vec<(u32, String)> = files
        .iter()
        .filter_map(|path| {
            let other = split_of(path)?;
            (other.prefix == split.prefix && other.count == split.count).then(|| (other.index, path.clone()))
        })
        .collect();
    parts.sort();
    parts.into_iter().map(|(_, path)| path).collect()
}

/// Nothing (or more than one model) matched: the repository's GGUF files, so the operator can say.
fn no_match(repo: &str, files: &[String], why: &str) -> Error {
    let ggufs: Vec<&str> = files.iter().filter(|path| path.ends_with(".gguf")).map(String::as_str).collect();
    let listed = if ggufs.is_empty() { "none".to_string() } else { ggufs.join(", ") };
    Error::Usage(format!(
        "{repo}: {why}. Its GGUF files: {listed}. Fix: name one as {repo}:QUANT (the quant in its name, as \
         `llama-server -hf` takes it) or with --file PATH"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(paths: &[&str]) -> Vec<String> {
        paths.iter().map(|p| p.to_string()).collect()
    }

    fn repo() -> Vec<String> {
        files(&[
            "README.md",
            "tiny-Q8_0.gguf",
            "tiny-q4_k_m.gguf",
            "tiny-UD-Q4_K_XL.gguf",
            "mmproj-tiny-Q8_0.gguf",
            "BF16/tiny-BF16-00002-of-00002.gguf",
            "BF16/tiny-BF16-00001-of-00002.gguf",
            "Q2_K/tiny-Q2_K-00001-of-00003.gguf",
            "Q2_K/tiny-Q2_K-00002-of-00003.gguf",
            "Q2_K/tiny-Q2_K-00003-of-00003.gguf",
        ])
    }

    fn quant(q: &str) -> GgufPick {
        GgufPick::Quant(q.into())
    }

    #[test]
    fn a_quant_names_its_file_case_insensitively_and_never_a_projector() {
        assert_eq!(pick_gguf("o/r", &repo(), &quant("Q8_0")).unwrap(), ["tiny-Q8_0.gguf"]);
        assert_eq!(pick_gguf("o/r", &repo(), &quant("Q4_K_M")).unwrap(), ["tiny-q4_k_m.gguf"]);
        assert_eq!(pick_gguf("o/r", &repo(), &quant("ud-q4_k_xl")).unwrap(), ["tiny-UD-Q4_K_XL.gguf"]);
    }

    #[test]
    fn a_split_quant_is_every_part_in_order_even_in_a_subdirectory() {
        assert_eq!(
            pick_gguf("o/r", &repo(), &quant("bf16")).unwrap(),
            ["BF16/tiny-BF16-00001-of-00002.gguf", "BF16/tiny-BF16-00002-of-00002.gguf"]
        );
        // `Q2_K/` is followed by `/`, not `.` or `-`: the file name's `-Q2_K-` is what matches.
        assert_eq!(pick_gguf("o/r", &repo(), &quant("Q2_K")).unwrap().len(), 3);
    }

    #[test]
    fn a_quant_matching_nothing_or_two_models_lists_the_gguf_files() {
        let none = pick_gguf("o/r", &repo(), &quant("Q6_K")).unwrap_err().to_string();
        assert!(none.contains("no GGUF model matches quant Q6_K") && none.contains("tiny-Q8_0.gguf"), "{none}");
        assert!(!none.contains("README"), "{none}");
        // `Q4_K` is followed by `_` in both Q4_K files: no match, not a prefix match.
        assert!(pick_gguf("o/r", &repo(), &quant("Q4_K")).is_err());
        let two = files(&["a-Q4_K_M.gguf", "b-Q4_K_M.gguf"]);
        let said = pick_gguf("o/r", &two, &quant("q4_k_m")).unwrap_err().to_string();
        assert!(said.contains("names 2 models (a-Q4_K_M.gguf, b-Q4_K_M.gguf)"), "{said}");
        assert!(pick_gguf("o/r", &repo(), &quant("")).is_err());
    }

    #[test]
    fn a_file_is_taken_as_named_with_its_parts() {
        assert_eq!(pick_gguf("o/r", &repo(), &GgufPick::File("tiny-Q8_0.gguf".into())).unwrap(), ["tiny-Q8_0.gguf"]);
        let split = pick_gguf("o/r", &repo(), &GgufPick::File("BF16/tiny-BF16-00001-of-00002.gguf".into())).unwrap();
        assert_eq!(split.len(), 2);
        let later = GgufPick::File("BF16/tiny-BF16-00002-of-00002.gguf".into());
        assert!(pick_gguf("o/r", &repo(), &later).unwrap_err().to_string().contains("part 2"));
        assert!(pick_gguf("o/r", &repo(), &GgufPick::File("x.gguf".into()))
            .unwrap_err()
            .to_string()
            .contains("no file"));
    }

    #[test]
    fn a_split_model_by_its_path_is_all_its_parts_named_by_the_first() {
        assert_eq!(gguf_parts("/m/x.gguf").unwrap(), ["/m/x.gguf"]);
        assert_eq!(
            gguf_parts("/m/Q-A22B-Q4_K_M-00001-of-00003.gguf").unwrap(),
            [
                "/m/Q-A22B-Q4_K_M-00001-of-00003.gguf",
                "/m/Q-A22B-Q4_K_M-00002-of-00003.gguf",
                "/m/Q-A22B-Q4_K_M-00003-of-00003.gguf"
            ]
        );
        let later = gguf_parts("/m/q-00002-of-00003.gguf").unwrap_err().to_string();
        assert!(later.contains("q-00001-of-00003.gguf"), "{later}");
        assert!(gguf_parts("/m/q-00004-of-00003.gguf").is_err());
        assert!(gguf_parts("/m/q-00000-of-00003.gguf").is_err());
        assert_eq!(gguf_parts("/m/q-1-of-00003.gguf").unwrap(), ["/m/q-1-of-00003.gguf"], "not the split naming");
    }

    #[test]
    fn without_a_quant_only_a_single_model_will_do() {
        let one = files(&["README.md", "mmproj-F16.gguf", "m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]);
        assert_eq!(pick_gguf("o/r", &one, &GgufPick::Only).unwrap().len(), 2);
        let said = pick_gguf("o/r", &repo(), &GgufPick::Only).unwrap_err().to_string();
        assert!(said.contains("its only GGUF names 5 models"), "{said}");
        assert!(pick_gguf("o/r", &files(&["config.json"]), &GgufPick::Only).unwrap_err().to_string().contains("none"));
    }
}
