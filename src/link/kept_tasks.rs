//! What a node's agent keeps running from one call of a command to a later one (the model's blob
//! server, the image relay), each under an id the head names in the call that ends it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

pub struct KeptTasks<Task> {
    tasks: Mutex<BTreeMap<u64, Task>>,
    next_id: AtomicU64,
}

impl<Task> KeptTasks<Task> {
    pub const fn new() -> Self {
        KeptTasks { tasks: Mutex::new(BTreeMap::new()), next_id: AtomicU64::new(1) }
    }

    /// Keep `task`: the id that takes it back.
    pub fn keep(&self, task: Task) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        self.tasks().insert(id, task);
        id
    }

    /// The task kept under `id`, no longer kept; None when there is none (ended, or never kept).
    pub fn take(&self, id: u64) -> Option<Task> {
        self.tasks().remove(&id)
    }

    fn tasks(&self) -> MutexGuard<'_, BTreeMap<u64, Task>> {
        // A panic elsewhere while holding it leaves the map itself whole.
        self.tasks.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_taken_once_by_its_own_id() {
        let kept = KeptTasks::new();
        let first = kept.keep("blob server");
        let second = kept.keep("relay");
        assert_ne!(first, second);
        assert_eq!(kept.take(second), Some("relay"));
        assert_eq!(kept.take(second), None, "taken already");
        assert_eq!(kept.take(first), Some("blob server"));
        assert_eq!(kept.take(999), None);
    }
}
