//! The tokens an answer cost, as its engine counts them: OpenAI's `usage` object
//! (`"usage": {"prompt_tokens": …, "completion_tokens": …, "total_tokens": …}`), which every
//! answer that is not streamed carries, and a stream carries in one last chunk with no choices
//! when its request says `"stream_options": {"include_usage": true}` (OpenAI's API reference,
//! "stream_options"; vLLM and llama-server do the same). A streamed request that does not ask is
//! asked for it on its way ([`ask_for_usage`]), and that one chunk is kept from its client
//! ([`is_usage_only`]): what the client sees is what it asked for, and every answer is counted.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value};

#[derive(Deserialize)]
struct StreamFields {
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<Value>,
}

/// The body to send when it streams without asking for its usage: the same object, with
/// `stream_options.include_usage` true (its other fields as they were; their order may change).
/// None: it does not stream, asks already, or is not an object (sent as it came).
pub fn ask_for_usage(body: &[u8]) -> Option<Bytes> {
    let fields: StreamFields = serde_json::from_slice(body).ok()?;
    let asks = fields.stream_options.as_ref().and_then(|o| o.get("include_usage")).and_then(Value::as_bool);
    if fields.stream != Some(true) || asks == Some(true) {
        return None;
    }
    let mut object: Map<String, Value> = serde_json::from_slice(body).ok()?;
    let options = object.entry("stream_options").or_insert_with(|| Value::Object(Map::new()));
    options.as_object_mut()?.insert("include_usage".into(), Value::Bool(true));
    serde_json::to_vec(&object).ok().map(Bytes::from)
}

/// The `total_tokens` of the last usage object in `text`, if it has one.
pub fn total_tokens(text: &[u8]) -> Option<u64> {
    const FIELD: &[u8] = b"\"total_tokens\"";
    let at = text.windows(FIELD.len()).rposition(|window| window == FIELD)?;
    let rest = &text[at + FIELD.len()..];
    let rest = trim_start(rest).strip_prefix(b":")?;
    let rest = trim_start(rest);
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// Whether one server-sent event is the usage chunk a stream ends with: `data:` a JSON object
/// whose `choices` is empty, with a `usage`.
pub fn is_usage_only(event: &[u8]) -> bool {
    let Some(data) = event.strip_prefix(b"data:") else { return false };
    let Ok(value) = serde_json::from_slice::<Value>(trim_start(data)) else { return false };
    value.get("usage").is_some_and(Value::is_object)
        && value.get("choices").and_then(Value::as_array).is_some_and(|choices| choices.is_empty())
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let blank = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[blank..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_does_not_ask_is_asked_and_nothing_else_changes() {
        let asked = ask_for_usage(br#"{"model": "m", "stream": true, "messages": []}"#).unwrap();
        let value: Value = serde_json::from_slice(&asked).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"model": "m", "stream": true, "messages": [], "stream_options": {"include_usage": true}})
        );
        let kept = ask_for_usage(br#"{"stream": true, "stream_options": {"continuous_usage_stats": false}}"#).unwrap();
        let value: Value = serde_json::from_slice(&kept).unwrap();
        assert_eq!(
            value["stream_options"],
            serde_json::json!({"continuous_usage_stats": false, "include_usage": true})
        );
        for unchanged in [
            &br#"{"model": "m"}"#[..],
            br#"{"stream": false}"#,
            br#"{"stream": true, "stream_options": {"include_usage": true}}"#,
            b"[1]",
            b"not json",
        ] {
            assert_eq!(ask_for_usage(unchanged), None, "{}", String::from_utf8_lossy(unchanged));
        }
    }

    #[test]
    fn the_usage_is_read_where_an_engine_writes_it() {
        // llama-server's and vLLM's, as they answer (spacing differs).
        let whole = br#"{"choices":[{"text":"x"}],"usage":{"completion_tokens":3,"prompt_tokens":3,"total_tokens":6}}"#;
        assert_eq!(total_tokens(whole), Some(6));
        assert_eq!(total_tokens(br#"{"usage": {"total_tokens" : 31}}"#), Some(31));
        assert_eq!(total_tokens(br#"{"choices": []}"#), None);
        assert_eq!(total_tokens(br#""total_tokens": "x""#), None);
        let chunk =
            br#"data: {"choices":[],"id":"c","usage":{"completion_tokens":2,"prompt_tokens":29,"total_tokens":31}}"#;
        assert!(is_usage_only(chunk));
        assert!(!is_usage_only(br#"data: {"choices":[{"delta":{}}],"usage":{"total_tokens":1}}"#));
        assert!(!is_usage_only(b"data: [DONE]"));
    }
}
