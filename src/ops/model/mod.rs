//! The node's side of `model pull` and `model list`, each one call from the head: the head's
//! download through huggingface_hub in its toolbox, its blob server on the cluster link, every
//! other node's fetch from it, and what each node's cache holds.

pub mod download;
pub mod fetch;
pub mod list;
pub mod serve;
mod snapshot;
