//! What vLLM reads from its own flags and environment that changes its memory, read as vLLM
//! reads it so the plan sizes what vLLM will do:
//! - integers like `--max-model-len 25.6k` (`human_readable_int` in `vllm/utils/argparse_utils.py`:
//!   `k m g t` ×1000ⁿ, decimals allowed, `int(float(number) × multiplier)`; `K M G T` ×1024ⁿ, whole
//!   numbers only; else Python's `int()`); `--max-model-len` also takes `-1` and `auto`
//!   (`human_readable_int_or_auto`: vLLM fits the context itself);
//! - `VLLM_PP_LAYER_PARTITION=a,b,...` (`get_pp_indices`: `int()` of each, one a stage);
//! - `VLLM_MLA_DISABLE` (`envs.py`: `bool(int(value))`).

use crate::error::{Error, Result};

/// `--max-model-len` as vLLM reads it: the tokens, or None when vLLM fits it itself (`-1`, `auto`).
pub fn max_model_len(text: &str) -> Result<Option<u64>> {
    let trimmed = text.trim();
    if trimmed == "-1" || trimmed.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    human_readable_int("--max-model-len", text).map(Some)
}

/// A positive integer flag (`--max-num-batched-tokens`) as vLLM's `human_readable_int` reads it.
pub fn human_readable_int(flag: &str, text: &str) -> Result<u64> {
    let refused = |why: &str| {
        Error::Usage(format!(
            "{flag} {text}: {why}. Fix: a whole number, or vLLM's forms: 32768, 32k (×1000), 25.6k, 32K (×1024), \
             up to t/T"
        ))
    };
    let value = text.trim();
    let suffix = value.chars().last().filter(|c| "kmgtKMGT".contains(*c));
    let value = match suffix {
        Some(suffix) => {
            let number = &value[..value.len() - 1];
            let power = "kmgt".find(suffix.to_ascii_lowercase()).map_or(1, |at| at as i32 + 1);
            if !decimal(number) {
                return Err(refused("not a number before its suffix"));
            }
            if suffix.is_ascii_lowercase() {
                // int(float(number) * 10**(3n)), in the same doubles as Python's.
                let product = number.parse::<f64>().map_err(|_| refused("not a number"))? * 1000f64.powi(power);
                if product.is_nan() || product >= u64::MAX as f64 {
                    return Err(refused("too large"));
                }
                product as u64
            } else {
                if number.contains('.') {
                    return Err(refused(&format!(
                        "vLLM allows no decimals with the binary suffix {suffix} (did you mean {number}{}?)",
                        suffix.to_ascii_lowercase()
                    )));
                }
                let whole: u64 = number.parse().map_err(|_| refused("too large"))?;
                whole.checked_mul(1u64 << (10 * power)).ok_or_else(|| refused("too large"))?
            }
        }
        None => python_int(value).ok_or_else(|| refused("not a whole number"))?,
    };
    if value == 0 {
        return Err(refused("vLLM needs at least 1"));
    }
    Ok(value)
}

/// `VLLM_PP_LAYER_PARTITION`: each stage's layers.
pub fn pp_layer_partition(text: &str) -> Result<Vec<u32>> {
    text.split(',')
        .map(|part| python_int(part).and_then(|n| u32::try_from(n).ok()))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(|| {
            Error::Usage(format!(
                "VLLM_PP_LAYER_PARTITION={text}: vLLM reads it as whole numbers separated by commas (\"Invalid \
                 partition string\"). Fix: each pipeline stage's layers, e.g. 31,30"
            ))
        })
}

/// `VLLM_MLA_DISABLE`: vLLM's `bool(int(value))`.
pub fn mla_disable(text: &str) -> Result<bool> {
    let value = text.trim();
    let number = python_int(value.strip_prefix('-').unwrap_or(value)).ok_or_else(|| {
        Error::Usage(format!(
            "VLLM_MLA_DISABLE={text}: vLLM reads it as an integer and fails to start on anything else. Fix: 1 to \
             serve latent attention as plain attention, 0 not to"
        ))
    })?;
    Ok(number != 0)
}

/// Digits with at most one `.` between digits (`25.6`).
fn decimal(text: &str) -> bool {
    let mut parts = text.split('.');
    let whole = parts.next().is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let fraction = parts.next().is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    whole && fraction && parts.next().is_none()
}

/// A non-negative integer as Python's `int()` reads one: surrounding spaces, a `+`, `_` between
/// digits.
fn python_int(text: &str) -> Option<u64> {
    let text = text.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    if text.is_empty() || text.starts_with('_') || text.ends_with('_') || text.contains("__") {
        return None;
    }
    let digits: String = text.chars().filter(|c| *c != '_').collect();
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_human_readable_int_reads_them() {
        let read = |text| human_readable_int("--max-model-len", text).ok();
        // Decimal suffixes: int(float(number) * 1000**n), decimals allowed.
        assert_eq!(read("32k"), Some(32_000));
        assert_eq!(read("25.6k"), Some(25_600), "25.6 * 1000 = 25600.000000000004, int() truncates");
        assert_eq!(read("1.5m"), Some(1_500_000));
        assert_eq!(read("2t"), Some(2_000_000_000_000));
        // Binary suffixes: int(number) * 1024**n, no decimals.
        assert_eq!(read("32K"), Some(32_768));
        assert_eq!(read("1T"), Some(1 << 40));
        assert_eq!(read(" 40960 "), Some(40_960));
        assert_eq!(read("40_960"), Some(40_960), "Python's int() takes underscores");
        let decimal_binary = human_readable_int("--max-model-len", "25.6K").expect_err("vLLM refuses it");
        assert!(decimal_binary.to_string().contains("did you mean 25.6k"), "{decimal_binary}");
        for refused in ["", "k", "1.k", "1e3", "0", "-5", "99999999999999999999", "20000000000000T", "3x"] {
            assert_eq!(read(refused), None, "{refused}");
        }
        assert_eq!(max_model_len("-1").expect("vLLM decides"), None);
        assert_eq!(max_model_len("auto").expect("vLLM decides"), None);
        assert_eq!(max_model_len("8k").expect("8000"), Some(8_000));
    }

    #[test]
    fn the_environment_as_vllm_reads_it() {
        assert_eq!(pp_layer_partition("31,30").expect("two stages"), vec![31, 30]);
        assert_eq!(pp_layer_partition(" 20, 21 ,20").expect("three"), vec![20, 21, 20]);
        assert!(pp_layer_partition("31;30").is_err() && pp_layer_partition("31,-1").is_err());
        assert!(mla_disable("1").expect("on") && !mla_disable("0").expect("off") && mla_disable(" 2 ").expect("on"));
        let error = mla_disable("true").expect_err("vLLM's int() fails on it");
        assert!(error.to_string().contains("Fix: 1"), "{error}");
    }
}
