//! The logs of what launches started on this node, per service: each process's (beside the
//! record: `vllm`, `llama-server`, `rpc-server`; they outlive the stop) and, where a launch ran
//! Ray, Ray's own (inside the toolbox); the last lines, or what was added since the offsets the
//! head last saw (`logs --follow` asks again with those).

use std::io::{Read, Seek, SeekFrom};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::serving::ray::RAY_LOGS;
use crate::serving::record::{Recorded, ServingDir, ServingFiles, ServingRecord};
use crate::serving::service_name::ServiceName;
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

/// The most read from one file per call.
const READ_LIMIT: u64 = 1 << 20;
/// Ray's logs that say why a node did not join or died.
const RAY_FILES: [&str; 2] = ["raylet.out", "gcs_server.out"];

/// Prints the size of `$1` then, with `$2 = lines`, its last `$3` lines, else its bytes from
/// offset `$3` on (1-based, as `tail -c +N` counts). Exits 3 when there is no such file.
const TAIL_FILE: &str = r#"f="$1"; [ -f "$f" ] || exit 3; wc -c < "$f"; if [ "$2" = lines ]; then tail -n "$3" "$f"; else tail -c "+$3" "$f" | head -c 1048576; fi"#;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeLogs {
    /// The service whose logs to read (None: every service's there is).
    pub service: Option<String>,
    /// How many of the last lines, for a file not seen before.
    pub lines: usize,
    /// Where each file was read up to last time (`logs --follow`).
    pub seen: Vec<LogTail>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogTail {
    /// The service whose log it is.
    #[serde(default)]
    pub service: String,
    /// `vllm`, `llama-server`, `rpc-server`, `raylet.out`, …
    pub file: String,
    pub lines: Vec<String>,
    /// The file's size when read: where the next read starts.
    pub end: u64,
}

pub async fn serve_logs(settings: &Settings, request: &ServeLogs) -> Result<Vec<LogTail>> {
    let serving = ServingDir::of(&settings.paths)?;
    let mut tails = Vec::new();
    for (service, files, record) in logged(&serving, request.service.as_deref())? {
        let seen = |file: &str| request.seen.iter().find(|t| t.service == service && t.file == file).map(|t| t.end);
        for (name, path) in files.logs() {
            if let Some(tail) = host_file(&name, &path, seen(&name), request.lines) {
                tails.push(LogTail { service: service.clone(), ..tail });
            }
        }
        // Ray's, where the launch ran it.
        let Some(record) = record.filter(|record| record.backend.runs_ray()) else { continue };
        let Some(toolbox) = RunningToolbox::if_running(settings, &record.toolbox).await? else { continue };
        for file in RAY_FILES {
            let (mode, from) = match seen(file) {
                Some(end) => ("bytes", (end + 1).to_string()),
                None => ("lines", request.lines.to_string()),
            };
            let path = format!("{RAY_LOGS}/{file}");
            let argv: Vec<String> =
                ["sh", "-c", TAIL_FILE, "sh", &path, mode, &from].iter().map(|w| w.to_string()).collect();
            let report = toolbox.run(&argv, &Default::default()).await?;
            if !report.success() {
                continue;
            }
            let mut lines = report.stdout.lines();
            let end = lines.next().and_then(|size| size.trim().parse().ok()).unwrap_or(0);
            let lines = lines.map(str::to_string).collect();
            tails.push(LogTail { service: service.clone(), file: file.to_string(), lines, end });
        }
    }
    Ok(tails)
}

/// A service whose logs to read: its name, its files, its record if it still has one.
type Logged = (String, ServingFiles, Option<ServingRecord>);

