//! A stand-in for the Hugging Face Hub's HTTP API, for huggingface_hub's `snapshot_download` (0.36's,
//! research/model.md §2, and 2.x's, which the vLLM CPU image has): `GET
//! /api/models/{repo}/revision/{rev}` (the commit and the file list), `GET
//! /api/models/{repo}/tree/{rev}[/{path}]` (2.x lists the files with their sizes, git blob ids and
//! LFS sha256s: `list_repo_tree`, one page, `recursive=true` as the client asks it),
//! and `HEAD`/`GET /{repo}/resolve/{rev}/{path}` with the headers the client reads (`X-Repo-Commit`,
//! `ETag`, `X-Linked-Etag` and `X-Linked-Size` for LFS files, `Content-Length`, ranges). Errors
//! carry `X-Error-Code` as the Hub's do; unknown routes are 404. With a token set, a request
//! without `Authorization: Bearer TOKEN` gets the Hub's 401 `RepoNotFound`.
//!
//! Repositories are made by the test in memory: one commit each, `main` pointing at it. A file may
//! be sparse ([`HubFile::sparse`]): its first bytes held, the rest zeros up to its real size, which
//! `Content-Length`, `X-Linked-Size` and `Content-Range` say; a 60 GB checkpoint's shards are
//! served by ranges from a few hundred kilobytes of headers (a whole GET of one is refused: the
//! stand-in never streams gigabytes). Every request is logged (method, path, its range, whether
//! it carried the token). One thread per connection,
//! `Connection: close` after each answer; every read and the accept loop are bounded, and the
//! server stops when dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use sha1::Sha1;
use sha2::{Digest, Sha256};

/// Files stored with LFS on the Hub (their ETag is their sha256).
const LFS_SUFFIXES: &[&str] = &[".safetensors", ".bin", ".gguf", ".pt"];
const POLL: Duration = Duration::from_millis(20);
const READ_LIMIT: Duration = Duration::from_secs(10);

/// The most of a file a whole (unranged) GET serves; a sparse file past it is served by ranges.
const WHOLE_LIMIT: u64 = 64 << 20;

/// One file of a stand-in repository.
#[derive(Clone)]
pub struct HubFile {
    pub path: String,
    /// Its first bytes (all of them unless it is sparse).
    pub data: Vec<u8>,
    /// Its size: past `data`, zeros.
    pub size: u64,
}

impl HubFile {
    pub fn new(path: &str, data: impl Into<Vec<u8>>) -> HubFile {
        let data = data.into();
        HubFile { path: path.to_string(), size: data.len() as u64, data }
    }

    /// Every file of a model directory (not its folders), by name.
    pub fn all_in(dir: &std::path::Path) -> Vec<HubFile> {
        let mut files: Vec<HubFile> = std::fs::read_dir(dir)
            .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.is_file())
            .map(|path| {
                let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
                HubFile::new(&name, std::fs::read(&path).expect("read a model file"))
            })
            .collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        files
    }

    /// A file of `size` bytes whose first are `head` and the rest zeros, held as `head` alone.
    pub fn sparse(path: &str, head: Vec<u8>, size: u64) -> HubFile {
        assert!(head.len() as u64 <= size, "{path}: {} bytes of head in a file of {size}", head.len());
        HubFile { path: path.to_string(), data: head, size }
    }

    fn is_sparse(&self) -> bool {
        self.size > self.data.len() as u64
    }

    pub fn is_lfs(&self) -> bool {
        LFS_SUFFIXES.iter().any(|suffix| self.path.ends_with(suffix))
    }

    /// What the Hub's tree listing says of it: its path and size, its git blob id (of its LFS
    /// pointer, for an LFS file) and, for an LFS file, its sha256 (`hf_api.py`'s `RepoFile`).
    fn tree_entry(&self) -> serde_json::Value {
        if !self.is_lfs() {
            return serde_json::json!({ "type": "file", "oid": self.etag(), "size": self.size, "path": self.path });
        }
        let sha256 = self.etag();
        let pointer = format!("version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {}\n", self.size);
        let mut sha1 = Sha1::new();
        sha1.update(format!("blob {}\0", pointer.len()).as_bytes());
        sha1.update(pointer.as_bytes());
        serde_json::json!({
            "type": "file", "oid": hex(&sha1.finalize()), "size": self.size, "path": self.path,
            "lfs": { "oid": sha256, "size": self.size, "pointerSize": pointer.len() },
        })
    }

    /// The blob name the cache gives it: sha256 for LFS files, the git blob id otherwise. A
    /// sparse file's is the sha256 of its head and size (never downloaded, never checked).
    pub fn etag(&self) -> String {
        if self.is_sparse() {
            let mut sha256 = Sha256::new();
            sha256.update(&self.data);
            sha256.update(self.size.to_le_bytes());
            hex(&sha256.finalize())
        } else if self.is_lfs() {
            hex(&Sha256::digest(&self.data))
        } else {
            let mut sha1 = Sha1::new();
            sha1.update(format!("blob {}\0", self.data.len()).as_bytes());
            sha1.update(&self.data);
            hex(&sha1.finalize())
        }
    }
}

