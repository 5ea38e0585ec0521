//! What the image's llama.cpp is, as far as the plan depends on it, read from the head's toolbox
//! in one exec ([`QUESTION`]): `llama-server --version`, the devices its build sees
//! (`--list-devices`), and whether its RPC server takes `--device`. Upstream changed three things
//! a plan of a split model meets:
//!
//! - **RPC devices' names** (#16276, 2025-10-04, "rpc : add support for multiple devices"): since,
//!   an rpc-server may expose several devices (`-d, --device`), and llama-server names them `RPC0`,
//!   `RPC1`… by a global counter in `--rpc`'s order; before, `RPC[host:port]`.
//! - **The head's GPU dropped** (#23007, 2026-05-13, reclassified integrated CUDA/HIP devices as
//!   IGPU; fixed by #23868, 2026-05-29): `llama_prepare_model_devices` added an iGPU only while the
//!   device list was empty, and the RPC servers come first: with `--rpc`, Strix Halo's own GPU was
//!   left out, `--tensor-split` had one entry more than the devices, and every layer went to the
//!   workers. Naming every device (`--device`) sidesteps the default selection in every build:
//!   `params.devices` is used as given (src/llama.cpp).
//! - **MLA's V** (#19067, 2026-01-24, "kv-cache : support V-less cache"): since, an MLA model's
//!   cache holds K only (the latent, `kv_lora_rank + rope` values); before, V beside it as well
//!   (`value_length` more: 1088 values a token and layer for DeepSeek-V3 instead of 576, 1.9×).
//!
//! llama.cpp's version is its build number (`version: 4561 (6f53d8a6)`, the commit count) or,
//! since its releases got semantic versions (v0.1.0, August 2026), `version: 0.3.0-dev (build
//! 10711, commit 9723942ad)`; a build from a source tarball says `build 0`. The build numbers of
//! the three merges are not known here: b6084 is from before all three (issue #15210, 2025-08-10:
//! "As of now (version b6084)"), b9315 from after the V-less cache (its release carries #23520);
//! a semantic version is after all three. In between, and when nothing is said, the plan assumes
//! the larger cache, and says so.

/// What the plan asks the head's toolbox: three answers, each after its marker line. `exit 0`:
/// an older build's refusal of an option is an answer too.
pub const QUESTION: [&str; 3] = ["sh", "-c", SCRIPT];

const SCRIPT: &str = r#"llama-server --version 2>&1
echo "--- strix: list-devices"
llama-server --list-devices 2>&1
echo "--- strix: rpc-server --help"
if command -v ggml-rpc-server >/dev/null 2>&1; then ggml-rpc-server --help 2>&1; else rpc-server --help 2>&1; fi
exit 0"#;

const DEVICES_MARKER: &str = "--- strix: list-devices";
const RPC_MARKER: &str = "--- strix: rpc-server --help";

/// A build from before all three changes.
const BEFORE_ALL: u64 = 6084;
/// A build from after the V-less cache.
const AFTER_V_LESS: u64 = 9315;

/// The image's llama.cpp, as it said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlamaBuild {
    /// `llama-server --version`'s version, as printed (None: it printed none).
    pub version: Option<String>,
    /// The build number (None: not said, or 0).
    pub build: Option<u64>,
    /// A semantic version (`0.3.0-dev`).
    pub release: bool,
    /// The head's devices by llama.cpp's names (`ROCm0`, `Vulkan0`); None: it could not say.
    pub head_devices: Option<Vec<String>>,
    /// Its rpc-server takes `--device`: RPC devices are `RPC0`, `RPC1`… (None: it could not say).
    pub numbered_rpc: Option<bool>,
}

impl LlamaBuild {
    /// What the head's toolbox answered [`QUESTION`].
    pub fn read(said: &str) -> LlamaBuild {
        // Without the markers (a toolbox's sh that printed none), every part is read from it all.
        let (version_part, rest) = said.split_once(DEVICES_MARKER).unwrap_or((said, said));
        let (devices_part, rpc_part) = rest.split_once(RPC_MARKER).unwrap_or((rest, ""));
        let version = version_part.lines().find_map(|line| line.trim().strip_prefix("version: ")).map(str::to_string);
        let (build, release) = version.as_deref().map_or((None, false), parse_version);
        let numbered_rpc = (!rpc_part.trim().is_empty() && rpc_part.contains("--host"))
            .then(|| rpc_part.lines().any(|line| line.contains("--device")));
        LlamaBuild { version, build, release, head_devices: head_devices(devices_part), numbered_rpc }
    }

    /// Whether its RPC devices are named `RPC0`, `RPC1`… (None: not known).
    pub fn numbers_rpc_devices(&self) -> Option<bool> {
        self.numbered_rpc.or(match self.build {
            _ if self.release => Some(true),
            Some(build) if build >= AFTER_V_LESS => Some(true),
            Some(build) if build < BEFORE_ALL => Some(false),
            _ => None,
        })
    }

    /// Whether an MLA model's cache holds V beside K, and why the plan takes it so.
    pub fn mla_stores_v(&self) -> (bool, String) {
        let version = self.version.as_deref().unwrap_or("no version");
        match self.build {
            _ if self.release => {
                (false, format!("llama.cpp {version} caches an MLA model's latent alone (K, no V: #19067)"))
            }
            Some(build) if build >= AFTER_V_LESS => {
                (false, format!("llama.cpp build {build} caches an MLA model's latent alone (K, no V: #19067)"))
            }
            Some(build) if build < BEFORE_ALL => (
                true,
                format!("llama.cpp build {build} predates the V-less cache (#19067): an MLA model's V is cached too"),
            ),
            Some(build) => (
                true,
                format!(
                    "llama.cpp build {build} may predate the V-less cache (#19067, 2026-01-24): the plan assumes an \
                     MLA model's V is cached too, the larger cache"
                ),
            ),
            None => (
                true,
                format!(
                    "llama.cpp's build is unknown ({version}): the plan assumes an MLA model's V is cached too, the \
                     larger cache (builds before #19067, 2026-01-24)"
                ),
            ),
        }
    }
}

