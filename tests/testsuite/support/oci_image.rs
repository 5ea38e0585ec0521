//! Images made here and pushed straight to the loopback registry over its HTTP API, as a
//! publisher's CI would push them: buildx-like, an OCI index listing the image and an attestation
//! manifest. Every byte is known, so a test can tell what crossed the uplink and the cluster link.
//! Layers are plain tars (exact sizes, and quick in a debug build); nothing here goes through a
//! node or its uplink.

use std::time::Duration;

use serde_json::json;
use sha2::{Digest as _, Sha256};

use super::registry::Registry;

/// A file, directory or symlink of a layer.
pub enum Entry {
    Dir(&'static str, u32),
    File(String, Vec<u8>, u32),
    Symlink(String, &'static str),
}

/// A layer: a tar of `entries`.
pub fn layer(entries: &[Entry]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        match entry {
            Entry::Dir(path, mode) => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(*mode);
                header.set_size(0);
                builder.append_data(&mut header, path, std::io::empty()).expect("tar dir");
            }
            Entry::File(path, contents, mode) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(*mode);
                header.set_size(contents.len() as u64);
                builder.append_data(&mut header, path, contents.as_slice()).expect("tar file");
            }
            Entry::Symlink(path, target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_mode(0o777);
                header.set_size(0);
                builder.append_link(&mut header, path, target).expect("tar symlink");
            }
        }
    }
    builder.into_inner().expect("tar")
}

/// `len` bytes no compressor can shrink, the same for the same `seed`.
pub fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

/// The stand-in toolbox's root: busybox and the applets the tests use, passwd, group, os-release.
pub fn stand_in_root() -> Vec<Entry> {
    let mut entries = vec![
        Entry::Dir("bin", 0o755),
        Entry::Dir("etc", 0o755),
        Entry::Dir("lib", 0o755),
        Entry::Dir("tmp", 0o1777),
        Entry::File("bin/busybox".into(), std::fs::read("/bin/busybox").expect("busybox (busybox-static)"), 0o755),
    ];
    for tool in ["sh", "sleep", "cat", "id", "true", "false", "echo", "ls", "env", "dd", "grep", "find"] {
        entries.push(Entry::Symlink(format!("bin/{tool}"), "busybox"));
    }
    entries.extend([
        Entry::File("etc/passwd".into(), b"root:x:0:0:root:/root:/bin/sh\n".to_vec(), 0o644),
        Entry::File("etc/group".into(), b"root:x:0:\n".to_vec(), 0o644),
        Entry::File("etc/os-release".into(), b"ID=busybox\nNAME=\"stand-in\"\n".to_vec(), 0o644),
        Entry::File("lib/libc.so.6".into(), Vec::new(), 0o644),
    ]);
    entries
}

/// What to publish.
pub struct ImageSpec {
    /// `name:tag` in the registry.
    pub name: String,
    /// RFC 3339: the config's `created` and the OCI created label (the pin).
    pub created: String,
    pub layers: Vec<Vec<u8>>,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Vec<String>,
    /// An index with an attestation manifest beside the image (buildx's default); else the image
    /// manifest alone.
    pub index: bool,
}

/// What was published.
#[derive(Debug, Clone)]
pub struct Published {
    /// `127.0.0.1:PORT/name:tag`
    pub reference: String,
    /// `127.0.0.1:PORT/name`
    pub repository: String,
    /// What the tag names: the index's digest (or the manifest's).
    pub digest: String,
    /// The image manifest's own digest (an index's platform manifest: a second digest of the
    /// same image).
    pub manifest_digest: String,
    /// Every manifest and blob, in bytes: what one copy of the image is.
    pub size: u64,
    /// The image's layers: (digest, size).
    pub layers: Vec<(String, u64)>,
}