struct Repo {
    commit: String,
    files: BTreeMap<String, HubFile>,
}

/// One request, as the stand-in saw it.
#[derive(Debug, Clone)]
pub struct HubRequest {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// Its `Range` header, as sent.
    pub range: Option<String>,
    /// The `Authorization` header was `Bearer TOKEN`.
    pub authorized: bool,
    /// Bytes of the body sent.
    pub sent: u64,
}

pub struct HubStandIn {
    pub port: u16,
    log: Arc<Mutex<Vec<HubRequest>>>,
    stopping: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl HubStandIn {
    /// Serve `repos` (id → files) on 127.0.0.1; with `token`, only to requests carrying it.
    pub fn start(repos: &[(&str, Vec<HubFile>)], token: Option<&str>) -> HubStandIn {
        let repos: BTreeMap<String, Repo> = repos
            .iter()
            .map(|(id, files)| {
                let files: BTreeMap<String, HubFile> = files.iter().map(|f| (f.path.clone(), f.clone())).collect();
                let listing: Vec<String> = files.values().map(|f| format!("{}={}", f.path, f.etag())).collect();
                let commit = hex(&Sha1::digest(listing.join("\n").as_bytes()));
                (id.to_string(), Repo { commit, files })
            })
            .collect();
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the Hub stand-in");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("address").port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stopping = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared { repos, token: token.map(str::to_string), log: log.clone() });
        let stop = stopping.clone();
        let accepting = std::thread::spawn(move || {
            let mut connections: Vec<JoinHandle<()>> = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((socket, _)) => {
                        let shared = shared.clone();
                        connections.push(std::thread::spawn(move || shared.answer(socket)));
                    }
                    Err(_) => std::thread::sleep(POLL),
                }
                connections.retain(|c| !c.is_finished());
            }
        });
        HubStandIn { port, log, stopping, accepting: Some(accepting) }
    }

    /// `http://127.0.0.1:PORT`: also the address inside every node once the uplink forwards it.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<HubRequest> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for HubStandIn {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(thread) = self.accepting.take() {
            let _ = thread.join();
        }
    }
}

struct Shared {
    repos: BTreeMap<String, Repo>,
    token: Option<String>,
    log: Arc<Mutex<Vec<HubRequest>>>,
}

/// An answer: status, headers, body (not sent for HEAD).
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