/// The services whose logs to read: `service` (by its record, else by its name: its logs outlive
/// its record), or every one that has a record or a log here.
fn logged(serving: &ServingDir, service: Option<&str>) -> Result<Vec<Logged>> {
    if let Some(name) = service {
        let name = ServiceName::parse(name)?;
        return Ok(vec![match serving.find(&name)? {
            Some(Recorded { files, record }) => (name.to_string(), files, Some(record)),
            None => (name.to_string(), serving.files(&name), None),
        }]);
    }
    let mut found: Vec<Logged> = serving
        .list()?
        .into_iter()
        .map(|Recorded { files, record }| (record.service.clone(), files, Some(record)))
        .collect();
    for stem in serving.logged_stems() {
        if found.iter().any(|(_, files, _)| files.stem() == stem) {
            continue;
        }
        let Some(name) = ServiceName::from_file_safe(&stem) else { continue };
        found.push((name.to_string(), serving.files(&name), None));
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// A file on this node: its last `lines` lines, or what follows `from`.
fn host_file(name: &str, path: &std::path::Path, from: Option<u64>, lines: usize) -> Option<LogTail> {
    let mut file = std::fs::File::open(path).ok()?;
    let end = file.metadata().ok()?.len();
    let start = match from {
        // A shorter file was started anew (a new launch): read it from the start.
        Some(from) if from <= end => from,
        Some(_) => 0,
        None => end.saturating_sub(READ_LIMIT),
    };
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.take(READ_LIMIT).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    let shown = if from.is_some() { &all[..] } else { &all[all.len().saturating_sub(lines)..] };
    Some(LogTail {
        service: String::new(),
        file: name.to_string(),
        lines: shown.iter().map(|l| l.to_string()).collect(),
        end: start + bytes.len() as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_with_a_record_or_a_log_has_its_logs_found_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let serving = ServingDir::in_dir(dir.path());
        let record = r#"{"service": "Qwen/Qwen3-8B", "toolbox": "vllm", "model": "Qwen/Qwen3-8B", "served": "x",
            "role": "single", "nodes": 1, "port": 8001, "link_ip": "127.0.0.1", "head_ip": "127.0.0.1",
            "endpoint": "http://127.0.0.1:8000/v1", "image": "sha256:ab", "started": "2026-11-24T10:00:00Z"}"#;
        std::fs::write(dir.path().join("Qwen%2FQwen3-8B.json"), record).unwrap();
        std::fs::write(dir.path().join("Qwen%2FQwen3-8B.vllm.log"), "up\n").unwrap();
        // A service stopped since: its log alone is left.
        std::fs::write(dir.path().join("coder.llama-server.log"), "bye\n").unwrap();
        let all: Vec<(String, bool)> =
            logged(&serving, None).unwrap().into_iter().map(|(name, _, record)| (name, record.is_some())).collect();
        assert_eq!(all, [("Qwen/Qwen3-8B".to_string(), true), ("coder".to_string(), false)]);
        let (name, files, record) = logged(&serving, Some("coder")).unwrap().remove(0);
        assert_eq!((name.as_str(), record), ("coder", None));
        assert_eq!(files.logs().len(), 1, "its log outlives its record");
        assert!(logged(&serving, Some("-x")).is_err(), "not a name");
    }

    #[test]
    fn a_host_file_gives_its_last_lines_then_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("v.log");
        std::fs::write(&log, "a\nb\nc\n").unwrap();
        let first = host_file("vllm", &log, None, 2).unwrap();
        assert_eq!((first.lines.clone(), first.end), (vec!["b".to_string(), "c".to_string()], 6));
        std::fs::write(&log, "a\nb\nc\nd\n").unwrap();
        let next = host_file("vllm", &log, Some(first.end), 2).unwrap();
        assert_eq!((next.lines, next.end), (vec!["d".to_string()], 8));
        std::fs::write(&log, "new\n").unwrap();
        assert_eq!(host_file("vllm", &log, Some(8), 2).unwrap().lines, ["new"]);
        assert!(host_file("vllm", &dir.path().join("none"), None, 2).is_none());
    }

    #[test]
    fn the_tail_script_reads_lines_or_bytes_from_an_offset() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("raylet.out");
        std::fs::write(&file, "one\ntwo\nthree\n").unwrap();
        let run = |mode: &str, from: &str| {
            let output = std::process::Command::new("sh")
                .args(["-c", TAIL_FILE, "sh", file.to_str().unwrap(), mode, from])
                .output()
                .unwrap();
            (output.status.code(), String::from_utf8(output.stdout).unwrap())
        };
        assert_eq!(run("lines", "2"), (Some(0), "14\ntwo\nthree\n".to_string()));
        assert_eq!(run("bytes", "5"), (Some(0), "14\ntwo\nthree\n".to_string()));
        assert_eq!(run("bytes", "15"), (Some(0), "14\n".to_string()));
        std::fs::remove_file(&file).unwrap();
        assert_eq!(run("lines", "2").0, Some(3));
    }
}
