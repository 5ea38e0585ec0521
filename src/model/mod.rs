//! Models, fetched once per cluster: the Hugging Face cache as huggingface_hub lays it out
//! ([`cache`]), the ids and revisions that name what is in it, the hashes its blob names are
//! ([`blob`]), the list of a snapshot's files ([`manifest`]), and the transfer of blobs from the
//! head to the other nodes over the cluster link ([`serve`], [`fetch`]). The node's calls are in
//! `ops::model`, the head's orchestration in `cluster::model`.

pub(crate) mod blob;
pub(crate) mod cache;
pub(crate) mod fetch;
pub(crate) mod http1;
pub(crate) mod hub_env;
pub(crate) mod manifest;
pub(crate) mod repo_id;
pub(crate) mod revision;
pub(crate) mod serve;
