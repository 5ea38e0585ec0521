//! Image spread, the node side: a cluster refresh fetches the image from upstream once, on the
//! head, into a registry the head runs on the cluster link, and every node pulls it from there
//! (the head's orchestration is `cluster::spread`).
//! [`resolve`]: the digest a tag names, from the registry API (no pull). [`registry`]: the head's
//! registry container. [`ca`]: its certificates. [`trust`]: the CA where each node's engine looks.
//! [`copy`]: upstream → the head's registry, byte for byte. [`relay`] (as calls: [`relay_serve`]):
//! the image to the nodes while the copy still runs, each blob through its [`spool`] as it arrives
//! ([`range`]: the one Range form it answers). [`pull`]: a node's pull from the head,
//! the image then named as upstream names it. [`prune`] and [`status`]: what the head keeps.
//! [`home`]: where the head keeps it.

pub(crate) mod copy;
pub(crate) mod prune;
pub(crate) mod pull;
pub(crate) mod range;
pub(crate) mod registry;
pub(crate) mod relay;
pub(crate) mod relay_serve;
pub(crate) mod resolve;
pub(crate) mod spool;
pub(crate) mod status;
pub(crate) mod trust;
