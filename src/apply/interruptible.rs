//! Ctrl-C (SIGINT) and SIGTERM during one node's operation: a step that changes nothing, or
//! whose half is undone (a pull, a wait on a registry or a lock, a create before the swap), is
//! dropped where it stands when one comes, and the error says which came, for the caller to clean
//! up and for the process to exit 130 or 143.
//!
//! A signal is noted from the moment the operation starts listening ([`listen_for_signals`]) and
//! never lost: one that comes while no such step runs (the facts read, the engine reached, the
//! swap) stops the next step that may be stopped, as the cluster's `Interrupt` notes a signal and
//! acts on it after the running phase. Before any listening, the signal keeps its default action
//! and ends the process.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};

use crate::error::{Error, Result, Signal};

/// The first signal that came since the handlers were installed (0: none yet).
static CAME: AtomicU8 = AtomicU8::new(0);
/// The handlers, installed by the first listener and kept for the process's life: a signal is
/// only seen by a handler that exists when it comes.
static HANDLERS: Mutex<Option<Handlers>> = Mutex::new(None);

/// How often a waiting step asks whether a signal came.
const ASKED_EVERY: Duration = Duration::from_millis(50);

struct Handlers {
    /// None: it could not be installed (the signal then keeps its default action).
    interrupt: Option<tokio::signal::unix::Signal>,
    terminate: Option<tokio::signal::unix::Signal>,
}

/// Note Ctrl-C and SIGTERM from now on, for the interruptible steps that follow (an operation
/// calls it before its first wait on the network, so that no signal ends it unannounced or goes
/// unseen). Outside a tokio runtime it does nothing.
pub fn listen_for_signals() {
    let _ = came();
}

/// Run `future` unless Ctrl-C (SIGINT) or SIGTERM arrives first, or came already: then `future`
/// is dropped (its children killed, its connections closed) and the error says which signal came
/// during `what`.
pub async fn interruptible<T>(what: &str, future: impl Future<Output = Result<T>>) -> Result<T> {
    if let Some(signal) = came() {
        return Err(Error::Interrupted { during: what.to_string(), signal });
    }
    tokio::select! {
        result = future => result,
        signal = arrival() => Err(Error::Interrupted { during: what.to_string(), signal }),
    }
}

/// When a signal comes.
async fn arrival() -> Signal {
    loop {
        if let Some(signal) = came() {
            return signal;
        }
        tokio::time::sleep(ASKED_EVERY).await;
    }
}

/// The signal that came, if one did; installs the handlers on the first call (inside a runtime).
fn came() -> Option<Signal> {
    if let Some(signal) = decode(CAME.load(Ordering::SeqCst)) {
        return Some(signal);
    }
    tokio::runtime::Handle::try_current().ok()?;
    let mut handlers = HANDLERS.lock().ok()?;
    let handlers = handlers.get_or_insert_with(|| Handlers {
        interrupt: signal(SignalKind::interrupt()).ok(),
        terminate: signal(SignalKind::terminate()).ok(),
    });
    // Asked without a waker: `arrival` asks again on its own clock, as the cluster's does.
    let mut asking = Context::from_waker(Waker::noop());
    let mut arrived = |handler: &mut Option<tokio::signal::unix::Signal>| {
        handler.as_mut().is_some_and(|handler| matches!(handler.poll_recv(&mut asking), Poll::Ready(Some(()))))
    };
    let code = if arrived(&mut handlers.interrupt) {
        1
    } else if arrived(&mut handlers.terminate) {
        2
    } else {
        return None;
    };
    let _ = CAME.compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst);
    decode(CAME.load(Ordering::SeqCst))
}

fn decode(code: u8) -> Option<Signal> {
    match code {
        1 => Some(Signal::Interrupt),
        2 => Some(Signal::Terminate),
        _ => None,
    }
}
