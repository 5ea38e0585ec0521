//! One of 256 cluster slots: its number picks the namespaces' names and the management subnet, so
//! clusters of tests running at the same time (in this process or another) never meet.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::process::Command;

use crate::support::netns::NetNs;

/// Held as an flock, released when the test (or its process) ends.
pub(super) struct Slot {
    pub number: u8,
    _lock: File,
}

impl Slot {
    pub fn claim() -> Slot {
        let dir = Path::new("/tmp/strix-test-clusters");
        std::fs::create_dir_all(dir).expect("mkdir cluster slots");
        for number in 0..=u8::MAX {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("{number}.lock")))
                .expect("open slot lock");
            match file.try_lock() {
                Ok(()) => {
                    let slot = Slot { number, _lock: file };
                    slot.remove_leftovers();
                    return slot;
                }
                Err(TryLockError::WouldBlock) => continue,
                Err(TryLockError::Error(error)) => panic!("lock cluster slot {number}: {error}"),
            }
        }
        panic!("all 256 test cluster slots are in use");
    }

    /// What a killed test left in this slot: its namespaces (with their processes) and links.
    fn remove_leftovers(&self) {
        let prefix = format!("stx{}-", self.number);
        let list = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
        for name in String::from_utf8_lossy(&list.stdout).lines().filter_map(|line| line.split_whitespace().next()) {
            if name.starts_with(&prefix) {
                drop(NetNs::leftover(name.to_string()));
            }
        }
        let links = Command::new("ip").args(["-br", "link"]).output().expect("ip link");
        for name in String::from_utf8_lossy(&links.stdout).lines().filter_map(|line| line.split_whitespace().next()) {
            let name = name.split('@').next().unwrap_or(name);
            if name.starts_with(&prefix) {
                let _ = Command::new("ip").args(["link", "del", name]).status();
            }
        }
    }
}