/// `4561 (6f53d8a6)` → build 4561; `0.3.0-dev (build 10711, commit …)` → build 10711 and a
/// release; `build 0` is unknown.
fn parse_version(version: &str) -> (Option<u64>, bool) {
    let first = version.split_whitespace().next().unwrap_or_default();
    let number = |text: &str| text.parse::<u64>().ok().filter(|&n| n > 0);
    if let Some(build) = number(first.trim_start_matches('b')) {
        return (Some(build), false);
    }
    let release = first.split('-').next().is_some_and(|semver| {
        let parts: Vec<&str> = semver.split('.').collect();
        parts.len() == 3 && parts.iter().all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    });
    let build = version
        .split_once("(build ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(number);
    (build, release)
}

/// `Available devices:`, then one `  NAME: DESCRIPTION (… MiB, … MiB free)` line a device, or
/// `  (none)`: the names. None when it printed no list (a build without `--list-devices`).
fn head_devices(said: &str) -> Option<Vec<String>> {
    let mut lines = said.lines().skip_while(|line| line.trim() != "Available devices:");
    lines.next()?;
    Some(
        lines
            .take_while(|line| line.starts_with(' '))
            .filter_map(|line| line.trim().split_once(": ").map(|(name, _)| name.to_string()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the tests' llama.cpp (llama-cpp-python 0.3.36's, a CPU build from its sdist) answers.
    const TESTS_BUILD: &str = "version: 0.5.0-dev (build 0, commit unknown)\nbuilt with GNU 12.2.0 for Linux x86_64\n\
        --- strix: list-devices\nAvailable devices:\n  (none)\n--- strix: rpc-server --help\n\
        Usage: ggml-rpc-server [options]\n\noptions:\n  -h, --help                       show this help message and exit\n\
          -t, --threads N                  number of threads for the CPU device (default: 1)\n\
          -d, --device <dev1,dev2,...>     comma-separated list of devices\n\
          -H, --host HOST                  host to bind to (default: 127.0.0.1)\n";

    #[test]
    fn the_tests_build_is_a_release_with_numbered_rpc_devices_and_no_head_gpu() {
        let build = LlamaBuild::read(TESTS_BUILD);
        assert_eq!(build.version.as_deref(), Some("0.5.0-dev (build 0, commit unknown)"));
        assert_eq!((build.build, build.release), (None, true));
        assert_eq!(build.head_devices, Some(Vec::new()), "a CPU build sees no GPU");
        assert_eq!((build.numbered_rpc, build.numbers_rpc_devices()), (Some(true), Some(true)));
        assert!(!build.mla_stores_v().0, "{}", build.mla_stores_v().1);
    }

    #[test]
    fn a_rocm_build_names_its_gpu_and_an_old_one_its_rpc_servers_by_address() {
        let rocm = "ggml_cuda_init: found 1 ROCm devices:\n  Device 0: AMD Radeon Graphics, gfx1151\n\
                    version: 6550 (1a2b3c4d)\nbuilt with cc for x86_64\n--- strix: list-devices\n\
                    ggml_cuda_init: found 1 ROCm devices:\nAvailable devices:\n  ROCm0: AMD Radeon Graphics (131072 MiB, \
                    120000 MiB free)\n--- strix: rpc-server --help\nUsage: rpc-server [options]\n  -H, --host HOST\n  -p, \
                    --port PORT\n  -m, --mem MEM\n";
        let build = LlamaBuild::read(rocm);
        assert_eq!((build.build, build.release), (Some(6550), false));
        assert_eq!(build.head_devices, Some(vec!["ROCm0".to_string()]));
        assert_eq!(build.numbers_rpc_devices(), Some(false), "its rpc-server takes no --device");
        let (stores, why) = build.mla_stores_v();
        assert!(stores && why.contains("may predate"), "between the two known builds: the larger cache ({why})");
        let old = LlamaBuild::read("version: 4561 (6f53d8a6)\n");
        assert_eq!((old.build, old.numbers_rpc_devices(), old.mla_stores_v().0), (Some(4561), Some(false), true));
        let new = LlamaBuild::read("version: 9453 (aabbccd)\n--- strix: list-devices\nerror\n");
        assert_eq!((new.numbers_rpc_devices(), new.mla_stores_v().0, new.head_devices), (Some(true), false, None));
        let semver = LlamaBuild::read("version: 0.3.0-dev (build 10711, commit 9723942ad)\n");
        assert_eq!((semver.build, semver.release), (Some(10711), true));
    }

    #[test]
    fn nothing_said_is_nothing_known_and_the_larger_cache() {
        let build = LlamaBuild::read("sh: llama-server: not found\n");
        assert_eq!(build, LlamaBuild { ..LlamaBuild::default() });
        assert_eq!(build.numbers_rpc_devices(), None);
        let (stores, why) = build.mla_stores_v();
        assert!(stores && why.contains("unknown"), "{why}");
        assert_eq!(parse_version("b9453"), (Some(9453), false));
        assert_eq!(parse_version("1.2 (x)"), (None, false), "not a version this reads");
    }
}
