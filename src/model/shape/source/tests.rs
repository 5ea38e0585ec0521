use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::*;
use crate::model::gguf_pick::GgufPick;
use crate::model::shape::fixtures::{self, write_checkpoint};
use crate::model::shape::in_toolbox::testing::HereToolbox;
use crate::model::shape::ModelShape;
use crate::secret::Secret;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

/// One request the loopback Hub answered.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    range: Option<String>,
    authorized: bool,
    sent: u64,
}

/// A loopback stand-in for the Hub's two routes a plan uses, serving one repository from a
/// directory (sparse files): `GET /api/models/{repo}/revision/{rev}` and `GET
/// /{repo}/resolve/{rev}/{path}` with `Range`. With `token`, requests without it get 401.
struct LoopbackHub {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Clone)]
struct Served {
    repo: String,
    dir: PathBuf,
    token: Option<String>,
    /// Answer ranges with the whole file (a server that ignores `Range`).
    ignore_ranges: bool,
}

impl LoopbackHub {
    fn start(served: Served) -> LoopbackHub {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("address").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen_in, stop_in) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !stop_in.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((socket, _)) => answer(socket, &served, &seen_in),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        LoopbackHub { port, seen, stop, thread: Some(thread) }
    }

    fn access(&self, token: Option<&str>) -> HubAccess {
        HubAccess::new(Some(&format!("http://127.0.0.1:{}/", self.port)), token.map(|t| Secret::new(t.into())))
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for LoopbackHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(socket: TcpStream, served: &Served, seen: &Mutex<Vec<Seen>>) {
    let _ = socket.set_nonblocking(false);
    let _ = socket.set_read_timeout(Some(Duration::from_secs(10)));
    let mut reader = BufReader::new(socket.try_clone().expect("clone"));
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    let (mut range, mut authorization) = (None, None);
    for _ in 0..64 {
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(value.trim().to_string()),
                "authorization" => authorization = Some(value.trim().to_string()),
                _ => {}
            }
        }
    }
    let path = first.split_whitespace().nth(1).unwrap_or_default().to_string();
    let authorized = served.token.as_ref().is_some_and(|t| authorization.as_deref() == Some(&format!("Bearer {t}")));
    let (status, headers, body) = route(served, &path, range.as_deref(), authorized);
    seen.lock().unwrap_or_else(|p| p.into_inner()).push(Seen { path, range, authorized, sent: body.len() as u64 });
    let mut socket = socket;
    let mut text = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    let _ = socket.write_all(text.as_bytes());
    let _ = socket.write_all(&body);
}

fn route(served: &Served, path: &str, range: Option<&str>, authorized: bool) -> (u16, Vec<(String, String)>, Vec<u8>) {
    if served.token.is_some() && !authorized {
        return (401, vec![("X-Error-Code".into(), "RepoNotFound".into())], Vec::new());
    }
    let listing = format!("/api/models/{}/revision/", served.repo);
    if let Some(_revision) = path.strip_prefix(&listing) {
        let siblings: Vec<serde_json::Value> = std::fs::read_dir(&served.dir)
            .expect("the repository")
            .map(|e| serde_json::json!({ "rfilename": e.expect("entry").file_name().to_string_lossy() }))
            .collect();
        let body = serde_json::json!({ "id": served.repo, "sha": COMMIT, "siblings": siblings });
        return (200, vec![("Content-Type".into(), "application/json".into())], body.to_string().into_bytes());
    }
    let resolve = format!("/{}/resolve/{COMMIT}/", served.repo);
    let Some(file) = path.strip_prefix(&resolve) else { return (404, Vec::new(), Vec::new()) };
    let Ok(mut handle) = std::fs::File::open(served.dir.join(file)) else { return (404, Vec::new(), Vec::new()) };
    let size = handle.metadata().expect("metadata").len();
    let wanted = range
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.split_once('-'))
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?.min(size.saturating_sub(1)))));
    let (start, end, status) = match wanted {
        Some((start, end)) if !served.ignore_ranges => (start, end, 206),
        _ => (0, size.saturating_sub(1).min(1 << 20), 200),
    };
    let mut body = vec![0u8; (end + 1).saturating_sub(start) as usize];
    handle.seek(SeekFrom::Start(start)).expect("seek");
    handle.read_exact(&mut body).expect("read");
    let mut headers = vec![("Accept-Ranges".to_string(), "bytes".to_string())];
    if status == 206 {
        headers.push(("Content-Range".into(), format!("bytes {start}-{end}/{size}")));
    }
    (status, headers, body)
}

