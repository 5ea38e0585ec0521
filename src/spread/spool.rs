//! One blob on its way from upstream, as the head's relay serves it while it arrives: the copy
//! appends each chunk it has checked so far to a file ([`Spool::append`]) and every node's answer
//! follows that file as it grows ([`Spool::send`]). The blob's last byte goes out only once the
//! whole blob hashed to its digest ([`Spool::complete`]), so a node never finishes a blob that
//! turned out wrong; when the copy fails, or ends without finishing it, every follower is cut
//! ([`Spool::fail`]) and its pull fails. A blob the head's registry already holds is never
//! spooled: it is served from there ([`Arrival::InRegistry`]).

use std::collections::BTreeMap;
use std::io::{SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWrite};
use tokio::sync::watch;

use crate::link::server::write_bounded;
use crate::registry::manifest::Descriptor;

/// One read of a spool file.
const CHUNK: usize = 256 << 10;

/// Where a blob stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arrival {
    /// The copy has not come to it yet.
    Waiting,
    /// This many bytes are in the file, checked so far.
    Arriving(u64),
    /// Every byte is in the file, and they hash to the digest.
    Complete,
    /// The head's registry has it whole: nothing comes through the spool.
    InRegistry,
    /// The copy could not fetch it (why).
    Failed(String),
}

pub struct Spool {
    path: PathBuf,
    pub blob: Descriptor,
    file: Mutex<Option<std::fs::File>>,
    arrival: watch::Sender<Arrival>,
}

impl Spool {
    fn new(path: PathBuf, blob: Descriptor) -> Spool {
        Spool { path, blob, file: Mutex::new(None), arrival: watch::Sender::new(Arrival::Waiting) }
    }

    pub fn arrival(&self) -> Arrival {
        self.arrival.borrow().clone()
    }

    /// The copy found it in the head's registry.
    pub fn in_registry(&self) {
        self.arrival.send_replace(Arrival::InRegistry);
    }

    /// The next checked bytes of the blob, in order.
    pub fn append(&self, chunk: &[u8]) -> std::io::Result<()> {
        let mut file = self.file.lock().map_err(|_| std::io::Error::other("a writer of this spool panicked"))?;
        if file.is_none() {
            *file = Some(std::fs::OpenOptions::new().create_new(true).append(true).open(&self.path)?);
        }
        if let Some(file) = file.as_mut() {
            file.write_all(chunk)?;
        }
        let arrived = match self.arrival() {
            Arrival::Arriving(before) => before + chunk.len() as u64,
            _ => chunk.len() as u64,
        };
        self.arrival.send_replace(Arrival::Arriving(arrived));
        Ok(())
    }

    /// Every byte arrived and the blob hashed to its digest.
    pub fn complete(&self) {
        self.arrival.send_replace(Arrival::Complete);
    }

    /// The copy of this blob failed: its followers are cut. A blob already complete or in the
    /// registry stays so (what failed afterwards does not change its bytes).
    pub fn fail(&self, why: &str) {
        self.arrival.send_if_modified(|arrival| match arrival {
            Arrival::Complete | Arrival::InRegistry | Arrival::Failed(_) => false,
            _ => {
                *arrival = Arrival::Failed(why.to_string());
                true
            }
        });
    }

    /// Until the copy has come to it: how it will be served (never [`Arrival::Waiting`]).
    pub async fn settled(&self) -> Arrival {
        let mut arrival = self.arrival.subscribe();
        let settled = match arrival.wait_for(|arrival| *arrival != Arrival::Waiting).await {
            Ok(settled) => settled.clone(),
            Err(_) => Arrival::Failed("the copy ended".into()),
        };
        settled
    }

    /// Send bytes `start..end` of the blob to `out` as they arrive, counting them into `sent`;
    /// the blob's last byte only once it is complete. An error when the copy failed or the
    /// receiver went away: the answer is cut there.
    pub async fn send(
        &self,
        start: u64,
        end: u64,
        out: &mut (impl AsyncWrite + Unpin),
        sent: &AtomicU64,
    ) -> std::io::Result<()> {
        let mut arrival = self.arrival.subscribe();
        let mut file: Option<tokio::fs::File> = None;
        let mut offset = start;
        let mut buffer = vec![0u8; CHUNK];
        while offset < end {
            let readable = match arrival.borrow_and_update().clone() {
                Arrival::Arriving(arrived) => arrived.min(self.blob.size.saturating_sub(1)),
                Arrival::Complete => self.blob.size,
                Arrival::Failed(why) => return Err(std::io::Error::other(why)),
                Arrival::Waiting | Arrival::InRegistry => 0,
            }
            .min(end);
            if readable <= offset {
                if arrival.changed().await.is_err() {
                    return Err(std::io::Error::other("the copy ended before the blob was complete"));
                }
                continue;
            }
            if file.is_none() {
                let mut opened = tokio::fs::File::open(&self.path).await?;
                opened.seek(SeekFrom::Start(offset)).await?;
                file = Some(opened);
            }
            let Some(reading) = file.as_mut() else { continue };
            while offset < readable {
                let want = buffer.len().min(usize::try_from(readable - offset).unwrap_or(usize::MAX));
                let read = reading.read(&mut buffer[..want]).await?;
                if read == 0 {
                    return Err(std::io::Error::other("the spool file is shorter than what arrived"));
                }
                // Waiting for the bytes to arrive is bounded by the copy, which fails or completes it.
                write_bounded(out, &buffer[..read]).await?;
                sent.fetch_add(read as u64, Ordering::SeqCst);
                offset += read as u64;
            }
        }
        Ok(())
    }
}

