//! The copy from upstream into the head's registry, byte for byte (what `skopeo copy --all
//! --preserve-digests` does): the manifest by digest; for an index, every manifest it lists (the
//! registry refuses an index whose manifests it lacks), attestations included; each config and
//! layer blob the head's registry lacks (asked first), streamed from the GET into the upload and
//! checked against its sha256 on the way, never held in memory. So the uplink carries the image
//! once per cluster refresh whatever the number of nodes, and a layer the head has already never
//! again. Each blob's checked bytes also go to its spool as they come, for the relay to send on
//! (`relay_serve` runs the copy). Engines would re-compress on push and change every digest: they
//! take no part here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::spool::{Spool, Spools};
use crate::error::{Error, Result};
use crate::image::reference::ImageRef;
use crate::link::home::{now_as_pin, RegistryHome, ServedImage};
use crate::registry::client::error_chain;
use crate::registry::manifest::{Contents, Descriptor, Manifest};
use crate::registry::RegistryClient;

/// Blobs in flight at once: enough to fill a link, few enough for a home uplink.
const PARALLEL_BLOBS: usize = 3;

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

/// The digest `image` (`request`, as given) is pinned to.
pub fn pinned_digest(image: &ImageRef, request: &str) -> Result<String> {
    image.digest.clone().ok_or_else(|| Error::Internal(format!("the spread copies an image by digest, not {request}")))
}

/// Keep `path@digest` for `toolbox` in the head's registry (prune keeps per toolbox).
pub fn record_served(home: &RegistryHome, path: &str, digest: &str, toolbox: &str) -> Result<()> {
    let mut served = home.served()?;
    if !served.iter().any(|s| s.toolbox == toolbox && s.digest == digest) {
        served.push(ServedImage {
            path: path.to_string(),
            digest: digest.to_string(),
            toolbox: toolbox.to_string(),
            pin: None,
            copied: now_as_pin(),
        });
        home.set_served(&served)?;
    }
    Ok(())
}

/// An image's manifests, fetched, and the blobs they refer to, once each.
pub struct Listed {
    pub top: Manifest,
    /// An index's manifests.
    pub children: Vec<Manifest>,
    pub blobs: Vec<Descriptor>,
}

impl Listed {
    pub fn manifests(&self) -> impl Iterator<Item = &Manifest> {
        self.children.iter().chain([&self.top])
    }
}

/// The manifest `digest` of `path` and, for an index, every manifest it lists (the registry
/// refuses an index whose manifests it lacks), attestations included.
pub async fn list_image(from: &RegistryClient, path: &str, digest: &str) -> Result<Listed> {
    let top = from.manifest(path, digest).await?;
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
    blobs.sort_by(|a, b| a.digest.cmp(&b.digest));
    blobs.dedup_by(|a, b| a.digest == b.digest);
    Ok(Listed { top, children, blobs })
}

