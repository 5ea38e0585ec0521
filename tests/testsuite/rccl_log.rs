//! `strix-toolbox rccl log [FILE|-]` on RCCL/NCCL logs: NCCL 2.28.9's recorded over sockets, and
//! those written from its format strings where no run can record them here (RDMA, no network at
//! all), given as a file and on standard input.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use crate::support::cli::strix;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rccl-logs").join(name)
}

/// `rccl log` with `args`, `input` on its standard input.
fn judge(args: &[&str], input: &[u8]) -> Output {
    let mut child = strix()
        .env("NO_COLOR", "1")
        .args(["rccl", "log"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run strix-toolbox");
    let mut stdin = child.stdin.take().expect("stdin");
    // The command may stop reading early only by failing; a closed pipe is then its answer.
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().expect("wait for strix-toolbox")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The exit code and the JSON report of `rccl log --json FILE`.
fn judged(path: &Path) -> (i32, Value) {
    let output = judge(&["--json", path.to_str().expect("a UTF-8 path")], b"");
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", text(&output.stdout), text(&output.stderr)));
    (output.status.code().expect("an exit code"), report)
}

#[test]
fn every_recorded_and_written_log_gets_its_verdict_and_exit_code() {
    for (name, verdict, asked_for_ib, code) in [
        ("nccl-2.28.9/socket-lo.log", "tcp", true, 1),
        ("nccl-2.28.9/exact-hca.log", "tcp", true, 1),
        ("nccl-2.28.9/default.log", "tcp", true, 1),
        ("nccl-2.28.9/ib-disabled.log", "tcp", false, 0),
        ("written/nccl-2.28.9-roce.log", "rdma", true, 0),
        ("written/nccl-2.28.9-net-ib-no-device.log", "failed", true, 1),
    ] {
        let path = fixture(name);
        let (exit, report) = judged(&path);
        assert_eq!(exit, code, "{name}: {report}");
        assert_eq!(report["verdict"], verdict, "{name}: {report}");
        assert_eq!(report["asked_for_ib"], asked_for_ib, "{name}: {report}");
        assert_eq!(report["ok"], code == 0, "{name}");
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(report["lines_read"], lines, "{name}");
        assert_eq!(report["processes"].as_array().map(Vec::len), Some(2), "{name}: both ranks");
        assert!(!report["evidence"].as_array().expect("evidence").is_empty(), "{name}");
    }
    let (_, failed) = judged(&fixture("written/nccl-2.28.9-net-ib-no-device.log"));
    let why = failed["why"].as_str().unwrap();
    assert!(why.contains("Failed to initialize any NET plugin") && why.contains("never formed"), "{why}");
    assert!(!why.contains("TCP"), "no network is no fall-back to TCP: {why}");
}

#[test]
fn text_names_the_verdict_why_and_the_lines_and_stdin_reads_the_same() {
    let log = std::fs::read(fixture("nccl-2.28.9/exact-hca.log")).unwrap();
    for args in [&[][..], &["-"][..]] {
        let output = judge(args, &log);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {}", text(&output.stderr));
        let said = text(&output.stdout);
        assert!(said.starts_with("TCP  RCCL fell back to TCP sockets (NET/Socket): IB found no device"), "{said}");
        assert!(said.contains("  asked for IB  yes\n"), "{said}");
        assert!(said.contains("vm:540 over Socket, formed; vm:541 over Socket, formed"), "{said}");
        assert!(said.contains("  fix           check the RDMA devices"), "{said}");
        assert!(said.contains("    vm:540:540 [0] NCCL INFO NET/IB : No device found."), "{said}");
        assert!(said.contains("NCCL INFO Using network Socket"), "{said}");
        assert_eq!(text(&output.stderr), "", "a verdict is no error");
    }
    let roce = judge(&[fixture("written/nccl-2.28.9-roce.log").to_str().unwrap()], b"");
    assert_eq!(roce.status.code(), Some(0));
    assert!(text(&roce.stdout).starts_with("RDMA  RCCL carries the data with RDMA over RoCE (NET/IB)"));
}

#[test]
fn bad_input_is_a_clear_error_or_verdict_never_a_panic() {
    let dir = TempDir::new().unwrap();
    // Missing, a directory: cannot be read (exit 1, the path and why).
    for path in [dir.path().join("absent.log"), dir.path().to_path_buf()] {
        let output = judge(&[path.to_str().unwrap()], b"");
        assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
        let message = text(&output.stderr);
        assert!(message.contains(&format!("cannot read {}", path.display())), "{message}");
        assert_eq!(text(&output.stdout), "");
    }
    let missing = judge(&["--json", dir.path().join("absent.log").to_str().unwrap()], b"");
    let error: Value = serde_json::from_slice(&missing.stdout).expect("the error object");
    assert_eq!(error["error"]["kind"], "host", "{error}");
    // Binary and a line of megabytes: read, judged unknown, exit 1.
    let mut binary = Vec::new();
    std::fs::File::open(crate::support::cli::STRIX).unwrap().take(4 << 20).read_to_end(&mut binary).unwrap();
    let output = judge(&["--json", "-"], &binary);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).expect("a report");
    assert_eq!(report["verdict"], "unknown", "{report}");
    assert!(report["why"].as_str().unwrap().contains("binary"), "{report}");
    let mut long = vec![b'x'; 8 << 20];
    long.extend_from_slice(b"\nvm:1:1 [0] NCCL INFO Using network IB\n");
    let output = judge(&["--json"], &long);
    let report: Value = serde_json::from_slice(&output.stdout).expect("a report");
    assert_eq!((report["verdict"].as_str(), report["cut_lines"].as_u64()), (Some("rdma"), Some(1)), "{report}");
    // A usage error: exit 2.
    let two = judge(&["a.log", "b.log"], b"");
    assert_eq!(two.status.code(), Some(2), "{}", text(&two.stderr));
    for output in [&output, &two] {
        assert!(!text(&output.stderr).contains("panicked"));
    }
}

#[test]
fn help_documents_the_verdicts_and_exit_codes() {
    let output = strix().args(["rccl", "log", "--help"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    let help = text(&output.stdout);
    for said in ["[FILE]", "standard input", "rdma ", "tcp ", "failed ", "unknown ", "Exit status: 0 on rdma"] {
        assert!(help.contains(said), "{said} in {help}");
    }
}
