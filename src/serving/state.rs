//! What a node can serve with and what it serves now: its toolbox, the engine and image it was
//! made for, its cluster link's address, which of the programs a launch needs its toolbox has,
//! whether the model's files are where the launch will look (`cluster launch PATH` checks every
//! node that loads it before anything starts), the ports a new service would take, and every
//! service recorded there (whatever its toolbox) with what of it still runs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::labels;
use crate::link::address::{cluster_link, NodeLink};
use crate::serving::commands::{launch_alive, words};
use crate::serving::engine::EngineRef;
use crate::serving::ports::first_free;
use crate::serving::record::{ServingDir, ServingRecord};
use crate::settings::Settings;
use crate::toolbox::running::RunningToolbox;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeCheck {
    /// The toolbox a launch would serve from (None: only say what the node serves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolbox: Option<String>,
    /// Start the toolbox when it is stopped (a launch); else only look.
    pub start: bool,
    /// Programs to look for on the toolbox's PATH.
    #[serde(default)]
    pub programs: Vec<String>,
    /// Files or directories (as the toolbox sees them) that must be there and readable.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Ask the image what its engine can do: run this help command in the toolbox and say which
    /// of these flags it names (vLLM's `--nnodes`: a version question answered by the version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<FlagQuestion>,
    /// A file (as the toolbox sees it) whose SHA-256 to report: the GGUF a llama.cpp launch
    /// serves, so its figures and answers are kept under the weights, not the file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256_of: Option<String>,
    /// For each of these ports, the first from it up free on the node's link address (the
    /// loopback without a link): held by no record here, in `keep`, or by a listener.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub free_ports: Vec<u16>,
    /// Ports kept for something else here (the router's, on the cluster's head).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keep: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlagQuestion {
    pub help: Vec<String>,
    pub flags: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServeCheckReport {
    /// The toolbox asked about (None: none was).
    #[serde(default)]
    pub toolbox: Option<String>,
    /// The image it runs as a pull names it (registry digest, else id); None when there is no
    /// such toolbox running.
    pub image: Option<String>,
    /// The image it runs as every node names it alike (its id): what the nodes are compared by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// The engine the toolbox was made for (its label; None: made before engines were recorded).
    #[serde(default)]
    pub engine: Option<EngineRef>,
    /// This check started it.
    pub started: bool,
    /// The cluster link Ray and vLLM bind to (its transport, and its netdev as the kernel has it).
    #[serde(flatten)]
    pub cluster_link: NodeLink,
    /// Every service recorded on the node, by name, whatever its toolbox.
    #[serde(default)]
    pub services: Vec<ServingState>,
    /// The programs and paths were looked for (the toolbox runs: a dry run starts none).
    #[serde(default)]
    pub looked: bool,
    /// Of the programs asked about, those the toolbox has.
    #[serde(default)]
    pub programs: Vec<String>,
    /// Of the paths asked about, those that are not there (or not readable).
    #[serde(default)]
    pub missing: Vec<String>,
    /// Of the flags asked about, those the help names; None: not asked, or the toolbox does not
    /// run (a dry run starts none).
    #[serde(default)]
    pub flags: Option<Vec<String>>,
    /// The SHA-256 of `sha256_of` (None: not asked, or it is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The free port for each of `free_ports`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub free_ports: Vec<u16>,
}

impl ServeCheckReport {
    /// The service named `name` here, if it has a record.
    pub fn service(&self, name: &str) -> Option<&ServingState> {
        self.services.iter().find(|state| state.record.service == name)
    }

    /// The services something of which still runs here.
    pub fn active(&self) -> impl Iterator<Item = &ServingState> {
        self.services.iter().filter(|state| state.active())
    }
}

/// A launch's record on this node, and what of it still runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServingState {
    pub record: ServingRecord,
    /// The recorded processes that still run, by name.
    pub alive: Vec<String>,
    /// Ray runs in the toolbox (where the launch started it).
    pub ray_alive: bool,
}

