//! Models, fetched once per cluster. The domain: the Hugging Face cache as huggingface_hub lays it
//! out ([`cache`]), the ids and revisions that name what is in it, the hashes its blob names are
//! ([`blob`]), the list of a snapshot's files ([`manifest`]), and the transfer of blobs from the
//! head to the other nodes over the cluster link ([`blob_server`], [`blob_fetch`]). The node's
//! side, each one call from the head: the head's download through huggingface_hub in its toolbox
//! ([`download`]), its blob server on the cluster link ([`serve`]), every other node's fetch from
//! it ([`fetch`]), and what each node's cache holds ([`list`]). The head's orchestration is in
//! `cluster::model`. What a model is, read from its headers before any of it is downloaded, for
//! the plan: [`shape`].

pub(crate) mod blob;
pub(crate) mod blob_fetch;
pub(crate) mod blob_server;
pub(crate) mod cache;
pub(crate) mod download;
pub(crate) mod fetch;
pub(crate) mod gguf_pick;
pub(crate) mod hub;
pub(crate) mod hub_env;
pub(crate) mod identity;
pub(crate) mod list;
pub(crate) mod manifest;
pub(crate) mod repo_id;
pub(crate) mod revision;
pub(crate) mod serve;
pub(crate) mod shape;
mod snapshot;
pub(crate) mod source;
