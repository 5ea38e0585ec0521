//! Which of the operator's `HF_*` settings travel to the head's download: the ones that say how
//! to reach the Hub (`HF_ENDPOINT`, timeouts, Xet switches...). Not the token (it travels as a
//! secret of its own), not offline mode (the download is the one thing that must go online), and
//! not paths of the operator's machine (the cache is the node's).

use std::collections::BTreeMap;

/// Never forwarded: secrets, offline switches and local paths.
const KEPT_HOME: &[&str] = &[
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_TOKEN_PATH",
    "HF_HUB_OFFLINE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_ASSETS_CACHE",
    "HF_XET_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "HUGGINGFACE_ASSETS_CACHE",
];

/// The `HF_*` variables among `vars` that the head's download gets.
pub fn forwarded_hub_env(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.into_iter().filter(|(name, _)| name.starts_with("HF_") && !KEPT_HOME.contains(&name.as_str())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_travels_and_the_token_stays() {
        let vars = [
            ("HF_ENDPOINT", "http://127.0.0.1:9"),
            ("HF_HUB_DISABLE_XET", "1"),
            ("HF_TOKEN", "hf_secret"),
            ("HF_HOME", "/home/me/.hf"),
            ("HF_HUB_OFFLINE", "1"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let forwarded = forwarded_hub_env(vars);
        assert_eq!(forwarded.keys().collect::<Vec<_>>(), ["HF_ENDPOINT", "HF_HUB_DISABLE_XET"]);
    }
}
