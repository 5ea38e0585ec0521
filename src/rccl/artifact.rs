//! Opening an RCCL artifact as the build-rccl workflow ships it: `librccl.so.1`,
//! `librccl.so.1.gz`, or the GitHub artifact `.zip` holding either. The format is told by magic
//! bytes, never by the file name (GitHub renames downloads; people rename files).

use std::io::{Cursor, Read};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

const GZIP_MAGIC: &[u8] = b"\x1f\x8b";
const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
/// An empty zip is just the end-of-central-directory record.
const EMPTY_ZIP_MAGIC: &[u8] = b"PK\x05\x06";
/// The largest library we are willing to hold in memory after unpacking; a multi-target
/// librccl is a few hundred MB, so this only stops decompression bombs and lying headers.
pub const MAX_LIBRARY_SIZE: u64 = 4 << 30;

/// The outer wrapping of the artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactFormat {
    So,
    Gz,
    Zip,
}

impl ArtifactFormat {
    pub fn name(self) -> &'static str {
        match self {
            ArtifactFormat::So => "so",
            ArtifactFormat::Gz => "gz",
            ArtifactFormat::Zip => "zip",
        }
    }
}

/// The library unwrapped from its artifact.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub format: ArtifactFormat,
    /// The zip entry the library came from.
    pub member: Option<String>,
    /// The uncompressed shared object.
    pub library: Vec<u8>,
}

/// Read `path` and unwrap it down to the shared object's bytes.
pub fn open(path: &Path) -> Result<Artifact> {
    let bytes = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    unwrap(path, bytes)
}

/// Unwrap already-read artifact bytes; `path` is only for messages.
pub fn unwrap(path: &Path, bytes: Vec<u8>) -> Result<Artifact> {
    if bytes.starts_with(ZIP_MAGIC) || bytes.starts_with(EMPTY_ZIP_MAGIC) {
        let (member, inner) = zip_member(path, &bytes)?;
        let library = if inner.starts_with(GZIP_MAGIC) { gunzip(path, &inner, Some(&member))? } else { inner };
        return Ok(Artifact { format: ArtifactFormat::Zip, member: Some(member), library });
    }
    if bytes.starts_with(GZIP_MAGIC) {
        let library = gunzip(path, &bytes, None)?;
        return Ok(Artifact { format: ArtifactFormat::Gz, member: None, library });
    }
    Ok(Artifact { format: ArtifactFormat::So, member: None, library: bytes })
}

fn gunzip(path: &Path, compressed: &[u8], member: Option<&str>) -> Result<Vec<u8>> {
    let what = match member {
        Some(member) => format!("{} (zip entry {member})", path.display()),
        None => path.display().to_string(),
    };
    let mut library = Vec::new();
    flate2::read::MultiGzDecoder::new(compressed).take(MAX_LIBRARY_SIZE + 1).read_to_end(&mut library).map_err(
        |e| {
            Error::artifact(
                path,
                format!("{what}: the gzip data is truncated or corrupt ({e})"),
                "download the build-rccl artifact again (`gzip -t FILE` checks a .gz file)",
            )
        },
    )?;
    if library.len() as u64 > MAX_LIBRARY_SIZE {
        return Err(Error::artifact(
            path,
            format!("{what}: unpacks to more than {MAX_LIBRARY_SIZE} bytes, far larger than any librccl"),
            "give librccl.so.1.gz from the build-rccl workflow",
        ));
    }
    Ok(library)
}

/// Rank of a zip entry's base name as the library: lower is better, None is not a candidate.
fn member_rank(base_name: &str) -> Option<u8> {
    match base_name {
        "librccl.so.1" => Some(0),
        "librccl.so.1.gz" => Some(1),
        name if name.starts_with("librccl.so.1.") => Some(2),
        name if name.starts_with("librccl.so") => Some(3),
        _ => None,
    }
}

