//! Manifests as the copy sees them: their exact bytes (their digest is the sha256 of those
//! bytes), their media type, and what they refer to — an index its manifests, an image manifest
//! its config and layers — so that everything a pull by digest needs exists in the copy.

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker's schema 1, which no current registry serves by digest: refused with its own message.
const DOCKER_SCHEMA1: &str = "application/vnd.docker.distribution.manifest.v1";

/// The Accept header of a manifest request: every kind the copy can copy.
pub fn accepted() -> String {
    [OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST].join(", ")
}

/// `sha256:HEX` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// What a manifest or a blob is, as another manifest refers to it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Descriptor {
    #[serde(rename = "mediaType", default)]
    pub media_type: String,
    pub digest: String,
    pub size: u64,
}

/// A manifest as the registry served it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub media_type: String,
    /// sha256 of `bytes`.
    pub digest: String,
    pub bytes: Vec<u8>,
}

/// What a manifest refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contents {
    /// An index (manifest list): its manifests, one per platform, attestations included.
    Index(Vec<Descriptor>),
    /// One image: its config blob and layer blobs.
    Image { config: Descriptor, layers: Vec<Descriptor> },
}

/// The fields of both kinds that matter here.
#[derive(Deserialize)]
struct Fields {
    #[serde(rename = "mediaType", default)]
    media_type: Option<String>,
    #[serde(rename = "schemaVersion", default)]
    schema_version: Option<u32>,
    #[serde(default)]
    manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Option<Vec<Descriptor>>,
}

impl Manifest {
    /// `bytes` served with `content_type` (the JSON's own `mediaType` when the header says nothing
    /// useful).
    pub fn new(bytes: Vec<u8>, content_type: Option<&str>) -> Manifest {
        let header = content_type.map(|t| t.split(';').next().unwrap_or(t).trim().to_string());
        let header = header.filter(|t| !t.is_empty() && t != "application/json" && t != "text/plain");
        let own = serde_json::from_slice::<Fields>(&bytes).ok().and_then(|f| f.media_type);
        let media_type = header.or(own).unwrap_or_default();
        Manifest { digest: sha256_digest(&bytes), media_type, bytes }
    }

    /// What it refers to; an error message when it is no manifest the copy knows.
    pub fn contents(&self) -> Result<Contents, String> {
        if self.media_type.starts_with(DOCKER_SCHEMA1) {
            return Err("it is a Docker schema 1 manifest, which cannot be copied by digest".into());
        }
        let fields: Fields =
            serde_json::from_slice(&self.bytes).map_err(|e| format!("its manifest is not valid JSON ({e})"))?;
        if fields.schema_version == Some(1) {
            return Err("it is a Docker schema 1 manifest, which cannot be copied by digest".into());
        }
        match (fields.manifests, fields.config) {
            (Some(manifests), _) => Ok(Contents::Index(manifests)),
            (None, Some(config)) => Ok(Contents::Image { config, layers: fields.layers.unwrap_or_default() }),
            (None, None) => Err(format!("its manifest ({}) lists neither manifests nor a config", self.media_type)),
        }
    }

    /// The media type to PUT it with (the JSON's own when the registry gave none).
    pub fn put_type(&self) -> &str {
        if self.media_type.is_empty() {
            OCI_MANIFEST
        } else {
            &self.media_type
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[
        {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:aa","size":10,
         "platform":{"architecture":"amd64","os":"linux"}},
        {"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:bb","size":20,
         "annotations":{"vnd.docker.reference.type":"attestation-manifest"}}]}"#;

    #[test]
    fn an_index_lists_its_manifests_and_keeps_its_bytes() {
        let index = Manifest::new(INDEX.as_bytes().to_vec(), Some("application/vnd.oci.image.index.v1+json"));
        assert_eq!(index.digest, sha256_digest(INDEX.as_bytes()));
        let Contents::Index(children) = index.contents().unwrap() else { panic!("an index") };
        assert_eq!(children.iter().map(|c| c.digest.as_str()).collect::<Vec<_>>(), ["sha256:aa", "sha256:bb"]);
        // A registry that answers application/json: the JSON's own type.
        assert_eq!(Manifest::new(INDEX.as_bytes().to_vec(), Some("application/json")).media_type, OCI_INDEX);
    }

    #[test]
    fn an_image_lists_config_and_layers_and_schema1_is_refused() {
        let image = r#"{"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
            "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":"sha256:cc","size":3},
            "layers":[{"mediaType":"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"sha256:dd","size":4}]}"#;
        let manifest = Manifest::new(image.as_bytes().to_vec(), None);
        assert_eq!(manifest.put_type(), DOCKER_MANIFEST);
        let Contents::Image { config, layers } = manifest.contents().unwrap() else { panic!("an image") };
        assert_eq!((config.digest.as_str(), layers[0].size), ("sha256:cc", 4));
        let old = Manifest::new(br#"{"schemaVersion":1,"fsLayers":[]}"#.to_vec(), None);
        assert!(old.contents().unwrap_err().contains("schema 1"));
        assert!(Manifest::new(b"{}".to_vec(), None).contents().is_err());
    }
}