fn sized(read: &ShapeRead) -> &ModelShape {
    match &read.sizing {
        Sizing::Sized(shape) => shape,
        other => panic!("expected a shape: {other:?}"),
    }
}

/// The model at `path` (a directory, or a GGUF for `format`), read as a toolbox would, by this
/// machine's own sh and coreutils.
async fn read_path(path: &std::path::Path, format: ModelFormat, limits: ReadLimits) -> Result<ShapeRead> {
    let toolbox = HereToolbox { dir: std::env::temp_dir() };
    let hub = HubAccess::new(None, None);
    let source = ModelSource::Path(path.display().to_string());
    read_shape(&source, format, None, ModelAccess { hub: &hub, toolbox: Some(&toolbox) }, limits).await
}

async fn read_directory(path: &std::path::Path, limits: ReadLimits) -> Result<ShapeRead> {
    read_path(path, ModelFormat::Safetensors, limits).await
}

/// The model `source` names, on the Hub `access` reaches.
async fn read_hub(source: &ModelSource, format: ModelFormat, access: &HubAccess) -> Result<ShapeRead> {
    read_shape(source, format, None, ModelAccess { hub: access, toolbox: None }, ReadLimits::default()).await
}

#[tokio::test]
async fn qwen3_32b_from_its_headers_matches_the_hand_count() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let written = write_checkpoint(fixtures::QWEN3_32B, dir.path(), 4 << 30);
    let read = read_directory(dir.path(), ReadLimits::default()).await.expect("the shape");
    let weights = sized(&read).weights.clone().expect("weights");
    // Qwen3-32B in bfloat16 (parameters × 2 bytes):
    //   embedding and lm_head 151936 × 5120 = 777,912,320 each;
    //   a layer: q and o 8192 × 5120 = 41,943,040 each, k and v 1024 × 5120 = 5,242,880 each,
    //   gate/up/down 25600 × 5120 = 131,072,000 each, two norms of 5120, q_norm and k_norm of 128:
    //   487,598,336; 64 layers = 31,206,293,504; final norm 5120.
    //   Total 32,762,123,264 parameters = 65,524,246,528 bytes.
    assert_eq!(weights.total_bytes, 65_524_246_528);
    assert_eq!(weights.total_bytes, written.total_bytes);
    assert_eq!(weights.source, WeightSource::Headers);
    assert_eq!(weights.embedding_bytes, 1_555_824_640);
    assert_eq!(weights.output_bytes, 1_555_824_640 + 10_240);
    assert_eq!(weights.layers.len(), 64);
    assert_eq!(weights.layers[7].kv_bytes, 2 * 5_242_880 * 2);
    assert_eq!(weights.layers[7].split_bytes, (2 * 41_943_040 + 3 * 131_072_000) * 2);
    assert_eq!(weights.layers[7].replicated_bytes, (2 * 5120 + 2 * 128) * 2);
    assert_eq!(weights.tensors, written.tensors);
    assert!(!sized(&read).tied_embeddings);
    // What was read: the config, the index and each shard's 8 bytes and header; nothing else, in
    // four execs whatever the number of shards (the config, the index, the shards' lengths, then
    // their headers).
    let config = fixtures::QWEN3_32B.len() as u64;
    let index = std::fs::metadata(dir.path().join(INDEX)).expect("the index").len();
    assert!(written.shards > 10, "{} shards", written.shards);
    assert_eq!(read.bytes_read, config + index + written.header_bytes);
    assert_eq!(read.requests, 4);
    assert_eq!(read.files.first().map(String::as_str), Some("config.json"));
    assert_eq!(read.toolbox.as_deref(), Some("here"));
}

