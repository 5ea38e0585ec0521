//! A client of the distribution API (registry v2, OCI distribution) for what must keep its
//! digests: resolving a tag to the digest it names now, copying manifests and blobs byte for byte
//! from the upstream registry to the head's, probing and pruning the head's registry. Engines pull
//! and push images; this only moves registry content, which engines would re-compress.

pub mod certs;
pub mod challenge;
pub mod client;
pub mod config;
pub mod manifest;

pub use client::RegistryClient;
