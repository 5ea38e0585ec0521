//! One bench run as it is kept: what decided it (the key), when, against which endpoint, each
//! concurrency level's figures, and whether it was accepted. A canary that rejects a new image
//! keeps its result too, marked rejected with the reason, so history shows it, but only accepted
//! results become what later runs are held against.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::key::BenchKey;
use super::load::LevelResult;

/// The format of a kept result; a reader refuses a newer one rather than misread it.
pub const RESULT_FORMAT: u32 = 1;

/// Hex digits of a result's id.
const ID_LEN: usize = 8;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    pub format: u32,
    /// A short id (`bench compare A B` names results by it, or any unique prefix of it).
    pub id: String,
    /// When it ran (RFC 3339, UTC).
    pub taken_at: String,
    pub key: BenchKey,
    /// `http://HOST:PORT/v1`.
    pub endpoint: String,
    /// The model as the server names it.
    pub served_model: String,
    /// Requests per level.
    pub requests: u32,
    pub levels: Vec<LevelResult>,
    pub verdict: Acceptance,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Acceptance {
    Accepted,
    Rejected { reason: String },
}

impl BenchResult {
    /// A new result, accepted until something rejects it; its id is made from what it holds.
    pub fn new(
        key: BenchKey,
        endpoint: &str,
        served_model: &str,
        requests: u32,
        levels: Vec<LevelResult>,
        at: DateTime<Utc>,
    ) -> BenchResult {
        let taken_at = at.to_rfc3339_opts(SecondsFormat::Millis, true);
        let mut result = BenchResult {
            format: RESULT_FORMAT,
            id: String::new(),
            taken_at,
            key,
            endpoint: endpoint.to_string(),
            served_model: served_model.to_string(),
            requests,
            levels,
            verdict: Acceptance::Accepted,
        };
        let content = serde_json::to_vec(&result).unwrap_or_default();
        let digest = Sha256::digest(content);
        result.id = digest.iter().map(|byte| format!("{byte:02x}")).collect::<String>()[..ID_LEN].to_string();
        result
    }

    pub fn accepted(&self) -> bool {
        self.verdict == Acceptance::Accepted
    }

    pub fn level(&self, concurrency: u32) -> Option<&LevelResult> {
        self.levels.iter().find(|level| level.concurrency == concurrency)
    }

    /// How a plot's legend names it: `1a2b3c4d · image 0123abcd · Qwen/Qwen3-32B@0123456789ab ·
    /// TP2 PP1 on 2 nodes over RoCE` (the model, the layout and the transport tell apart results
    /// of one image).
    pub fn label(&self) -> String {
        let key = &self.key;
        format!("{} · image {} · {} · {}", self.id, key.short_image(), key.model, key.layout())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bench::figures::Figures;
    use crate::bench::key::{LinkTransport, ModelIdentity};

    pub fn key(image: &str) -> BenchKey {
        BenchKey {
            image: image.into(),
            engine: crate::serving::llama::LLAMA_CPP,
            model: ModelIdentity::Gguf { name: "tiny.gguf".into(), sha256: "ab".repeat(32) },
            tensor_parallel: 1,
            pipeline_parallel: 1,
            nodes: 1,
            transport: LinkTransport::Local,
            input_len: 32,
            output_len: 16,
            prompts: crate::bench::prompt::PromptForm::Text,
        }
    }

    pub fn level(concurrency: u32, output_throughput: f64) -> LevelResult {
        let mut figures = Figures { completed: 4, output_throughput, ..Figures::default() };
        figures.ttft_ms.p50 = 10.0 * concurrency as f64;
        figures.ttft_ms.p90 = 15.0 * concurrency as f64;
        figures.ttft_ms.p99 = 20.0 * concurrency as f64;
        LevelResult { concurrency, requests: 4, figures, errors: vec![] }
    }

    pub fn result(image: &str, at: &str, throughputs: &[(u32, f64)]) -> BenchResult {
        let at = DateTime::parse_from_rfc3339(at).unwrap().with_timezone(&Utc);
        let levels = throughputs.iter().map(|&(concurrency, throughput)| level(concurrency, throughput)).collect();
        BenchResult::new(key(image), "http://127.0.0.1:8080/v1", "tiny", 4, levels, at)
    }

    #[test]
    fn ids_are_short_hex_and_differ_with_content() {
        let a = result("sha256:aa", "2026-11-24T10:00:00Z", &[(1, 10.0)]);
        let b = result("sha256:aa", "2026-11-24T10:00:01Z", &[(1, 10.0)]);
        assert_eq!(a.id.len(), ID_LEN);
        assert!(a.id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.id, b.id);
        assert_eq!(a.taken_at, "2026-11-24T10:00:00.000Z");
        assert!(a.accepted());
        assert_eq!(a.level(1).unwrap().figures.output_throughput, 10.0);
        assert!(a.level(4).is_none());
        let back: BenchResult = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(back, a);
    }
}