#[tokio::test]
async fn every_fixture_reads_to_its_generated_total() {
    for (config, shard) in [
        (fixtures::LLAMA_3_3_70B, 5u64 << 30),
        (fixtures::QWEN3_235B_A22B, 4 << 30),
        (fixtures::GPT_OSS_120B, 4 << 30),
        (fixtures::DEEPSEEK_V3, 4 << 30),
    ] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let written = write_checkpoint(config, dir.path(), shard);
        let read = read_directory(dir.path(), ReadLimits::default()).await.expect("the shape");
        let shape = sized(&read);
        let weights = shape.weights.clone().expect("weights");
        assert_eq!(weights.total_bytes, written.total_bytes, "{}", shape.architecture);
        let layers: u64 = weights.layers.iter().map(|l| l.total()).sum();
        assert_eq!(
            layers + weights.embedding_bytes + weights.output_bytes + weights.other_bytes + weights.skipped_bytes,
            weights.total_bytes,
            "{}: every byte is somewhere",
            shape.architecture
        );
        match shape.architecture.as_str() {
            "DeepseekV3ForCausalLM" => {
                // The MTP layer 61 is skipped: a MoE layer, its own embedding and head, eh_proj.
                assert!(weights.skipped_bytes > 2 * 129_280 * 7168 * 2, "{}", weights.skipped_bytes);
                // The dense first layers have no experts; the others 256 of them in FP8 with scales:
                // 256 × 3 × (2048 × 7168 + 16 × 56 × 4) = 256 × 3 × 14,683,648 = 11,277,041,664 bytes.
                assert_eq!(weights.layers[2].expert_bytes, 0);
                assert_eq!(weights.layers[3].expert_bytes, 11_277_041_664);
            }
            "GptOssForCausalLM" => {
                // MXFP4 experts: blocks 128 × 5760 × 90 × 16 + 128 × 2880 × 90 × 16, scales a sixteenth of
                // that, biases 128 × 5760 × 2 + 128 × 2880 × 2: 1,592,524,800 + 99,532,800 + 2,211,840.
                assert_eq!(weights.layers[0].expert_bytes, 1_694_269_440);
            }
            "Qwen3MoeForCausalLM" => {
                // 128 experts × 3 × 1536 × 4096 × 2 bytes = 4,831,838,208 bytes a layer.
                assert_eq!(weights.layers[93].expert_bytes, 4_831_838_208);
            }
            _ => assert_eq!(weights.layers[0].expert_bytes, 0),
        }
    }
}

#[tokio::test]
async fn a_model_without_safetensors_is_estimated_and_says_so() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("config.json"), fixtures::QWEN3_32B).expect("config");
    let read = read_directory(dir.path(), ReadLimits::default()).await.expect("the shape");
    let weights = sized(&read).weights.clone().expect("weights");
    assert_eq!(weights.source, WeightSource::Config);
    assert!(read.notes.iter().any(|n| n.contains("estimated")), "{:?}", read.notes);
    let empty = tempfile::tempdir().expect("a temporary directory");
    let error = read_directory(empty.path(), ReadLimits::default()).await.expect_err("no config");
    assert!(error.to_string().contains("no config.json"), "{error}");
}

#[tokio::test]
async fn a_hybrid_model_is_said_so_before_its_weights_are_read() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("config.json"), fixtures::QWEN3_NEXT_80B).expect("config");
    std::fs::write(dir.path().join(INDEX), "not read").expect("index");
    let read = read_directory(dir.path(), ReadLimits::default()).await.expect("no error");
    assert!(matches!(read.sizing, Sizing::CannotSize { .. }), "{:?}", read.sizing);
    assert_eq!(read.files, vec!["config.json"]);
}

#[tokio::test]
async fn a_damaged_shard_is_refused_with_its_name() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let written = write_checkpoint(fixtures::QWEN3_32B, dir.path(), 4 << 30);
    // The second shard's header claims more data than the file holds.
    let name = format!("model-00002-of-{:05}.safetensors", written.shards);
    let shard = dir.path().join(&name);
    let size = std::fs::metadata(&shard).expect("shard").len();
    std::fs::OpenOptions::new().write(true).open(&shard).expect("open").set_len(size - 1).expect("cut");
    let error = read_directory(dir.path(), ReadLimits::default()).await.expect_err("damaged");
    let text = error.to_string();
    assert!(text.contains(&name) && text.contains("describes"), "{text}");
    // A header length of 2^63: refused after 8 bytes.
    let mut file = std::fs::OpenOptions::new().write(true).open(&shard).expect("open");
    file.write_all(&(1u64 << 63).to_le_bytes()).expect("write");
    let error = read_directory(dir.path(), ReadLimits::default()).await.expect_err("huge");
    assert!(
        matches!(error, Error::Artifact { .. }) && error.exit_code() == 1 && error.to_string().contains("claims"),
        "{error}"
    );
}