/// Copy what `listed` names from `from` to `to`: every blob `to` lacks, then the manifests. Each
/// blob's checked bytes also go to its spool in `spools` as they come (the relay's nodes follow).
pub async fn copy_listed(
    from: &RegistryClient,
    to: &RegistryClient,
    path: &str,
    listed: &Listed,
    spools: Option<&Spools>,
) -> Result<SpreadCopied> {
    let mut copied = SpreadCopied { digest: listed.top.digest.clone(), ..Default::default() };
    for manifest in listed.manifests() {
        copied.size += manifest.bytes.len() as u64;
        copied.fetched += manifest.bytes.len() as u64;
    }
    copied.size += listed.blobs.iter().map(|blob| blob.size).sum::<u64>();

    // A few at a time (pushed by hand: a stream of borrowing futures trips rustc's Send check).
    let spool = |blob: &Descriptor| spools.and_then(|spools| spools.get(&blob.digest)).cloned();
    let mut waiting = listed.blobs.iter();
    let mut transfers = FuturesUnordered::new();
    for blob in waiting.by_ref().take(PARALLEL_BLOBS) {
        transfers.push(copy_blob(from, to, path, blob, spool(blob)));
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
            transfers.push(copy_blob(from, to, path, blob, spool(blob)));
        }
    }
    // What a manifest refers to must be there before it is.
    for manifest in listed.manifests() {
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

/// Copy one blob unless `to` has it (its bytes into `spool` too): the bytes fetched, or None when
/// it was there.
async fn copy_blob(
    from: &RegistryClient,
    to: &RegistryClient,
    path: &str,
    blob: &Descriptor,
    spool: Option<Arc<Spool>>,
) -> Result<Option<u64>> {
    let copied = copy_blob_into(from, to, path, blob, spool.clone()).await;
    if let Some(spool) = spool {
        match &copied {
            Ok(None) => spool.in_registry(),
            Ok(Some(_)) => spool.complete(),
            Err(error) => spool.fail(&error.report().message),
        }
    }
    copied
}

async fn copy_blob_into(
    from: &RegistryClient,
    to: &RegistryClient,
    path: &str,
    blob: &Descriptor,
    spool: Option<Arc<Spool>>,
) -> Result<Option<u64>> {
    if to.has_blob(path, &blob.digest).await? {
        return Ok(None);
    }
    let response = from.blob(path, &blob.digest).await?;
    let fetched = Arc::new(AtomicU64::new(0));
    let broken = Arc::new(Mutex::new(None));
    let body = checked(response.bytes_stream(), blob.clone(), fetched.clone(), broken.clone(), spool);
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

/// `body` passed on as it comes, counted into `fetched`, hashed on the way, appended to `spool`:
/// it ends in an error (said in `broken`) when upstream breaks off or the bytes are not `blob`.
/// The spool is completed only once the whole blob hashed right: the last chunk is checked
/// before any follower can send its last byte.
fn checked(
    body: impl Stream<Item = reqwest::Result<Bytes>> + Send + Unpin + 'static,
    blob: Descriptor,
    fetched: Arc<AtomicU64>,
    broken: Arc<Mutex<Option<String>>>,
    spool: Option<Arc<Spool>>,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + 'static {
    futures_util::stream::unfold(Some((body, Sha256::new(), 0u64)), move |state| {
        let (blob, fetched, broken, spool) = (blob.clone(), fetched.clone(), broken.clone(), spool.clone());
        async move {
            let (mut body, mut hasher, mut seen) = state?;
            let step = match body.next().await {
                Some(Ok(chunk)) => {
                    hasher.update(&chunk);
                    seen += chunk.len() as u64;
                    fetched.fetch_add(chunk.len() as u64, Ordering::SeqCst);
                    if seen > blob.size {
                        Err(format!("upstream sent more than its {} bytes", blob.size))
                    } else if let Some(wrong) =
                        (!chunk.is_empty() && seen == blob.size).then(|| not_the_blob(&mut hasher, &blob)).flatten()
                    {
                        Err(wrong)
                    } else if let Some(Err(error)) = spool.as_ref().map(|spool| spool.append(&chunk)) {
                        Err(format!("cannot keep its bytes for the nodes: {error}"))
                    } else {
                        Ok(Some(chunk))
                    }
                }
                Some(Err(error)) => Err(format!("the download broke off after {seen} bytes: {}", error_chain(&error))),
                None if seen != blob.size => Err(format!("upstream sent {seen} of the blob's {} bytes", blob.size)),
                // Checked with its last chunk (an empty blob here).
                None => match (blob.size == 0).then(|| not_the_blob(&mut hasher, &blob)).flatten() {
                    Some(wrong) => Err(wrong),
                    None => Ok(None),
                },
            };
            // Verified: the nodes may have its last byte.
            if seen == blob.size && step.is_ok() {
                if let Some(spool) = &spool {
                    spool.complete();
                }
            }
            match step {
                Ok(Some(chunk)) => Some((Ok(chunk), Some((body, hasher, seen)))),
                Ok(None) => None,
                Err(why) => {
                    if let Some(spool) = &spool {
                        spool.fail(&why);
                    }
                    if let Ok(mut slot) = broken.lock() {
                        *slot = Some(why.clone());
                    }
                    Some((Err(std::io::Error::other(why)), None))
                }
            }
        }
    })
}

/// Why the bytes `hasher` has seen are not `blob` (None: they are). Checked with the last chunk,
/// before it goes on: the upload's end of stream may never be asked for once its length is sent.
fn not_the_blob(hasher: &mut Sha256, blob: &Descriptor) -> Option<String> {
    let got = format!("sha256:{:x}", hasher.finalize_reset());
    (got != blob.digest).then(|| format!("upstream sent {} bytes hashing to {got}, not the blob", blob.size))
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
        let out: Vec<_> = checked(body, expected, fetched.clone(), broken.clone(), None).collect().await;
        let why = broken.lock().unwrap().take();
        (out, why, fetched.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn the_blob_passes_through_checked() {
        let (out, why, fetched) = run(vec![b"hello ", b"world"], blob(b"hello world")).await;
        assert_eq!((out.len(), why, fetched), (2, None, 11));
        assert!(out.iter().all(|chunk| chunk.is_ok()));
        let (out, why, _) = run(vec![b"hello world", b""], blob(b"hello world")).await;
        assert!(out.iter().all(|chunk| chunk.is_ok()) && why.is_none(), "an empty chunk after the last: {why:?}");
    }

    #[tokio::test]
    async fn other_bytes_end_in_an_error() {
        let (out, why, _) = run(vec![b"hello ", b"there"], blob(b"hello world")).await;
        assert!(out.last().unwrap().is_err(), "the upload must not complete");
        assert_eq!(out.len(), 2, "the wrong last chunk never goes on");
        assert!(why.unwrap().contains("not the blob"));
        let (out, why, _) = run(vec![b"hello world!"], blob(b"hello world")).await;
        assert!(out.last().unwrap().is_err() && why.unwrap().contains("more than its 11 bytes"));
    }
}
