//! A model's files read where its engine reads them: inside the engine's toolbox, through the
//! container engine's exec. A path means what the toolbox makes of it (its image, its mounts, its
//! working directory), not what the head's host has there.
//!
//! Why an exec and not the engine's archive API (`GET /containers/{id}/archive`): the archive API
//! sends a whole file as a tar stream, a 4 GiB shard for its 16 KiB header; `head -c` and `tail -c
//! +N` (which seeks a regular file) read the bytes asked for and no more. One exec reads any
//! number of files, each from its own offset: a checkpoint's shards are read in two execs, not two
//! per shard. The script is a constant; the paths and offsets are its arguments.

use crate::container_engine::ExecOutcome;
use crate::error::{Error, Result};

/// Runs a command inside the toolbox a model's engine reads it in.
#[async_trait::async_trait]
pub trait RunsInToolbox: Send + Sync {
    /// The toolbox's name, as messages say it.
    fn name(&self) -> &str;
    /// `argv`, its exit code and its output as bytes.
    async fn run(&self, argv: &[String]) -> Result<ExecOutcome>;
}

/// Each `PATH START LENGTH` of its arguments: the file's size on a line (`-` when no regular file
/// is there), then up to LENGTH of its bytes from START (none for LENGTH 0). Exit 6: a file it
/// cannot read.
const READ: &str = r#"while [ "$#" -ge 3 ]; do
  if [ -f "$1" ]; then
    [ -r "$1" ] || { echo "$1: permission denied" >&2; exit 6; }
    stat -L -c %s -- "$1" || exit 4
    if [ "$3" -gt 0 ]; then
      if [ "$2" -eq 0 ]; then head -c "$3" -- "$1"; else tail -c "+$(($2 + 1))" -- "$1" | head -c "$3"; fi || exit 5
    fi
  else
    echo -
  fi
  shift 3
done"#;

/// Bytes asked of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub path: String,
    pub start: u64,
    pub length: u64,
}

/// What one file gave: up to the bytes asked, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    pub bytes: Vec<u8>,
    pub size: u64,
}

/// Each of `asks` read in one exec in `toolbox`: None for a file that is not there.
pub async fn read(toolbox: &dyn RunsInToolbox, asks: &[Ask]) -> Result<Vec<Option<Got>>> {
    let mut argv: Vec<String> = ["sh", "-c", READ, "sh"].map(String::from).to_vec();
    for ask in asks {
        argv.extend([ask.path.clone(), ask.start.to_string(), ask.length.to_string()]);
    }
    let outcome = toolbox.run(&argv).await?;
    if outcome.exit_code != 0 {
        let said = String::from_utf8_lossy(&outcome.stderr);
        let said = said.lines().rev().find(|line| !line.trim().is_empty()).unwrap_or("no message");
        return Err(Error::Toolbox {
            name: toolbox.name().to_string(),
            message: format!(
                "reading the model's headers in toolbox {} failed (exit {}): {said}",
                toolbox.name(),
                outcome.exit_code
            ),
            fix: Some(format!(
                "the engine reads the model as the toolbox's user: check the files' permissions (`strix-toolbox enter \
                 {} -- ls -l PATH`); the toolbox needs sh, stat, head and tail",
                toolbox.name()
            )),
        });
    }
    parse(&outcome.stdout, asks).map_err(|why| Error::Toolbox {
        name: toolbox.name().to_string(),
        message: format!("reading the model's headers in toolbox {}: {why}", toolbox.name()),
        fix: Some("a file changed while it was read: run it again".into()),
    })
}

