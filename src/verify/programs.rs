//! The serving engine's own programs, run from the inside: each one its engine names
//! ([`RequiredProgram`]: llama.cpp's `llama-server` and its RPC server, whichever name its build
//! gives it) must start (`--version`, `--help`: a missing library fails it). vLLM's stack is
//! proven by the hardware checks (torch sees a GPU), so it names none.

use serde::Serialize;

use super::devices::last_words;
use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};

/// A program the image must run: any one of its names, started with `probe` as its argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RequiredProgram {
    /// The names it goes by, the current one first (older builds used the others).
    pub names: &'static [&'static str],
    /// The argument that makes it say something and exit 0 (`--version`, `--help`).
    pub probe: &'static str,
}

pub async fn checks(probe: &Probe<'_>, expected: &Expected) -> Vec<Check> {
    let mut checks = Vec::new();
    for program in &expected.programs {
        let mut ran = Ran::Missing(String::new());
        for name in program.names {
            ran = probe.run(&[name, program.probe]).await;
            if !matches!(ran, Ran::Missing(_)) {
                break;
            }
        }
        checks.push(check(&program.names.join(" or "), ran, &expected.engine));
    }
    checks
}

/// `engine`: the serving engine the toolbox was made for, whose image the fix names.
fn check(program: &str, ran: Ran, engine: &str) -> Check {
    let name = format!("program:{}", program.split(' ').next().unwrap_or(program));
    let fix = || Some(format!("refresh from an image made for {engine} (`refresh --engine {engine}`)"));
    match ran {
        Ran::Exited(0, _, _) => Check::new(name, Status::Pass, format!("{program} runs"), None),
        Ran::Exited(code, stdout, stderr) => Check::new(
            name,
            Status::Fail,
            format!(
                "{program} does not run (exit {code}): {}",
                last_words(if stderr.trim().is_empty() { &stdout } else { &stderr })
            ),
            fix(),
        ),
        Ran::Missing(_) => Check::new(name, Status::Fail, format!("{program} is not in the image"), fix()),
        Ran::Broken(why) => Check::new(name, Status::Fail, why, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_runs_passes_and_one_missing_or_broken_fails_with_the_fix() {
        let server = "llama-server";
        assert_eq!(check(server, Ran::Exited(0, "version: 1".into(), String::new()), "llama.cpp").status, Status::Pass);
        let missing = check("ggml-rpc-server or rpc-server", Ran::Missing("not in the image".into()), "llama.cpp");
        assert_eq!((missing.name.as_str(), missing.status), ("program:ggml-rpc-server", Status::Fail));
        assert!(missing.fix.unwrap().contains("--engine llama.cpp"));
        let broken = check(server, Ran::Exited(127, String::new(), "libvulkan.so.1: cannot open".into()), "llama.cpp");
        assert!(broken.message.contains("libvulkan.so.1"), "{}", broken.message);
    }
}
