//! The secrets commands take: from a file when given, else from the environment; never from the
//! command line (an argv is visible to every user of the machine).

use std::path::Path;

use crate::error::{Error, Result};
use crate::secret::Secret;

/// `--hf-token-file FILE`, else `HF_TOKEN` from the environment.
pub(super) fn hf_token(file: Option<&Path>) -> Result<Option<Secret>> {
    secret_from("the token", file, "HF_TOKEN")
}

/// The endpoint's API key: `--api-key-file FILE`, else `STRIX_API_KEY` from the environment.
pub(super) fn api_key(file: Option<&Path>) -> Result<Option<Secret>> {
    secret_from("the API key", file, "STRIX_API_KEY")
}

/// A secret from `file` when given, else from the variable `env`.
fn secret_from(what: &str, file: Option<&Path>, env: &str) -> Result<Option<Secret>> {
    let secret = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
            let secret = text.trim().to_string();
            if secret.is_empty() {
                return Err(Error::Usage(format!("{} holds no {}", path.display(), what.trim_start_matches("the "))));
            }
            Some(secret)
        }
        None => std::env::var(env).ok().map(|value| value.trim().to_string()).filter(|value| !value.is_empty()),
    };
    Ok(secret.map(Secret::new))
}