/// The script's output, one entry an ask.
fn parse(mut out: &[u8], asks: &[Ask]) -> std::result::Result<Vec<Option<Got>>, String> {
    let mut got = Vec::with_capacity(asks.len());
    for ask in asks {
        let Some(end) = out.iter().position(|&b| b == b'\n') else {
            return Err(format!("no size for {}", ask.path));
        };
        let line = std::str::from_utf8(&out[..end]).unwrap_or_default().trim();
        out = &out[end + 1..];
        if line == "-" {
            got.push(None);
            continue;
        }
        let size: u64 = line.parse().map_err(|_| format!("{}: not a size: {line:?}", ask.path))?;
        let expected = usize::try_from(ask.length.min(size.saturating_sub(ask.start))).unwrap_or(usize::MAX);
        let Some(bytes) = out.get(..expected) else {
            return Err(format!("{} gave {} of its {expected} bytes", ask.path, out.len()));
        };
        got.push(Some(Got { bytes: bytes.to_vec(), size }));
        out = &out[expected..];
    }
    Ok(got)
}

#[cfg(test)]
pub(crate) mod testing {
    //! The same script run by this machine's own `sh` in a directory: the tests read real files
    //! with the real commands, as the toolbox's would.

    use std::process::Stdio;

    use super::*;

    pub struct HereToolbox {
        /// The working directory relative paths are read from.
        pub dir: std::path::PathBuf,
    }

    #[async_trait::async_trait]
    impl RunsInToolbox for HereToolbox {
        fn name(&self) -> &str {
            "here"
        }

        async fn run(&self, argv: &[String]) -> Result<ExecOutcome> {
            let (program, args) = argv.split_first().expect("a program");
            let output = tokio::process::Command::new(program)
                .args(args)
                .current_dir(&self.dir)
                .stdin(Stdio::null())
                .output()
                .await
                .expect("run sh");
            Ok(ExecOutcome {
                exit_code: i64::from(output.status.code().unwrap_or(-1)),
                stdout: output.stdout,
                stderr: output.stderr,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::HereToolbox;
    use super::*;

    fn ask(path: &str, start: u64, length: u64) -> Ask {
        Ask { path: path.into(), start, length }
    }

    #[tokio::test]
    async fn each_file_gives_its_size_and_the_bytes_asked_from_where_asked() {
        let dir = tempfile::tempdir().expect("a directory");
        let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        std::fs::write(dir.path().join("a.bin"), &bytes).expect("a file");
        std::fs::write(dir.path().join("nl"), b"\n\n\n").expect("newlines");
        std::os::unix::fs::symlink("a.bin", dir.path().join("link")).expect("a link");
        std::fs::create_dir(dir.path().join("sub")).expect("a directory");
        let toolbox = HereToolbox { dir: dir.path().into() };
        let asks = [
            ask("a.bin", 0, 16),
            ask("missing", 0, 8),
            ask("a.bin", 65_536, 10),
            ask("nl", 0, 8),
            ask("link", 69_990, 100),
            ask("sub", 0, 8),
            ask("a.bin", 0, 0),
        ];
        let got = read(&toolbox, &asks).await.expect("read");
        let at = |start: usize, end: usize| Some(Got { bytes: bytes[start..end].to_vec(), size: 70_000 });
        assert_eq!(got[0], at(0, 16));
        assert_eq!(got[1], None, "not there");
        assert_eq!(got[2], at(65_536, 65_546), "from an offset");
        assert_eq!(got[3], Some(Got { bytes: b"\n\n\n".to_vec(), size: 3 }), "bytes that look like lines");
        assert_eq!(got[4], at(69_990, 70_000), "through a link, to the file's end");
        assert_eq!(got[5], None, "a directory is no file");
        assert_eq!(got[6], Some(Got { bytes: Vec::new(), size: 70_000 }), "its size alone");
    }

    #[tokio::test]
    async fn an_unreadable_file_or_a_short_answer_is_an_error_that_says_so() {
        let dir = tempfile::tempdir().expect("a directory");
        let toolbox = HereToolbox { dir: dir.path().into() };
        let out = b"10\nabc";
        let short = parse(out, &[ask("x", 0, 10)]).expect_err("short");
        assert!(short.contains("3 of its 10"), "{short}");
        assert!(parse(b"ten\n", &[ask("x", 0, 1)]).is_err());
        assert!(parse(b"", &[ask("x", 0, 1)]).is_err());
        let failing = read(&toolbox, &[ask("x", 0, 1)]).await;
        assert!(failing.is_ok(), "an absent file is no failure");
    }
}