impl Published {
    /// `repository@digest`
    pub fn pinned(&self) -> String {
        format!("{}@{}", self.repository, self.digest)
    }
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

fn descriptor(media_type: &str, bytes: &[u8]) -> serde_json::Value {
    json!({"mediaType": media_type, "digest": digest(bytes), "size": bytes.len()})
}

const LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
const CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// Push `spec` to `registry`.
pub fn publish(registry: &Registry, spec: &ImageSpec) -> Published {
    let (name, tag) = spec.name.split_once(':').expect("name:tag");
    let diff_ids: Vec<String> = spec.layers.iter().map(|layer| digest(layer)).collect();
    let mut config = json!({
        "architecture": "amd64",
        "os": "linux",
        "created": spec.created,
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": spec.cmd,
            "Labels": {"org.opencontainers.image.created": spec.created},
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    if let Some(entrypoint) = &spec.entrypoint {
        config["config"]["Entrypoint"] = json!(entrypoint);
    }
    let config = serde_json::to_vec(&config).expect("config");
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": descriptor(CONFIG, &config),
        "layers": spec.layers.iter().map(|layer| descriptor(LAYER, layer)).collect::<Vec<_>>(),
    }))
    .expect("manifest");
    let mut blobs: Vec<&[u8]> = spec.layers.iter().map(Vec::as_slice).chain([config.as_slice()]).collect();
    let mut manifests: Vec<(String, &'static str, Vec<u8>)> = vec![(digest(&manifest), MANIFEST, manifest.clone())];

    // buildx's attestation: an in-toto statement as the layer of a manifest for `unknown/unknown`.
    let statement = serde_json::to_vec(&json!({"_type": "https://in-toto.io/Statement/v0.1",
        "predicateType": "https://spdx.dev/Document", "subject": [{"name": spec.name}]}))
    .expect("statement");
    let attestation_config = serde_json::to_vec(&json!({"architecture": "unknown", "os": "unknown", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [digest(&statement)]}}))
    .expect("attestation config");
    let attestation = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": descriptor(CONFIG, &attestation_config),
        "layers": [{"mediaType": "application/vnd.in-toto+json", "digest": digest(&statement),
            "size": statement.len(), "annotations": {"in-toto.io/predicate-type": "https://spdx.dev/Document"}}],
    }))
    .expect("attestation");
    if spec.index {
        blobs.extend([statement.as_slice(), attestation_config.as_slice()]);
        let mut image = descriptor(MANIFEST, &manifest);
        image["platform"] = json!({"architecture": "amd64", "os": "linux"});
        let mut attests = descriptor(MANIFEST, &attestation);
        attests["platform"] = json!({"architecture": "unknown", "os": "unknown"});
        attests["annotations"] = json!({"vnd.docker.reference.digest": digest(&manifest),
            "vnd.docker.reference.type": "attestation-manifest"});
        let index = serde_json::to_vec(&json!({"schemaVersion": 2, "mediaType": INDEX,
            "manifests": [image, attests]}))
        .expect("index");
        manifests.push((digest(&attestation), MANIFEST, attestation.clone()));
        manifests.push((digest(&index), INDEX, index));
    }

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let client = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(60)).build().expect("client");
    let base = format!("http://{}/v2/{name}", registry.host());
    runtime.block_on(async {
        for blob in &blobs {
            let started = client.post(format!("{base}/blobs/uploads/")).send().await.expect("start upload");
            assert_eq!(started.status().as_u16(), 202, "start upload: {:?}", started.text().await);
            let location = started.headers()["location"].to_str().expect("location").to_string();
            let location =
                if location.starts_with("http") { location } else { format!("http://{}{location}", registry.host()) };
            let separator = if location.contains('?') { '&' } else { '?' };
            let put = client
                .put(format!("{location}{separator}digest={}", digest(blob)))
                .header("content-type", "application/octet-stream")
                .body(blob.to_vec())
                .send()
                .await
                .expect("upload");
            assert_eq!(put.status().as_u16(), 201, "upload: {:?}", put.text().await);
        }
        let last = manifests.len() - 1;
        for (index, (manifest_digest, media_type, bytes)) in manifests.iter().enumerate() {
            let reference = if index == last { tag.to_string() } else { manifest_digest.clone() };
            let put = client
                .put(format!("{base}/manifests/{reference}"))
                .header("content-type", *media_type)
                .body(bytes.clone())
                .send()
                .await
                .expect("put manifest");
            assert_eq!(put.status().as_u16(), 201, "put manifest: {:?}", put.text().await);
        }
    });
    let size = blobs.iter().map(|b| b.len() as u64).sum::<u64>()
        + manifests.iter().map(|(_, _, bytes)| bytes.len() as u64).sum::<u64>();
    Published {
        reference: format!("{}/{}", registry.host(), spec.name),
        repository: format!("{}/{name}", registry.host()),
        digest: manifests.last().expect("a manifest").0.clone(),
        manifest_digest: manifests[0].0.clone(),
        size,
        layers: spec.layers.iter().map(|layer| (digest(layer), layer.len() as u64)).collect(),
    }
}
