//! `cluster watch` run as the binary in the foreground, its `--json` event lines read as they come
//! (on a thread, into a channel): the watch tests wait on its events, each wait bounded, and keep
//! every event seen for the failure message. Killed when dropped, so a failed test leaves no watch.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The longest the test waits for any one event of the watch (a relaunch loads the model again
/// on a busy machine); a bound, never a figure a test asserts.
const EVENT_LIMIT: Duration = Duration::from_secs(300);

pub struct RunningWatch {
    child: Child,
    events: Receiver<Value>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
}

impl RunningWatch {
    /// `command` (`strix-toolbox --json cluster … watch …`) started, its stderr the test's.
    pub fn start(mut command: Command) -> RunningWatch {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the watch");
        let stdout = child.stdout.take().expect("its stdout");
        let (send, events) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if send.send(event).is_err() {
                    return;
                }
            }
        });
        RunningWatch { child, events, seen: Vec::new() }
    }

    /// The first event from now on that `wanted` takes; every event seen on the way is kept.
    pub fn until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + EVENT_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(event) => {
                    eprintln!("watch: {event}");
                    self.seen.push(event.clone());
                    if wanted(&event) {
                        return event;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no {what} from the watch; it said: {:#?}", self.seen),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the watch ended before {what} ({:?}); it said: {:#?}", self.child.try_wait(), self.seen)
                }
            }
        }
    }

    /// The next event with this `action` (and this `state`, when given).
    pub fn action(&mut self, action: &str, state: Option<&str>) -> Value {
        self.until(&format!("{action} ({state:?})"), |e| e["action"] == action && state.is_none_or(|s| e["state"] == s))
    }

    /// Every event read so far, in order.
    pub fn seen(&self) -> &[Value] {
        &self.seen
    }

    /// Every event the watch said so far and the test has not read, without waiting.
    pub fn drain(&mut self) -> Vec<Value> {
        let fresh: Vec<Value> = self.events.try_iter().collect();
        self.seen.extend(fresh.iter().cloned());
        fresh
    }

    /// It serves (again): the state `serving`.
    pub fn serving(&mut self) -> Value {
        self.until("serving", |e| e["state"] == "serving")
    }

    /// Ctrl-C: its exit code.
    pub fn interrupt(&mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-INT", &pid]).status().expect("kill -INT");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait for the watch") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("the watch did not end after SIGINT");
    }
}

impl Drop for RunningWatch {
    /// A test that failed midway leaves no watch behind.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