impl ServingState {
    /// Something of the launch still runs.
    pub fn active(&self) -> bool {
        !self.alive.is_empty() || self.ray_alive
    }

    /// What the launch started here that no longer runs (`vllm`, `rpc-server`, `Ray`).
    pub fn lost(&self) -> Vec<String> {
        let mut lost: Vec<String> =
            self.record.processes.iter().filter(|p| !self.alive.contains(&p.name)).map(|p| p.name.clone()).collect();
        if self.record.backend.runs_ray() && !self.ray_alive {
            lost.push("Ray".into());
        }
        lost
    }
}

/// Prints `program NAME` for each of the programs before `--` on the PATH, and `missing PATH` for
/// each path after it that is not there or not readable. The values are positional parameters.
const LOOK: &str = r#"mode=program
for a; do
  if [ "$a" = -- ]; then mode=path; continue; fi
  if [ $mode = program ]; then command -v "$a" >/dev/null 2>&1 && echo "program $a"
  else [ -r "$a" ] || echo "missing $a"; fi
done"#;

pub async fn serve_check(settings: &Settings, check: &ServeCheck) -> Result<ServeCheckReport> {
    let cluster_link = cluster_link(settings).await?;
    let toolbox = match (&check.toolbox, check.start) {
        (Some(name), true) => Some(RunningToolbox::open(settings, name).await?),
        (Some(name), false) => RunningToolbox::if_running(settings, name).await?,
        (None, _) => None,
    };
    // Each question is an exec of its own in the toolbox: asked at once, the check takes as long
    // as the longest (an engine's help: a Python start), not their sum.
    let look = toolbox.as_ref().filter(|_| !check.programs.is_empty() || !check.paths.is_empty());
    let (services, (programs, missing), flags, sha256) = tokio::try_join!(
        serving_states(settings, toolbox.as_ref()),
        look_for(look, check),
        async {
            match (&toolbox, &check.flags) {
                (Some(toolbox), Some(question)) => flags_named(toolbox, question).await.map(Some),
                _ => Ok(None),
            }
        },
        async {
            match (&toolbox, &check.sha256_of) {
                (Some(toolbox), Some(path)) => sha256_of(toolbox, path).await,
                _ => Ok(None),
            }
        },
    )?;
    let mut held: BTreeSet<u16> = services.iter().flat_map(|state| state.record.ports()).collect();
    held.extend(check.keep.iter().copied());
    let address = IpAddr::V4(cluster_link.address().unwrap_or(Ipv4Addr::LOCALHOST));
    let free_ports = check.free_ports.iter().map(|from| first_free(*from, address, &held)).collect::<Result<_>>()?;
    Ok(ServeCheckReport {
        toolbox: check.toolbox.clone(),
        image: toolbox.as_ref().map(RunningToolbox::image),
        image_id: toolbox.as_ref().map(RunningToolbox::image_id),
        engine: toolbox
            .as_ref()
            .and_then(|t| t.container.labels.get(labels::ENGINE))
            .map(|label| EngineRef::of_label(Some(label))),
        started: toolbox.as_ref().is_some_and(|t| t.started),
        cluster_link,
        services,
        looked: look.is_some(),
        programs,
        missing,
        flags,
        sha256,
        free_ports,
    })
}

/// The programs of `check` the toolbox has, and its paths that are not there (or not readable).
async fn look_for(toolbox: Option<&RunningToolbox>, check: &ServeCheck) -> Result<(Vec<String>, Vec<String>)> {
    let (mut programs, mut missing) = (Vec::new(), Vec::new());
    let Some(toolbox) = toolbox else { return Ok((programs, missing)) };
    let mut argv = words(&["sh", "-c", LOOK, "sh"]);
    argv.extend(check.programs.iter().cloned());
    argv.push("--".into());
    argv.extend(check.paths.iter().cloned());
    let said = toolbox.run_ok("looking for the launch's programs and files", &argv, &Default::default()).await?;
    for line in said.stdout.lines() {
        match line.split_once(' ') {
            Some(("program", name)) => programs.push(name.to_string()),
            Some(("missing", path)) => missing.push(path.to_string()),
            _ => {}
        }
    }
    Ok((programs, missing))
}

