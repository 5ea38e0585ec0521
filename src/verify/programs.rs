//! The engine's own programs, run from the inside: a llama.cpp toolbox must have `llama-server`
//! (the head's server) and the RPC server (every worker's; `ggml-rpc-server` or, in older builds,
//! `rpc-server`), each able to start (`--version`, `--help`: a missing library fails it). vLLM's
//! stack is proven by the hardware checks (torch sees a GPU).

use super::devices::last_words;
use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};
use crate::serving::engine::ServingEngine;
use crate::serving::llama::{RPC_PROGRAMS, SERVER};

pub async fn checks(probe: &Probe<'_>, expected: &Expected) -> Vec<Check> {
    if expected.serving != ServingEngine::LlamaCpp {
        return Vec::new();
    }
    let server = probe.run(&[SERVER, "--version"]).await;
    let mut rpc = probe.run(&[RPC_PROGRAMS[0], "--help"]).await;
    if matches!(rpc, Ran::Missing(_)) {
        rpc = probe.run(&[RPC_PROGRAMS[1], "--help"]).await;
    }
    vec![check(SERVER, server), check(&RPC_PROGRAMS.join(" or "), rpc)]
}

fn check(program: &str, ran: Ran) -> Check {
    let name = format!("program:{}", program.split(' ').next().unwrap_or(program));
    let fix =
        || Some("refresh from a llama.cpp image built with the RPC backend (`refresh --engine llama.cpp`)".into());
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
        assert_eq!(check(SERVER, Ran::Exited(0, "version: 1".into(), String::new())).status, Status::Pass);
        let missing = check("ggml-rpc-server or rpc-server", Ran::Missing("not in the image".into()));
        assert_eq!((missing.name.as_str(), missing.status), ("program:ggml-rpc-server", Status::Fail));
        assert!(missing.fix.unwrap().contains("--engine llama.cpp"));
        let broken = check(SERVER, Ran::Exited(127, String::new(), "libvulkan.so.1: cannot open".into()));
        assert!(broken.message.contains("libvulkan.so.1"), "{}", broken.message);
    }
}
