//! Server-sent events as the OpenAI-compatible servers stream them (`data: {json}` messages, a
//! blank line after each, `data: [DONE]` at the end, `: ping` comments from llama.cpp's server).
//! Bytes arrive in whatever pieces the network makes: a message may span chunks, a chunk may hold
//! several messages, a UTF-8 character or a `\r\n` may be cut in two. The parser keeps what is
//! incomplete and hands back each message once its blank line has come (the WHATWG rules: lines
//! end in `\n`, `\r\n` or `\r`; `data:` lines of one event are joined by `\n`; one space after the
//! colon is dropped; other fields and comments are ignored).

/// One complete event's data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseMessage {
    /// A `data:` payload (a JSON object, for these servers).
    Data(String),
    /// `data: [DONE]`: the server says the stream is over.
    Done,
}

/// Bytes in, complete messages out.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of a line not yet ended.
    line: Vec<u8>,
    /// The last byte seen was `\r`: a `\n` right after it ends nothing more.
    after_cr: bool,
    /// `data:` lines of the event under way.
    data: Option<String>,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Take the next bytes; returns every message they complete, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseMessage> {
        let mut messages = Vec::new();
        for &byte in bytes {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    let line = std::mem::take(&mut self.line);
                    self.line_ended(&line, &mut messages);
                }
                _ => self.line.push(byte),
            }
        }
        messages
    }

    /// The stream ended: a last event without its blank line still counts (vLLM's client accepts
    /// it too), a half line is completed.
    pub fn finish(mut self) -> Vec<SseMessage> {
        let mut messages = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_ended(&line, &mut messages);
        }
        self.line_ended(b"", &mut messages);
        messages
    }

    fn line_ended(&mut self, line: &[u8], messages: &mut Vec<SseMessage>) {
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                messages.push(if data.trim() == "[DONE]" { SseMessage::Done } else { SseMessage::Data(data) });
            }
            return;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        // A comment (`: ping`) has an empty field name; `event:`, `id:`, `retry:` say nothing
        // these servers' clients use.
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_at_once(bytes: &[u8]) -> Vec<SseMessage> {
        let mut parser = SseParser::new();
        let mut messages = parser.push(bytes);
        messages.extend(parser.finish());
        messages
    }

    fn byte_by_byte(bytes: &[u8]) -> Vec<SseMessage> {
        let mut parser = SseParser::new();
        let mut messages: Vec<SseMessage> = bytes.iter().flat_map(|byte| parser.push(&[*byte])).collect();
        messages.extend(parser.finish());
        messages
    }

    /// What vLLM 0.x sends for a two-token completion with usage (recorded shape).
    const VLLM_STREAM: &[u8] =
        b"data: {\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\"Hello\",\"finish_reason\":null}]}\n\n\
data: {\"id\":\"cmpl-1\",\"choices\":[{\"index\":0,\"text\":\" w\xc3\xb6rld\",\"finish_reason\":\"length\"}]}\n\n\
data: {\"id\":\"cmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n\
data: [DONE]\n\n";

    #[test]
    fn messages_come_out_whole_however_the_bytes_are_cut() {
        let whole = all_at_once(VLLM_STREAM);
        assert_eq!(whole.len(), 4);
        assert!(matches!(&whole[1], SseMessage::Data(data) if data.contains(" wörld")));
        assert_eq!(whole[3], SseMessage::Done);
        assert_eq!(byte_by_byte(VLLM_STREAM), whole);
        for cut in 1..VLLM_STREAM.len() {
            let mut parser = SseParser::new();
            let mut messages = parser.push(&VLLM_STREAM[..cut]);
            messages.extend(parser.push(&VLLM_STREAM[cut..]));
            messages.extend(parser.finish());
            assert_eq!(messages, whole, "cut at byte {cut}");
        }
    }

    #[test]
    fn crlf_comments_other_fields_and_multiline_data() {
        let stream = b": ping\r\n\r\nevent: completion\r\nid: 7\r\ndata:{\"a\":1}\r\n\r\ndata: x\rdata: y\r\r";
        let messages = all_at_once(stream);
        assert_eq!(messages, vec![SseMessage::Data("{\"a\":1}".into()), SseMessage::Data("x\ny".into())]);
        assert_eq!(byte_by_byte(stream), messages);
    }

    #[test]
    fn a_last_message_without_its_blank_line_still_counts() {
        assert_eq!(
            all_at_once(b"data: {\"b\":2}\n\ndata: [DONE]"),
            vec![SseMessage::Data("{\"b\":2}".into()), SseMessage::Done]
        );
        assert_eq!(all_at_once(b"data: {\"b\":2}\n"), vec![SseMessage::Data("{\"b\":2}".into())]);
        assert!(all_at_once(b"").is_empty());
        assert!(all_at_once(b"\n\n\n").is_empty());
    }
}
