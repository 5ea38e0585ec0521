//! One of our two output streams. A reader that goes away (`strix-toolbox status | head -1`) is
//! not a failure: from then on what is written there is dropped, and the command ends with its
//! own exit code (cargo's `Shell`, ripgrep's main). Any other write error is kept for the end.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};

/// A writer shared by whoever writes to the same stream (the command's output and the progress
/// reporter both write to stderr).
#[derive(Clone)]
pub struct Stream(Arc<Mutex<Sink>>);

struct Sink {
    writer: Box<dyn Write + Send>,
    /// The reader went away, or a write failed: nothing more is written.
    closed: bool,
    /// The first write error that was not a closed pipe.
    error: Option<io::Error>,
}

impl Stream {
    pub fn new(writer: Box<dyn Write + Send>) -> Stream {
        Stream(Arc::new(Mutex::new(Sink { writer, closed: false, error: None })))
    }

    /// Write `bytes` as they are, and flush them (a line must show before a long step starts).
    pub fn write(&self, bytes: &[u8]) {
        let mut sink = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if sink.closed {
            return;
        }
        let written = sink.writer.write_all(bytes).and_then(|()| sink.writer.flush());
        if let Err(error) = written {
            sink.closed = true;
            if error.kind() != io::ErrorKind::BrokenPipe {
                sink.error = Some(error);
            }
        }
    }

    /// `text` and a newline.
    pub fn line(&self, text: &str) {
        let mut bytes = Vec::with_capacity(text.len() + 1);
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(b'\n');
        self.write(&bytes);
    }

    /// Nothing more is written: the reader went away (or a write failed).
    pub fn closed(&self) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).closed
    }

    /// The write error that was not a closed pipe, if one happened.
    pub fn take_error(&self) -> Option<io::Error> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).error.take()
    }
}

/// An in-memory stream for tests: what was written, readable while the stream is in use.
#[cfg(test)]
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

#[cfg(test)]
impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[cfg(test)]
impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that has gone away (or a full disk): every write fails with `kind`.
    struct Failing(io::ErrorKind, Arc<Mutex<usize>>);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            *self.1.lock().unwrap() += 1;
            Err(io::Error::from(self.0))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_is_quiet_and_stops_the_writes() {
        let attempts = Arc::new(Mutex::new(0));
        let stream = Stream::new(Box::new(Failing(io::ErrorKind::BrokenPipe, attempts.clone())));
        stream.line("one");
        stream.line("two");
        assert_eq!(*attempts.lock().unwrap(), 1, "nothing is written after the pipe closed");
        assert!(stream.take_error().is_none());
    }

    #[test]
    fn another_write_error_is_kept_for_the_end() {
        let stream = Stream::new(Box::new(Failing(io::ErrorKind::StorageFull, Arc::default())));
        stream.line("one");
        assert_eq!(stream.take_error().map(|e| e.kind()), Some(io::ErrorKind::StorageFull));
    }

    #[test]
    fn captured_text_is_what_was_written() {
        let captured = Captured::default();
        let stream = Stream::new(Box::new(captured.clone()));
        stream.line("one");
        stream.write(b"two");
        assert_eq!(captured.text(), "one\ntwo");
    }
}
