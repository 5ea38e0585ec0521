//! A toolbox once it exists: found by name, or running, to exec in ([`running`]), and what it
//! runs as its labels say ([`status`]). Serving, the model's pull, the cluster's proofs and the
//! operations all act on toolboxes through these two.

pub(crate) mod running;
pub(crate) mod status;
