//! A benchmark, not a test (ignored; `scripts/bench.sh` runs it): `plan MODEL` of a Hub model with
//! a 65.5 GB checkpoint (Qwen3-32B's published config, its weights as sparse shards on the Hub
//! stand-in), against what the issue names as the way to read the same: `huggingface_hub`'s
//! `get_safetensors_metadata` (the safetensors headers by range reads) in a virtualenv, side by side
//! in one farm-bench run. It prints the bytes each side read from the Hub.

use std::path::Path;
use std::process::Command;

use crate::support::checkpoint::{config, dense_checkpoint};
use crate::support::cli::STRIX;
use crate::support::hub::HubStandIn;

const MODEL: &str = "Qwen/Qwen3-32B";
const RUNS: &str = "10";

#[test]
#[ignore = "a benchmark: scripts/bench.sh runs it"]
fn plan_of_a_60_gb_hub_model_against_huggingface_hub_s_metadata_read() {
    let (files, total) = dense_checkpoint(&config("Qwen3-32B"), 4 << 30);
    let hub = HubStandIn::start(&[(MODEL, files)], None);
    let host = crate::support::host_tree::materialize("strix-e810-healthy");
    let work = tempfile::tempdir().expect("tempdir");
    let venv = work.path().join("venv");
    let made = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().expect("python3 -m venv");
    assert!(made.success(), "a virtualenv");
    let pip = Command::new(venv.join("bin/pip")).args(["install", "--quiet", "huggingface_hub"]).status();
    assert!(pip.expect("pip").success(), "huggingface_hub from PyPI");

    let strix = Path::new(STRIX).display().to_string();
    let ours = format!("{strix} --host-root {} --json plan {MODEL}", host.path().display());
    let theirs = format!(
        "{} -c 'import huggingface_hub as h; print(h.get_safetensors_metadata(\"{MODEL}\").parameter_count)'",
        venv.join("bin/python3").display()
    );
    let before = hub.requests().len();
    let once = Command::new("sh").args(["-c", &ours]).env("HF_ENDPOINT", hub.endpoint()).output().expect("plan");
    assert!(once.status.success(), "{}", String::from_utf8_lossy(&once.stderr));
    let read: u64 = hub.requests()[before..].iter().map(|request| request.sent).sum();
    let before = hub.requests().len();
    let baseline = Command::new("sh").args(["-c", &theirs]).env("HF_ENDPOINT", hub.endpoint()).output().expect("hf");
    assert!(baseline.status.success(), "{}", String::from_utf8_lossy(&baseline.stderr));
    let read_by_hf: u64 = hub.requests()[before..].iter().map(|request| request.sent).sum();
    println!("checkpoint {total} bytes; plan read {read} bytes from the Hub, huggingface_hub {read_by_hf}");

    let bench = Command::new("farm-bench")
        .args(["-n", RUNS, "--warmup", "1", "--vs", &theirs, "--", "sh", "-c", &ours])
        .env("HF_ENDPOINT", hub.endpoint())
        .status()
        .expect("farm-bench (the workplace's benchmark tool)");
    assert!(bench.success(), "farm-bench failed");
}
