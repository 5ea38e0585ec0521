//! Ctrl-C (or SIGTERM) during a cluster command that changes nodes: noted, never acted on in the
//! middle of a step (a half-done phase is worse than a finished one, and the ssh clients run in
//! their own process group, so the terminal's SIGINT does not reach them). The command asks after
//! each step whether it came, and undoes what it did.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};

use crate::error::{Error, Result, Signal};

/// Which signal came (none yet: 0), and the task that watches for one.
pub struct Interrupt(Arc<AtomicU8>, Option<tokio::task::JoinHandle<()>>);

impl Interrupt {
    pub fn watch() -> Interrupt {
        let flag = Arc::new(AtomicU8::new(0));
        let seen = flag.clone();
        let task = tokio::spawn(async move {
            let (Ok(mut interrupt), Ok(mut terminate)) =
                (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
            else {
                return;
            };
            let code = tokio::select! {
                _ = interrupt.recv() => 1,
                _ = terminate.recv() => 2,
            };
            seen.store(code, Ordering::SeqCst);
        });
        Interrupt(flag, Some(task))
    }

    /// An interrupt no signal sets: a unit test [`raise`](Interrupt::raise)s it.
    #[cfg(test)]
    pub fn manual() -> Interrupt {
        Interrupt(Arc::new(AtomicU8::new(0)), None)
    }

    /// As if `signal` came now.
    #[cfg(test)]
    pub fn raise(&self, signal: Signal) {
        self.0.store(if signal == Signal::Interrupt { 1 } else { 2 }, Ordering::SeqCst);
    }

    /// `step`'s result, unless the signal comes first: then [`Error::Interrupted`] during `during`,
    /// and `step` is dropped where it stands. Only for steps that change nothing (a bench's
    /// requests): a step that starts or stops things checks [`came`](Interrupt::came) itself.
    pub async fn unless_it_comes<T>(&self, during: &str, step: impl Future<Output = Result<T>>) -> Result<T> {
        tokio::select! {
            done = step => done,
            signal = self.arrival() => Err(Error::Interrupted { during: during.to_string(), signal }),
        }
    }

    /// When the signal comes (asked every 50 ms: the flag is what the watching task sets).
    pub async fn arrival(&self) -> Signal {
        loop {
            if let Some(signal) = self.came() {
                return signal;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The signal, once one came.
    pub fn came(&self) -> Option<Signal> {
        match self.0.load(Ordering::SeqCst) {
            1 => Some(Signal::Interrupt),
            2 => Some(Signal::Terminate),
            _ => None,
        }
    }
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        if let Some(task) = &self.1 {
            task.abort();
        }
    }
}
