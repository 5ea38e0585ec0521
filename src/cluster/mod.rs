//! The cluster: every node reached over the system's OpenSSH.

pub mod ssh;
