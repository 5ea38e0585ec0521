//! A blob of the Hub's cache and the hash its name is. huggingface_hub names a blob by the file's
//! ETag and never checks it: 64 hex characters are an LFS file's sha256, 40 are the git blob id
//! (`sha1("blob LEN\0" + content)`) of a regular file. So the name alone says how to check it.

use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha1::Sha1;
use sha2::{Digest, Sha256};

/// What a blob read holds at once.
const CHUNK: usize = 1 << 20;

/// A blob's name: the hash of its content.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BlobName(String);

/// How a blob name was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobHash {
    /// An LFS file: sha256 of the content.
    Sha256,
    /// A regular git file: its git blob id.
    GitSha1,
}

impl BlobName {
    /// 64 or 40 lowercase hex characters; anything else is no blob name (and no path either).
    pub fn parse(text: &str) -> Option<BlobName> {
        let hex = text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (hex && matches!(text.len(), 64 | 40)).then(|| BlobName(text.to_string()))
    }

    pub fn hash(&self) -> BlobHash {
        if self.0.len() == 64 {
            BlobHash::Sha256
        } else {
            BlobHash::GitSha1
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BlobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for BlobName {
    type Error = String;

    fn try_from(text: String) -> Result<BlobName, String> {
        BlobName::parse(&text).ok_or_else(|| format!("{text:?} is not a blob name (64 or 40 hex)"))
    }
}

impl From<BlobName> for String {
    fn from(name: BlobName) -> String {
        name.0
    }
}

/// Hashes a blob's bytes as they stream by, the way its name was made.
pub enum BlobHasher {
    Sha256(Sha256),
    GitSha1(Sha1),
}

impl BlobHasher {
    /// For blob `name` of `size` bytes (a git blob id hashes its length first).
    pub fn new(name: &BlobName, size: u64) -> BlobHasher {
        match name.hash() {
            BlobHash::Sha256 => BlobHasher::Sha256(Sha256::new()),
            BlobHash::GitSha1 => {
                let mut sha1 = Sha1::new();
                sha1.update(format!("blob {size}\0").as_bytes());
                BlobHasher::GitSha1(sha1)
            }
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            BlobHasher::Sha256(hasher) => hasher.update(bytes),
            BlobHasher::GitSha1(hasher) => hasher.update(bytes),
        }
    }

    /// The hash as a blob name would spell it.
    pub fn finish(self) -> String {
        let bytes = match self {
            BlobHasher::Sha256(hasher) => hasher.finalize().to_vec(),
            BlobHasher::GitSha1(hasher) => hasher.finalize().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The hash of the file at `path` (symlinks followed), made as `name` says; None when the file
/// changed size while it was read. Blocking: large blobs take seconds.
pub fn hash_file(path: &Path, name: &BlobName) -> std::io::Result<Option<String>> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut hasher = BlobHasher::new(name, size);
    let mut buffer = vec![0u8; CHUNK];
    let mut seen = 0u64;
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        seen += read as u64;
        hasher.update(&buffer[..read]);
    }
    Ok((seen == size).then(|| hasher.finish()))
}

/// Whether the file at `path` is blob `name`: its content hashes to its name.
pub fn file_matches(path: &Path, name: &BlobName) -> std::io::Result<bool> {
    Ok(hash_file(path, name)?.as_deref() == Some(name.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git hash-object` of "hello\n", and sha256 of the same bytes.
    const GIT_HELLO: &str = "ce013625030ba8dba906f756967f9e9ca394464a";
    const SHA256_HELLO: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

    #[test]
    fn the_name_picks_the_hash() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("blob");
        std::fs::write(&file, "hello\n").unwrap();
        let git = BlobName::parse(GIT_HELLO).unwrap();
        let lfs = BlobName::parse(SHA256_HELLO).unwrap();
        assert_eq!((git.hash(), lfs.hash()), (BlobHash::GitSha1, BlobHash::Sha256));
        assert!(file_matches(&file, &git).unwrap());
        assert!(file_matches(&file, &lfs).unwrap());
        std::fs::write(&file, "hellO\n").unwrap();
        assert!(!file_matches(&file, &git).unwrap());
        assert!(!file_matches(&file, &lfs).unwrap());
    }

    #[test]
    fn a_streamed_hash_is_the_files() {
        let name = BlobName::parse(GIT_HELLO).unwrap();
        let mut hasher = BlobHasher::new(&name, 6);
        hasher.update(b"hel");
        hasher.update(b"lo\n");
        assert_eq!(hasher.finish(), GIT_HELLO);
    }

    #[test]
    fn only_hex_of_the_two_lengths_is_a_name() {
        for bad in ["", "../../etc/passwd", &GIT_HELLO.to_uppercase(), &GIT_HELLO[..39], &format!("{GIT_HELLO}0")] {
            assert!(BlobName::parse(bad).is_none(), "{bad:?}");
        }
        assert!(serde_json::from_str::<BlobName>("\"x/../y\"").is_err());
    }
}
