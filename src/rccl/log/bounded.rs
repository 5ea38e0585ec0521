//! Lines from any input, in bounded memory: a log may be huge, binary, or one endless line.

use std::io::{BufRead, ErrorKind};

/// The longest line kept, in bytes; the rest of a longer one is dropped. NCCL's own lines are at
/// most 1024 bytes (`debug.cc`'s buffer) after a timestamp; the slack is for another program's
/// prefix (Ray's `(RayWorkerWrapper pid=…, ip=…)`).
pub const MAX_LINE: usize = 4096;

/// One line as read: its text (invalid UTF-8 replaced), cut at [`MAX_LINE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedLine {
    pub text: String,
    /// Longer than [`MAX_LINE`]: only the start is in `text`.
    pub cut: bool,
    /// It held a NUL byte: binary, not text.
    pub binary: bool,
}

impl BoundedLine {
    /// A line already in memory, under the same bound.
    pub fn of(text: &str) -> BoundedLine {
        let mut end = text.len().min(MAX_LINE);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        BoundedLine { text: text[..end].to_string(), cut: end < text.len(), binary: text.contains('\0') }
    }

    fn of_bytes(bytes: &[u8], cut: bool) -> BoundedLine {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        BoundedLine { text: String::from_utf8_lossy(bytes).into_owned(), cut, binary: bytes.contains(&0) }
    }
}

/// Every line of `input` to `each`, in order; an error is the input's own (a read that failed).
pub fn for_each_line(mut input: impl BufRead, mut each: impl FnMut(BoundedLine)) -> std::io::Result<()> {
    let mut line: Vec<u8> = Vec::with_capacity(MAX_LINE);
    let mut cut = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(chunk) => chunk,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if chunk.is_empty() {
            break;
        }
        let newline = chunk.iter().position(|byte| *byte == b'\n');
        let text = &chunk[..newline.unwrap_or(chunk.len())];
        let room = MAX_LINE - line.len();
        line.extend_from_slice(&text[..text.len().min(room)]);
        cut |= text.len() > room;
        let consumed = newline.map_or(chunk.len(), |at| at + 1);
        input.consume(consumed);
        if newline.is_some() {
            each(BoundedLine::of_bytes(&line, cut));
            line.clear();
            cut = false;
        }
    }
    if !line.is_empty() || cut {
        each(BoundedLine::of_bytes(&line, cut));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &[u8]) -> Vec<BoundedLine> {
        let mut lines = Vec::new();
        // A small buffer: lines cross the reader's chunks.
        for_each_line(std::io::BufReader::with_capacity(7, input), |line| lines.push(line)).unwrap();
        lines
    }

    #[test]
    fn long_lines_are_cut_and_binary_is_marked() {
        let long = "x".repeat(MAX_LINE * 3);
        let input = format!("first\r\n{long}\nthird");
        let lines = read(input.as_bytes());
        assert_eq!(lines.len(), 3);
        assert_eq!((lines[0].text.as_str(), lines[0].cut), ("first", false));
        assert_eq!((lines[1].text.len(), lines[1].cut), (MAX_LINE, true));
        assert_eq!((lines[2].text.as_str(), lines[2].cut), ("third", false), "the last line without its newline");
        let binary = read(b"\x7fELF\x02\x01\x00\x00\xff\xfe\nok\n");
        assert!(binary[0].binary && !binary[1].binary, "{binary:?}");
        assert!(binary[0].text.contains('\u{fffd}'), "invalid UTF-8 replaced");
        assert!(read(b"").is_empty());
        let in_memory = BoundedLine::of(&"é".repeat(MAX_LINE));
        assert!(in_memory.cut && in_memory.text.len() <= MAX_LINE, "cut at a character's boundary");
    }
}