impl Shared {
    fn answer(&self, socket: TcpStream) {
        let _ = socket.set_read_timeout(Some(READ_LIMIT));
        let _ = socket.set_write_timeout(Some(READ_LIMIT));
        let Ok(clone) = socket.try_clone() else { return };
        let mut reader = BufReader::new(clone);
        let mut first = String::new();
        if reader.read_line(&mut first).is_err() {
            return;
        }
        let mut headers = BTreeMap::new();
        for _ in 0..100 {
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }
        let words: Vec<&str> = first.split_whitespace().collect();
        let (method, target) = match words.as_slice() {
            [method, target, _] => (method.to_string(), target.to_string()),
            _ => return,
        };
        let authorized = match (&self.token, headers.get("authorization")) {
            (Some(token), Some(given)) => *given == format!("Bearer {token}"),
            _ => false,
        };
        let (status, mut answer_headers, body) = self.route(&method, &target, &headers, authorized);
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push(HubRequest {
            method: method.clone(),
            path: target,
            status,
            range: headers.get("range").cloned(),
            authorized,
            sent: if method == "HEAD" { 0 } else { body.len() as u64 },
        });
        if !answer_headers.iter().any(|(name, _)| name == "Content-Length") {
            answer_headers.push(("Content-Length".into(), body.len().to_string()));
        }
        let mut text = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (name, value) in &answer_headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("Connection: close\r\n\r\n");
        let mut socket = socket;
        let _ = socket.write_all(text.as_bytes());
        if method != "HEAD" {
            let _ = socket.write_all(&body);
        }
        let _ = socket.flush();
        // Drain what the client may still send, then close.
        let _ = socket.shutdown(std::net::Shutdown::Write);
        let _ = reader.read(&mut [0u8; 1024]);
    }

    fn route(&self, method: &str, target: &str, headers: &BTreeMap<String, String>, authorized: bool) -> Answer {
        if method != "GET" && method != "HEAD" {
            return error(405, "NotAllowed", "method not allowed", &[]);
        }
        let path = target.split('?').next().unwrap_or_default();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        // /api/models/ORG/NAME/revision/REV, /api/models/ORG/NAME/tree/REV[/PATH], or
        // /ORG/NAME/resolve/REV/PATH...
        if let ["api", "models", org, name, "tree", rev, under @ ..] = parts.as_slice() {
            return self.tree(&format!("{org}/{name}"), &unquote(rev), &unquote(&under.join("/")), authorized);
        }
        let (repo_id, revision, file) = match parts.as_slice() {
            ["api", "models", org, name, "revision", rev] => (format!("{org}/{name}"), unquote(rev), None),
            [org, name, "resolve", rev, rest @ ..] if !rest.is_empty() => {
                (format!("{org}/{name}"), unquote(rev), Some(unquote(&rest.join("/"))))
            }
            _ => return error(404, "NotFound", "no such route", &[]),
        };
        let Some(repo) = self.repos.get(&repo_id) else {
            return error(401, "RepoNotFound", "Repository not found", &[]);
        };
        if self.token.is_some() && !authorized {
            return error(401, "RepoNotFound", "Repository not found", &[]);
        }
        if revision != "main" && revision != repo.commit {
            return error(404, "RevisionNotFound", &format!("Invalid rev id: {revision}"), &[]);
        }
        let Some(file) = file else {
            let siblings: Vec<serde_json::Value> =
                repo.files.keys().map(|path| serde_json::json!({ "rfilename": path })).collect();
            let body = serde_json::json!({
                "_id": "0".repeat(24), "id": repo_id, "modelId": repo_id, "sha": repo.commit, "private": false,
                "gated": false, "disabled": false, "tags": [], "lastModified": "2026-01-01T00:00:00.000Z",
                "siblings": siblings,
            });
            return (200, vec![("Content-Type".into(), "application/json".into())], body.to_string().into_bytes());
        };
        let Some(found) = repo.files.get(&file) else {
            return error(404, "EntryNotFound", "Entry not found", &[("X-Repo-Commit", &repo.commit)]);
        };
        let etag = found.etag();
        let mut answer = vec![
            ("X-Repo-Commit".to_string(), repo.commit.clone()),
            ("ETag".to_string(), format!("\"{etag}\"")),
            ("Accept-Ranges".to_string(), "bytes".to_string()),
            ("Content-Type".to_string(), "application/octet-stream".to_string()),
        ];
        if found.is_lfs() {
            answer.push(("X-Linked-Etag".into(), format!("\"{etag}\"")));
            answer.push(("X-Linked-Size".into(), found.size.to_string()));
        }
        let size = found.size;
        let range = headers.get("range").and_then(|r| r.strip_prefix("bytes=")).and_then(|r| r.split_once('-'));
        if let Some((start, end)) = range {
            let start: u64 = start.parse().unwrap_or(0).min(size);
            let end: u64 = end.parse().unwrap_or(size.saturating_sub(1)).min(size.saturating_sub(1));
            if end.saturating_sub(start) >= WHOLE_LIMIT {
                return error(416, "RangeTooLarge", "the stand-in serves at most 64 MiB a range", &[]);
            }
            let body = bytes_of(found, start, end.saturating_add(1));
            answer.push(("Content-Range".into(), format!("bytes {start}-{end}/{size}")));
            answer.push(("Content-Length".into(), body.len().to_string()));
            return (206, answer, body);
        }
        answer.push(("Content-Length".into(), size.to_string()));
        if method == "GET" && size > WHOLE_LIMIT {
            return error(416, "RangeRequired", "the stand-in serves a sparse file by ranges only", &[]);
        }
        (200, answer, bytes_of(found, 0, size))
    }