/// The SHA-256 of `path` in the toolbox; None when it cannot be read there (a missing file is
/// named by the look beside).
async fn sha256_of(toolbox: &RunningToolbox, path: &str) -> Result<Option<String>> {
    let said = toolbox.run(&words(&["sha256sum", "--", path]), &Default::default()).await?;
    Ok(said
        .success()
        .then(|| said.stdout.split_whitespace().next().filter(|hex| hex.len() == 64).map(str::to_string))
        .flatten())
}

/// The flags of `question` its help names (a help that fails names none: an engine too old to
/// take the question, or none at all). A flag's variable counts as one of its words (llama.cpp's
/// `(env: LLAMA_ARG_LOAD_MODE)`).
async fn flags_named(toolbox: &RunningToolbox, question: &FlagQuestion) -> Result<Vec<String>> {
    let said = toolbox.run(&question.help, &Default::default()).await?;
    Ok(if said.success() { named_in(&said.stdout, &question.flags) } else { Vec::new() })
}

/// Of `flags`, those `help` names as words of their own.
pub fn named_in(help: &str, flags: &[String]) -> Vec<String> {
    let words: BTreeSet<&str> = help.split(|c: char| c.is_whitespace() || matches!(c, ',' | '=' | '(' | ')')).collect();
    flags.iter().filter(|flag| words.contains(flag.as_str())).cloned().collect()
}

/// Every service recorded here, with what of each still runs: one exec per toolbox that serves
/// any (a stopped or removed toolbox runs nothing). `opened` is a toolbox the caller has running.
pub async fn serving_states(settings: &Settings, opened: Option<&RunningToolbox>) -> Result<Vec<ServingState>> {
    let recorded = ServingDir::of(&settings.paths)?.list()?;
    let mut by_toolbox: BTreeMap<&str, Vec<&ServingRecord>> = BTreeMap::new();
    for found in &recorded {
        by_toolbox.entry(found.record.toolbox.as_str()).or_default().push(&found.record);
    }
    let mut states = Vec::new();
    for (name, records) in by_toolbox {
        let looked_up;
        let running = match opened.filter(|toolbox| toolbox.name == name) {
            Some(toolbox) => Some(toolbox),
            None => {
                looked_up = RunningToolbox::if_running(settings, name).await?;
                looked_up.as_ref()
            }
        };
        let pids: Vec<u32> = records.iter().flat_map(|r| r.processes.iter().map(|p| p.pid)).collect();
        let ray = records.iter().any(|r| r.backend.runs_ray());
        let alive: Vec<String> = match running {
            Some(toolbox) => {
                let said = toolbox.run(&launch_alive(&pids, ray), &Default::default()).await?;
                said.stdout.lines().map(|line| line.trim().to_string()).collect()
            }
            None => Vec::new(),
        };
        for record in records {
            let state = ServingState {
                alive: record
                    .processes
                    .iter()
                    .filter(|p| alive.contains(&p.pid.to_string()))
                    .map(|p| p.name.clone())
                    .collect(),
                ray_alive: record.backend.runs_ray() && alive.iter().any(|line| line == "ray"),
                record: record.clone(),
            };
            states.push(state);
        }
    }
    states.sort_by(|a, b| a.record.service.cmp(&b.record.service));
    Ok(states)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_look_finds_programs_and_missing_paths() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("model.gguf");
        std::fs::write(&here, "GGUF").unwrap();
        let gone = dir.path().join("model-00002-of-00002.gguf");
        let output = std::process::Command::new("sh")
            .args(["-c", LOOK, "sh", "sh", "strix-no-such-program", "--"])
            .arg(&here)
            .arg(&gone)
            .output()
            .unwrap();
        assert!(output.status.success());
        assert_eq!(String::from_utf8(output.stdout).unwrap(), format!("program sh\nmissing {}\n", gone.display()));
    }
}