/// The best librccl entry of a zip, by name, with its bytes.
fn zip_member(path: &Path, bytes: &[u8]) -> Result<(String, Vec<u8>)> {
    let unreadable = |e: zip::result::ZipError| {
        Error::artifact(
            path,
            format!("{}: not a readable zip archive ({e}); the download is probably truncated", path.display()),
            "download the build-rccl artifact again (`unzip -t FILE` checks it)",
        )
    };
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(unreadable)?;
    let names: Vec<String> = archive.file_names().map(str::to_string).collect();
    let chosen = names
        .iter()
        .enumerate()
        .filter(|(_, name)| !name.ends_with('/'))
        .filter_map(|(index, name)| {
            let base = name.rsplit('/').next().unwrap_or(name);
            member_rank(base).map(|rank| (rank, name.len(), index))
        })
        .min();
    let Some((_, _, index)) = chosen else {
        let mut listed: Vec<&str> = names.iter().map(String::as_str).take(10).collect();
        if names.len() > listed.len() {
            listed.push("...");
        }
        return Err(Error::artifact(
            path,
            format!(
                "{}: the zip holds no librccl.so.1 (entries: {})",
                path.display(),
                if listed.is_empty() { "none".to_string() } else { listed.join(", ") }
            ),
            "give the build-rccl workflow's artifact, which holds librccl.so.1 or librccl.so.1.gz",
        ));
    };
    let mut entry = archive.by_index(index).map_err(unreadable)?;
    let name = entry.name().to_string();
    if entry.size() > MAX_LIBRARY_SIZE {
        return Err(Error::artifact(
            path,
            format!("{}: zip entry {name} claims {} bytes, far larger than any librccl", path.display(), entry.size()),
            "download the build-rccl artifact again",
        ));
    }
    let mut inner = Vec::new();
    (&mut entry).take(MAX_LIBRARY_SIZE + 1).read_to_end(&mut inner).map_err(|e| {
        Error::artifact(
            path,
            format!("{}: zip entry {name} is truncated or corrupt ({e})", path.display()),
            "download the build-rccl artifact again",
        )
    })?;
    Ok((name, inner))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).expect("gzip");
        encoder.finish().expect("gzip")
    }

    fn zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default();
        for (name, data) in entries {
            writer.start_file(*name, options).expect("zip entry");
            writer.write_all(data).expect("zip write");
        }
        writer.finish().expect("zip finish").into_inner()
    }

    const LIBRARY: &[u8] = b"\x7fELF pretend library";

    #[test]
    fn plain_gz_and_zip_unwrap_to_the_same_library() {
        let path = Path::new("artifact");
        let plain = unwrap(path, LIBRARY.to_vec()).expect("plain");
        assert_eq!((plain.format, plain.library.as_slice()), (ArtifactFormat::So, LIBRARY));
        let gzipped = unwrap(path, gz(LIBRARY)).expect("gz");
        assert_eq!((gzipped.format, gzipped.library.as_slice()), (ArtifactFormat::Gz, LIBRARY));
        let zipped = unwrap(path, zip(&[("README", b"x"), ("lib/librccl.so.1", LIBRARY)])).expect("zip");
        assert_eq!(zipped.format, ArtifactFormat::Zip);
        assert_eq!(zipped.member.as_deref(), Some("lib/librccl.so.1"));
        assert_eq!(zipped.library, LIBRARY);
        let zipped_gz = unwrap(path, zip(&[("librccl.so.1.gz", &gz(LIBRARY))])).expect("zip of gz");
        assert_eq!(zipped_gz.library, LIBRARY);
    }

    #[test]
    fn prefers_librccl_so_1_over_other_names() {
        let data = zip(&[("librccl.so", b"link"), ("librccl.so.1.gz", &gz(b"gz")), ("librccl.so.1", LIBRARY)]);
        let artifact = unwrap(Path::new("a.zip"), data).expect("zip");
        assert_eq!(artifact.member.as_deref(), Some("librccl.so.1"));
    }

    #[test]
    fn truncated_gzip_and_zip_fail_with_advice() {
        let gzipped = gz(&[5u8; 10_000]);
        let error = unwrap(Path::new("x.gz"), gzipped[..gzipped.len() / 2].to_vec()).expect_err("truncated gz");
        assert!(error.to_string().contains("truncated or corrupt"), "{error}");
        assert_eq!(error.kind(), crate::error::ErrorKind::Artifact);
        assert_eq!(error.fix(), Some("download the build-rccl artifact again (`gzip -t FILE` checks a .gz file)"));
        let zipped = zip(&[("librccl.so.1", LIBRARY)]);
        let error = unwrap(Path::new("x.zip"), zipped[..zipped.len() - 30].to_vec()).expect_err("truncated zip");
        assert!(error.to_string().contains("not a readable zip archive"), "{error}");
    }

    #[test]
    fn a_zip_without_librccl_names_what_it_holds() {
        let error = unwrap(Path::new("x.zip"), zip(&[("notes.txt", b"hi")])).expect_err("no librccl");
        let message = error.to_string();
        assert!(message.contains("no librccl.so.1") && message.contains("notes.txt"), "{message}");
    }
}