    /// Every file under `under` (the whole repository when empty) and the folders on the way to
    /// them, folders first, as the Hub's recursive tree listing gives them.
    fn tree(&self, repo_id: &str, revision: &str, under: &str, authorized: bool) -> Answer {
        let Some(repo) = self.repos.get(repo_id) else {
            return error(404, "RepoNotFound", "Repository not found", &[]);
        };
        if self.token.is_some() && !authorized {
            return error(401, "RepoNotFound", "Repository not found", &[]);
        }
        if revision != "main" && revision != repo.commit {
            return error(404, "RevisionNotFound", &format!("Invalid rev id: {revision}"), &[]);
        }
        let prefix = if under.is_empty() { String::new() } else { format!("{}/", under.trim_end_matches('/')) };
        let files: Vec<&HubFile> = repo.files.values().filter(|file| file.path.starts_with(&prefix)).collect();
        let mut folders: Vec<String> = files
            .iter()
            .flat_map(|file| {
                let parts: Vec<&str> = file.path.split('/').collect();
                (1..parts.len()).map(move |depth| parts[..depth].join("/"))
            })
            .filter(|folder| folder.starts_with(&prefix))
            .collect();
        folders.sort();
        folders.dedup();
        let mut entries: Vec<serde_json::Value> = folders
            .iter()
            .map(|folder| {
                let oid = hex(&Sha1::digest(format!("tree {folder}").as_bytes()));
                serde_json::json!({ "type": "directory", "oid": oid, "size": 0, "path": folder })
            })
            .collect();
        entries.extend(files.iter().map(|file| file.tree_entry()));
        let headers = vec![("Content-Type".to_string(), "application/json".to_string())];
        (200, headers, serde_json::Value::Array(entries).to_string().into_bytes())
    }
}

/// Bytes `start..end` of `file`: its held head, then zeros.
fn bytes_of(file: &HubFile, start: u64, end: u64) -> Vec<u8> {
    let held = file.data.len() as u64;
    let mut bytes = file.data.get(start.min(held) as usize..end.min(held) as usize).unwrap_or_default().to_vec();
    bytes.resize(end.saturating_sub(start) as usize, 0);
    bytes
}

fn error(status: u16, code: &str, message: &str, extra: &[(&str, &str)]) -> Answer {
    let mut headers = vec![
        ("X-Error-Code".to_string(), code.to_string()),
        ("X-Error-Message".to_string(), message.to_string()),
        ("Content-Type".to_string(), "application/json".to_string()),
    ];
    headers.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    (status, headers, serde_json::json!({ "error": message }).to_string().into_bytes())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        416 => "Range Not Satisfiable",
        _ => "Unknown",
    }
}

/// `%2F` and friends back to their characters.
fn unquote(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escaped = (bytes[index] == b'%' && index + 2 < bytes.len())
            .then(|| std::str::from_utf8(&bytes[index + 1..index + 3]).ok())
            .flatten()
            .and_then(|digits| u8::from_str_radix(digits, 16).ok());
        if let Some(byte) = escaped {
            out.push(byte);
            index += 3;
            continue;
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
