//! What every level of a `bench --json` report served.

use serde_json::Value;

/// Every level of `report`'s result completed `requests` requests and `tokens` output tokens.
pub fn assert_every_level_served(report: &Value, requests: u64, tokens: u64) {
    for level in report["result"]["levels"].as_array().expect("levels") {
        assert_eq!(
            (level["figures"]["completed"].as_u64(), level["figures"]["total_output_tokens"].as_u64()),
            (Some(requests), Some(tokens)),
            "{level}"
        );
    }
}