#[tokio::test]
async fn the_byte_budget_falls_back_to_the_index_total() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let written = write_checkpoint(fixtures::QWEN3_235B_A22B, dir.path(), 4 << 30);
    // Room for the config, the index and a megabyte of the shards' headers (they are more).
    let index = std::fs::metadata(dir.path().join(INDEX)).expect("the index").len();
    let budget = fixtures::QWEN3_235B_A22B.len() as u64 + index + (1 << 20);
    assert!(written.header_bytes > 1 << 20);
    let limits = ReadLimits { total_bytes: budget, ..ReadLimits::default() };
    let read = read_directory(dir.path(), limits).await.expect("the shape");
    let weights = sized(&read).weights.clone().expect("weights");
    assert_eq!(weights.source, WeightSource::IndexTotal);
    assert_eq!(weights.total_bytes, written.total_bytes);
    assert!(read.bytes_read <= budget, "{}", read.bytes_read);
    assert!(read.notes.iter().any(|n| n.contains("index's total")), "{:?}", read.notes);
}

#[tokio::test]
async fn the_tiny_llama_gguf_is_read_from_its_first_bytes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    let size = std::fs::metadata(&gguf).expect("the GGUF").len();
    let read = read_path(&gguf, ModelFormat::Gguf, ReadLimits::default()).await.expect("shape");
    assert_eq!(sized(&read).layers, 6);
    assert!(read.bytes_read <= GGUF_FIRST_READ && read.bytes_read < size / 10, "{} of {size}", read.bytes_read);
}

#[tokio::test]
async fn a_hub_model_is_read_by_ranges_at_the_listed_commit() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let written = write_checkpoint(fixtures::QWEN3_235B_A22B, dir.path(), 4 << 30);
    let hub = LoopbackHub::start(Served {
        repo: "Qwen/Qwen3-235B-A22B".into(),
        dir: dir.path().to_path_buf(),
        token: Some("hf_test".into()),
        ignore_ranges: false,
    });
    let source = ModelSource::Hub(RepoId::parse("Qwen/Qwen3-235B-A22B").expect("an id"));
    let read = read_hub(&source, ModelFormat::Safetensors, &hub.access(Some("hf_test"))).await.expect("the shape");
    assert_eq!(read.commit.as_deref(), Some(COMMIT));
    assert_eq!(sized(&read).weights.clone().expect("weights").total_bytes, written.total_bytes);
    let seen = hub.seen();
    assert!(seen.iter().all(|s| s.authorized), "every request carries the token");
    assert_eq!(seen.first().map(|s| s.path.as_str()), Some("/api/models/Qwen/Qwen3-235B-A22B/revision/main"));
    // Each shard: its first 16 KiB, then the rest of its header when it is longer.
    let shard_reads: Vec<&Seen> = seen.iter().filter(|s| s.path.contains("-of-")).collect();
    let (first, rest): (Vec<&Seen>, Vec<&Seen>) =
        shard_reads.iter().partition(|s| s.range.as_deref() == Some("bytes=0-16383"));
    assert_eq!(first.len(), written.shards, "{shard_reads:?}");
    assert!(rest.iter().all(|s| s.range.as_deref().is_some_and(|r| r.starts_with("bytes=16384-"))), "{rest:?}");
    let sent: u64 = seen.iter().map(|s| s.sent).sum();
    assert_eq!(read.bytes_read, sent, "the bytes reported are the bytes the Hub sent");
    assert_eq!(read.requests as usize, seen.len());
    assert_eq!(seen.len(), 3 + written.shards + rest.len(), "the listing, config, index and the shards' reads");
    // Under 2 MB from the Hub for a model of 470 GB: a listing, a config, an index and the headers.
    assert!(read.bytes_read < 2 * written.header_bytes + (1 << 20), "{}", read.bytes_read);
}