/// A spool for each blob of one image, in a directory of their own that goes with them.
pub struct Spools {
    _dir: tempfile::TempDir,
    by_digest: BTreeMap<String, Arc<Spool>>,
}

impl Spools {
    /// Spools for `blobs`, under `parent`.
    pub fn new(parent: &Path, blobs: &[Descriptor]) -> std::io::Result<Spools> {
        std::fs::create_dir_all(parent)?;
        let dir = tempfile::Builder::new().prefix("relay-").tempdir_in(parent)?;
        let by_digest = blobs
            .iter()
            .enumerate()
            .map(|(index, blob)| {
                (blob.digest.clone(), Arc::new(Spool::new(dir.path().join(index.to_string()), blob.clone())))
            })
            .collect();
        Ok(Spools { _dir: dir, by_digest })
    }

    pub fn get(&self, digest: &str) -> Option<&Arc<Spool>> {
        self.by_digest.get(digest)
    }

    /// The copy ended: whatever it did not finish is cut, for `why`.
    pub fn fail_unfinished(&self, why: &str) {
        for spool in self.by_digest.values() {
            spool.fail(why);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::registry::manifest::sha256_digest;

    fn one_spool(dir: &Path, bytes: &[u8]) -> (Spools, Arc<Spool>) {
        let blob = Descriptor { media_type: String::new(), digest: sha256_digest(bytes), size: bytes.len() as u64 };
        let spools = Spools::new(dir, std::slice::from_ref(&blob)).unwrap();
        let spool = spools.get(&blob.digest).unwrap().clone();
        (spools, spool)
    }

    /// Bytes `start..end` of `spool`, as a follower gets them (in a task: it waits for arrivals).
    fn follow(spool: &Arc<Spool>, start: u64, end: u64) -> tokio::task::JoinHandle<(std::io::Result<()>, Vec<u8>)> {
        let spool = spool.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            let sent = AtomicU64::new(0);
            let result = spool.send(start, end, &mut out, &sent).await;
            assert_eq!(sent.load(Ordering::SeqCst), out.len() as u64);
            (result, out)
        })
    }

    async fn settle() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    #[tokio::test]
    async fn a_follower_gets_the_bytes_as_they_arrive_and_the_last_once_complete() {
        let dir = tempfile::tempdir().unwrap();
        let (_spools, spool) = one_spool(dir.path(), b"hello world");
        let whole = follow(&spool, 0, 11);
        let tail = follow(&spool, 6, 11);
        settle().await;
        spool.append(b"hello ").unwrap();
        spool.append(b"world").unwrap();
        settle().await;
        assert!(!whole.is_finished() && !tail.is_finished(), "the last byte waits for the digest check");
        spool.complete();
        let (result, bytes) = tokio::time::timeout(Duration::from_secs(5), whole).await.unwrap().unwrap();
        assert_eq!((result.is_ok(), bytes), (true, b"hello world".to_vec()));
        let (result, bytes) = tail.await.unwrap();
        assert_eq!((result.is_ok(), bytes), (true, b"world".to_vec()));
        // A later follower reads the complete file.
        let (result, bytes) = follow(&spool, 2, 5).await.unwrap();
        assert_eq!((result.is_ok(), bytes), (true, b"llo".to_vec()));
    }

    #[tokio::test]
    async fn a_failed_copy_cuts_its_followers_short_of_the_blob() {
        let dir = tempfile::tempdir().unwrap();
        let (spools, spool) = one_spool(dir.path(), b"hello world");
        let whole = follow(&spool, 0, 11);
        spool.append(b"hello world").unwrap();
        settle().await;
        spools.fail_unfinished("upstream sent other bytes");
        let (result, bytes) = tokio::time::timeout(Duration::from_secs(5), whole).await.unwrap().unwrap();
        assert!(result.unwrap_err().to_string().contains("other bytes"));
        assert_eq!(bytes, b"hello worl", "never the whole blob");
        assert!(follow(&spool, 0, 11).await.unwrap().0.is_err(), "a later follower gets nothing either");
    }

    #[tokio::test]
    async fn the_copy_going_away_cuts_followers_and_a_complete_blob_stays_complete() {
        let dir = tempfile::tempdir().unwrap();
        let (spools, spool) = one_spool(dir.path(), b"hi");
        assert_eq!(spool.arrival(), Arrival::Waiting);
        let settled = {
            let spool = spool.clone();
            tokio::spawn(async move { spool.settled().await })
        };
        spool.in_registry();
        assert_eq!(settled.await.unwrap(), Arrival::InRegistry);
        spools.fail_unfinished("done");
        assert_eq!(spool.arrival(), Arrival::InRegistry);

        let (spools, spool) = one_spool(dir.path(), b"hi");
        spool.append(b"hi").unwrap();
        spool.complete();
        spools.fail_unfinished("the copy failed on another blob");
        assert_eq!(spool.arrival(), Arrival::Complete);
    }
}
