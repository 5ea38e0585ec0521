//! The copy from upstream into the head's registry, byte for byte (what `skopeo copy --all
//! --preserve-digests` does): the manifest by digest; for an index, every manifest it lists (the
//! registry refuses an index whose manifests it lacks), attestations included; each config and
//! layer blob the head's registry lacks (asked first), streamed from the GET into the upload and
//! checked against its sha256 on the way, never held in memory. So the uplink carries the image
//! once per cluster refresh whatever the number of nodes, and a layer the head has already never
//! again. Engines would re-compress on push and change every digest: they take no part here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::home::{now_as_pin, RegistryHome, ServedImage};
use super::registry::writer_client;
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::registry::client::error_chain;
use crate::registry::manifest::{Contents, Descriptor, Manifest};
use crate::registry::RegistryClient;
use crate::settings::Settings;

/// Blobs in flight at once: enough to fill a link, few enough for a home uplink.
const PARALLEL_BLOBS: usize = 3;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadCopy {
    /// `repo@sha256:…`: the image as upstream names it, pinned to the digest every node gets.
    pub image: String,
    /// The head's registry, `IP:PORT`.
    pub registry: String,
    /// The toolbox it is for (prune keeps per toolbox).
    pub toolbox: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpreadCopied {
    pub digest: String,
    /// The image's size: its manifests and blobs.
    pub size: u64,
    /// What came from upstream: manifests, and the blobs the head lacked.
    pub fetched: u64,
    /// Blobs copied, and blobs the head had already.
    pub blobs_copied: usize,
    pub blobs_present: usize,
}

pub async fn spread_copy(settings: &Settings, request: &SpreadCopy) -> Result<SpreadCopied> {
    let image = ImageRef::parse(&request.image)?;
    let digest = image
        .digest
        .clone()
        .ok_or_else(|| Error::Internal(format!("the spread copies an image by digest, not {}", request.image)))?;
    let home = RegistryHome::locate(&settings.paths)?;
    let _lock = home.lock().await?;
    let head = writer_client(&home, &request.registry)?;
    let path = image.path();
    let copied = if head.has_manifest(&path, &digest).await? {
        SpreadCopied { digest: digest.clone(), ..Default::default() }
    } else {
        let upstream = RegistryClient::upstream(&image, settings.engine.program()).await?;
        copy_image(&upstream, &head, &path, &digest).await?
    };
    let mut served = home.served()?;
    if !served.iter().any(|s| s.toolbox == request.toolbox && s.digest == digest) {
        served.push(ServedImage { path, digest, toolbox: request.toolbox.clone(), pin: None, copied: now_as_pin() });
        home.set_served(&served)?;
    }
    Ok(copied)
}

/// Copy the manifest `digest` of `path`, with everything it refers to, from `from` to `to`.
pub async fn copy_image(from: &RegistryClient, to: &RegistryClient, path: &str, digest: &str) -> Result<SpreadCopied> {
    let top = from.manifest(path, digest).await?;
    let mut copied = SpreadCopied { digest: digest.to_string(), ..Default::default() };
    let mut children = Vec::new();
    let mut blobs: Vec<Descriptor> = Vec::new();
    match contents(from, path, &top)? {
        Contents::Index(manifests) => {
            for listed in manifests {
                let child = from.manifest(path, &listed.digest).await?;
                match contents(from, path, &child)? {
                    Contents::Image { config, layers } => blobs.extend(std::iter::once(config).chain(layers)),
                    Contents::Index(_) => {
                        return Err(cannot_copy(from, path, digest, "an index inside an index".into()));
                    }
                }
                children.push(child);
            }
        }
        Contents::Image { config, layers } => blobs.extend(std::iter::once(config).chain(layers)),
    }
    for manifest in children.iter().chain([&top]) {
        copied.size += manifest.bytes.len() as u64;
        copied.fetched += manifest.bytes.len() as u64;
    }
    blobs.sort_by(|a, b| a.digest.cmp(&b.digest));
    blobs.dedup_by(|a, b| a.digest == b.digest);
    copied.size += blobs.iter().map(|blob| blob.size).sum::<u64>();

    // A few at a time (pushed by hand: a stream of borrowing futures trips rustc's Send check).
    let mut waiting = blobs.iter();
    let mut transfers = FuturesUnordered::new();
    for blob in waiting.by_ref().take(PARALLEL_BLOBS) {
        transfers.push(copy_blob(from, to, path, blob));
    }
    while let Some(transfer) = transfers.next().await {
        match transfer? {
            Some(bytes) => {
                copied.fetched += bytes;
                copied.blobs_copied += 1;
            }
            None => copied.blobs_present += 1,
        }
        if let Some(blob) = waiting.next() {
            transfers.push(copy_blob(from, to, path, blob));
        }
    }
    // What a manifest refers to must be there before it is.
    for manifest in children.iter().chain([&top]) {
        to.put_manifest(path, manifest).await?;
    }
    Ok(copied)
}

fn contents(from: &RegistryClient, path: &str, manifest: &Manifest) -> Result<Contents> {
    manifest.contents().map_err(|why| cannot_copy(from, path, &manifest.digest, why))
}

fn cannot_copy(from: &RegistryClient, path: &str, digest: &str, why: String) -> Error {
    Error::Registry {
        reference: format!("{}/{path}@{digest}", from.registry()),
        message: format!("cannot spread {}/{path}@{digest}: {why}", from.registry()),
        fix: Some("refresh with --spread off (every node pulls it itself)".into()),
    }
}

/// Copy one blob unless `to` has it: the bytes fetched, or None when it was there.
async fn copy_blob(from: &RegistryClient, to: &RegistryClient, path: &str, blob: &Descriptor) -> Result<Option<u64>> {
    if to.has_blob(path, &blob.digest).await? {
        return Ok(None);
    }
    let response = from.blob(path, &blob.digest).await?;
    let fetched = Arc::new(AtomicU64::new(0));
    let broken = Arc::new(Mutex::new(None));
    let body = checked(response.bytes_stream(), blob.clone(), fetched.clone(), broken.clone());
    let uploaded = to.upload_blob(path, &blob.digest, blob.size, reqwest::Body::wrap_stream(body)).await;
    // Why the stream stopped (upstream broke off, or the bytes were not the blob) says more than
    // the upload's own failure.
    let why = broken.lock().ok().and_then(|mut why| why.take());
    match (uploaded, why) {
        (_, Some(why)) => Err(Error::Registry {
            reference: format!("{}/{path}@{}", from.registry(), blob.digest),
            message: format!("copying the blob {} of {path} from {}: {why}", blob.digest, from.registry()),
            fix: Some(format!("check that {} is reachable from the head, then run again", from.registry())),
        }),
        (Err(error), None) => Err(error),
        (Ok(()), None) => Ok(Some(fetched.load(Ordering::SeqCst))),
    }
}

/// `body` passed on as it comes, counted into `fetched`, hashed on the way: it ends in an error
/// (said in `broken`) when upstream breaks off or the bytes are not `blob`.
fn checked(
    body: impl Stream<Item = reqwest::Result<Bytes>> + Send + Unpin + 'static,
    blob: Descriptor,
    fetched: Arc<AtomicU64>,
    broken: Arc<Mutex<Option<String>>>,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    futures_util::stream::unfold(Some((body, Sha256::new(), 0u64)), move |state| {
        let (blob, fetched, broken) = (blob.clone(), fetched.clone(), broken.clone());
        async move {
            let (mut body, mut hasher, mut seen) = state?;
            let step = match body.next().await {
                Some(Ok(chunk)) => {
                    hasher.update(&chunk);
                    seen += chunk.len() as u64;
                    fetched.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                    if seen > blob.size {
                        Err(format!("upstream sent more than its {} bytes", blob.size))
                    } else {
                        Ok(Some(chunk))
                    }
                }
                Some(Err(error)) => Err(format!("the download broke off after {seen} bytes: {}", error_chain(&error))),
                None => {
                    let got = format!("sha256:{:x}", hasher.finalize_reset());
                    if seen != blob.size || got != blob.digest {
                        Err(format!("upstream sent {seen} bytes hashing to {got}, not the blob"))
                    } else {
                        Ok(None)
                    }
                }
            };
            match step {
                Ok(Some(chunk)) => Some((Ok(chunk), Some((body, hasher, seen)))),
                Ok(None) => None,
                Err(why) => {
                    if let Ok(mut slot) = broken.lock() {
                        *slot = Some(why.clone());
                    }
                    Some((Err(std::io::Error::other(why)), None))
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: String::new(),
            digest: crate::registry::manifest::sha256_digest(bytes),
            size: bytes.len() as u64,
        }
    }

    async fn run(
        chunks: Vec<&'static [u8]>,
        expected: Descriptor,
    ) -> (Vec<std::io::Result<Bytes>>, Option<String>, u64) {
        let body = futures_util::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from_static(c))));
        let (fetched, broken) = (Arc::new(AtomicU64::new(0)), Arc::new(Mutex::new(None)));
        let out: Vec<_> = checked(body, expected, fetched.clone(), broken.clone()).collect().await;
        let why = broken.lock().unwrap().take();
        (out, why, fetched.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn the_blob_passes_through_checked() {
        let (out, why, fetched) = run(vec![b"hello ", b"world"], blob(b"hello world")).await;
        assert_eq!((out.len(), why, fetched), (2, None, 11));
        assert!(out.iter().all(|chunk| chunk.is_ok()));
    }

    #[tokio::test]
    async fn other_bytes_end_in_an_error() {
        let (out, why, _) = run(vec![b"hello ", b"there"], blob(b"hello world")).await;
        assert!(out.last().unwrap().is_err(), "the upload must not complete");
        assert!(why.unwrap().contains("not the blob"));
        let (out, why, _) = run(vec![b"hello world!"], blob(b"hello world")).await;
        assert!(out.last().unwrap().is_err() && why.unwrap().contains("more than its 11 bytes"));
    }
}