#[tokio::test]
async fn the_hub_says_why_it_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    write_checkpoint(fixtures::QWEN3_32B, dir.path(), 40 << 30);
    let repo = RepoId::parse("Qwen/Qwen3-32B").expect("an id");
    let source = ModelSource::Hub(repo);
    let hub = LoopbackHub::start(Served {
        repo: "Qwen/Qwen3-32B".into(),
        dir: dir.path().to_path_buf(),
        token: Some("hf_test".into()),
        ignore_ranges: false,
    });
    let error = read_hub(&source, ModelFormat::Safetensors, &hub.access(None)).await.expect_err("no token");
    let text = error.to_string();
    assert!(text.contains("401") && text.contains("RepoNotFound") && text.contains("HF_TOKEN"), "{text}");
    assert!(!text.contains("hf_test"));
    drop(hub);
    let ignoring = LoopbackHub::start(Served {
        repo: "Qwen/Qwen3-32B".into(),
        dir: dir.path().to_path_buf(),
        token: None,
        ignore_ranges: true,
    });
    let error = read_hub(&source, ModelFormat::Safetensors, &ignoring.access(None)).await.expect_err("no ranges");
    assert!(error.to_string().contains("ignored"), "{error}");
    let unreachable = HubAccess::new(Some("http://127.0.0.1:9"), None);
    let error = read_hub(&source, ModelFormat::Safetensors, &unreachable).await.expect_err("nothing listens");
    assert!(error.to_string().contains("HF_ENDPOINT"), "{error}");
}

#[tokio::test]
async fn a_60_gb_checkpoint_is_planned_from_under_2_mb_of_the_hub() {
    // Qwen3-32B: 65.5 GB of weights in shards of 4 GiB.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let written = write_checkpoint(fixtures::QWEN3_32B, dir.path(), 4 << 30);
    assert!(written.total_bytes > 60_000_000_000);
    let hub = LoopbackHub::start(Served {
        repo: "Qwen/Qwen3-32B".into(),
        dir: dir.path().to_path_buf(),
        token: None,
        ignore_ranges: false,
    });
    let source = ModelSource::Hub(RepoId::parse("Qwen/Qwen3-32B").expect("an id"));
    let read = read_hub(&source, ModelFormat::Safetensors, &hub.access(None)).await.expect("the shape");
    assert_eq!(sized(&read).weights.clone().expect("weights").total_bytes, 65_524_246_528);
    assert!(read.bytes_read < 2_000_000, "{} bytes read", read.bytes_read);
    assert!(hub.seen().iter().all(|s| !s.authorized), "no token was sent when none was given");
}

#[tokio::test]
async fn a_hub_gguf_is_read_by_ranges_from_its_start() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    let name = gguf.file_name().expect("a name").to_string_lossy().into_owned();
    let size = std::fs::metadata(&gguf).expect("the GGUF").len();
    let hub = LoopbackHub::start(Served {
        repo: "strix/tiny-llama-GGUF".into(),
        dir: dir.path().to_path_buf(),
        token: None,
        ignore_ranges: false,
    });
    let source = ModelSource::HubGguf {
        repo: RepoId::parse("strix/tiny-llama-GGUF").expect("an id"),
        pick: GgufPick::File(name.clone()),
    };
    let read = read_hub(&source, ModelFormat::Gguf, &hub.access(None)).await.expect("the shape");
    assert_eq!(sized(&read).layers, 6);
    let seen = hub.seen();
    let reads: Vec<&Seen> = seen.iter().filter(|s| s.path.ends_with(&name)).collect();
    assert_eq!(reads.first().and_then(|s| s.range.as_deref()), Some("bytes=0-1048575"));
    assert!(read.bytes_read < size / 10, "{} of {size}", read.bytes_read);
    assert!(!seen.iter().any(|s| s.path.ends_with("config.json")), "a GGUF needs no config.json");
}

#[tokio::test]
async fn a_hub_gguf_named_by_its_quant_is_picked_from_the_file_list() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let gguf = fixtures::tiny_llama(dir.path(), 6);
    std::fs::rename(&gguf, dir.path().join("tiny-llama-F32.gguf")).expect("name it by its quant");
    let hub = LoopbackHub::start(Served {
        repo: "strix/tiny-llama-GGUF".into(),
        dir: dir.path().to_path_buf(),
        token: None,
        ignore_ranges: false,
    });
    let repo = RepoId::parse("strix/tiny-llama-GGUF").expect("an id");
    let pick = |quant: &str| ModelSource::HubGguf { repo: repo.clone(), pick: GgufPick::Quant(quant.into()) };
    let read = read_hub(&pick("f32"), ModelFormat::Gguf, &hub.access(None)).await.expect("the shape");
    assert_eq!((sized(&read).layers, read.files.as_slice()), (6, ["tiny-llama-F32.gguf".to_string()].as_slice()));
    let none = read_hub(&pick("Q4_K_M"), ModelFormat::Gguf, &hub.access(None)).await.expect_err("no such quant");
    assert!(none.to_string().contains("Q4_K_M"), "{none}");
}
