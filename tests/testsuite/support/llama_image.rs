//! Toolbox images with a real llama.cpp, pushed to the test's loopback registry, in three
//! variants the serving and canary tests tell apart by what they serve:
//! - [`llama_image`]: llama.cpp as built;
//! - [`llama_image_rope`]: the same server and model, but the model's RoPE base overridden
//!   (`--override-kv llama.rope.freq_base=float:100`), so the answers change: a "broken" build;
//! - [`llama_image_slow`]: the same answers, served far more slowly (see [`LlamaVariant::Slow`]);
//! - [`llama_index_image`]: as built, published as an OCI index (two digests of one image).
//!
//! The rootfs is Debian bookworm, the one Toolbx accepts (toolbox_image.rs: bash, sudo, and the
//! glibc and libstdc++ of the Debian 12 machine that built the binaries), without apt's lists and
//! caches, locales and docs (~120 MB less for every node to pull and, on vfs, copy per container: 94 MB), with
//! llama.cpp: `/opt/llama.cpp/bin/{llama-server,ggml-rpc-server}` (static), `rpc-server` and
//! `ggml-rpc-server` on PATH (links in /usr/local/bin), and `/usr/local/bin/llama-server`, a
//! shell wrapper that runs the real one its variant's way (as built: `exec`, the same pid). One
//! tarball per variant, cached under the machine's test cache, imported with `podman import` (a `podman
//! build` adding the wrapper as a layer took 15 s on vfs, an import 1-4 s), pushed, and removed
//! from `podman` (image.rs).
//!
//! ```ignore
//! let good = llama_image(podman, &registry, "llama:good", "2026-11-01T10:00:00Z");
//! let broken = llama_image_rope(podman, &registry, "llama:broken", "2026-11-02T10:00:00Z");
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::image::push_rootfs_image;
use super::llama_cpp::llama_cpp;
use super::node_image::node_rootfs_tar;
use super::oci_image::{publish, ImageSpec, Published};
use super::podman::PodmanService;
use super::registry::Registry;
use super::test_cache::{cached_file, recipe_hash};
use super::toolbox_image::toolbox_rootfs_tar;

const CREATED_LABEL: &str = "org.opencontainers.image.created";

/// Where the image keeps the real binaries.
pub const IMAGE_BIN_DIR: &str = "/opt/llama.cpp/bin";

/// What an image's `llama-server` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlamaVariant {
    /// The server as built.
    AsBuilt,
    /// The model's RoPE base overridden to 100 (the tiny model's is 10000): same weights, other
    /// rotary angles from the second position on, so greedy answers differ.
    RopeBase,
    /// The server stopped 19 twentieths of the time: SIGSTOP/SIGCONT in 10 ms on / 190 ms off
    /// from the wrapper, as cpulimit does. Fewer threads cannot slow it (the tests run one
    /// already) and taskset only pins it to a core. Split over RPC, the workers compute while the
    /// head is stopped, and on a busy machine every process gets less than its window anyway:
    /// 10 ms on / 40 ms off measured only 0.66 of the image it replaced there. Twentyfold, the head
    /// is away for most of every token: 0.08-0.12 of the unslowed server on loopback RPC with the
    /// machine's load at 9 on 2 cores. It changes no answer.
    Slow,
}

/// llama.cpp as built, imported through `podman` and pushed as `REGISTRY/name` (the local copy
/// goes: a refresh must pull it), created at `created` (RFC 3339: the OCI created label; another
/// date, another image digest). Returns the reference.
pub fn llama_image(podman: &PodmanService, registry: &Registry, name: &str, created: &str) -> String {
    push_rootfs_image(podman, registry, name, &llama_rootfs_tar(LlamaVariant::AsBuilt), &[(CREATED_LABEL, created)])
}

/// llama.cpp as built, published straight to the registry as buildx publishes (oci_image.rs: an
/// OCI index of the image and an attestation), created at `created`: one image with two registry
/// digests, the index's (what the tag names) and its platform manifest's.
pub fn llama_index_image(registry: &Registry, name: &str, created: &str) -> Published {
    let rootfs = std::fs::read(llama_rootfs_tar(LlamaVariant::AsBuilt)).expect("the llama rootfs");
    publish(
        registry,
        &ImageSpec {
            name: name.into(),
            created: created.into(),
            layers: vec![rootfs],
            entrypoint: None,
            cmd: vec!["/bin/sh".into()],
            index: true,
        },
    )
}

/// A `llama-server` with another RoPE base: the same model file, other answers.
pub fn llama_image_rope(podman: &PodmanService, registry: &Registry, name: &str, created: &str) -> String {
    push_rootfs_image(podman, registry, name, &llama_rootfs_tar(LlamaVariant::RopeBase), &[(CREATED_LABEL, created)])
}

/// A `llama-server` that answers the same, about ten times slower.
pub fn llama_image_slow(podman: &PodmanService, registry: &Registry, name: &str, created: &str) -> String {
    push_rootfs_image(podman, registry, name, &llama_rootfs_tar(LlamaVariant::Slow), &[(CREATED_LABEL, created)])
}

/// The `llama-server` wrapper of `variant` around the real binary `server` (the image's, or this
/// machine's build to run the variant on loopback).
pub fn llama_server_wrapper(variant: LlamaVariant, server: &Path) -> String {
    let server = server.display();
    match variant {
        LlamaVariant::AsBuilt => format!("#!/bin/sh\nexec {server} \"$@\"\n"),
        LlamaVariant::RopeBase => {
            format!("#!/bin/sh\nexec {server} --override-kv llama.rope.freq_base=float:100 \"$@\"\n")
        }
        // Every STOP is followed by a CONT in the same turn, so the server is left running
        // whenever the loop ends; SIGTERM/SIGINT are passed on, and the wrapper ends with the
        // server (a signal interrupts `wait`: it waits again), with its status.
        LlamaVariant::Slow => format!(
            "#!/bin/sh\n\
             {server} \"$@\" &\n\
             server=$!\n\
             trap 'stopping=1; kill -CONT \"$server\" 2>/dev/null; kill -TERM \"$server\" 2>/dev/null' TERM INT\n\
             while [ -z \"$stopping\" ] && kill -0 \"$server\" 2>/dev/null; do\n\
             \x20 sleep 0.01; kill -STOP \"$server\" 2>/dev/null\n\
             \x20 sleep 0.19; kill -CONT \"$server\" 2>/dev/null\n\
             done\n\
             wait \"$server\"; status=$?\n\
             while kill -0 \"$server\" 2>/dev/null; do wait \"$server\"; status=$?; done\n\
             exit $status\n"
        ),
    }
}

/// The variant's rootfs tarball, made on first use from the cached bookworm rootfs, keyed by the
/// llama.cpp build and the variant's wrapper.
pub fn llama_rootfs_tar(variant: LlamaVariant) -> PathBuf {
    let build = llama_cpp();
    let wrapper = llama_server_wrapper(variant, &Path::new(IMAGE_BIN_DIR).join("llama-server"));
    let recipe = recipe_hash(&format!("{} {UNNEEDED:?} {wrapper}", build.key()));
    cached_file(&format!("llama-rootfs-{recipe}.tar"), |staging, tarball| {
        let rootfs = staging.join("rootfs");
        std::fs::create_dir_all(&rootfs).expect("mkdir rootfs");
        run(Command::new("tar").arg("-C").arg(&rootfs).arg("-xf").arg(toolbox_rootfs_tar()));
        for unneeded in UNNEEDED {
            let _ = std::fs::remove_dir_all(rootfs.join(unneeded));
        }
        add_llama_cpp(&rootfs, &wrapper);
        run(Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(tarball).arg("."));
    })
}

/// llama.cpp as built on the node image's rootfs (node_image.rs: Python with huggingface_hub), so
/// the head's toolbox can download a Hub GGUF.
pub fn llama_hub_image(podman: &PodmanService, registry: &Registry, name: &str, created: &str) -> String {
    let build = llama_cpp();
    let base = node_rootfs_tar();
    let wrapper = llama_server_wrapper(LlamaVariant::AsBuilt, &Path::new(IMAGE_BIN_DIR).join("llama-server"));
    let recipe = recipe_hash(&format!("{} {} {wrapper}", build.key(), base.display()));
    let tar = cached_file(&format!("llama-hub-rootfs-{recipe}.tar"), |staging, tarball| {
        let rootfs = staging.join("rootfs");
        std::fs::create_dir_all(&rootfs).expect("mkdir rootfs");
        run(Command::new("tar").arg("-C").arg(&rootfs).arg("-xf").arg(&base));
        add_llama_cpp(&rootfs, &wrapper);
        run(Command::new("tar").arg("-C").arg(&rootfs).arg("-cf").arg(tarball).arg("."));
    });
    push_rootfs_image(podman, registry, name, &tar, &[(CREATED_LABEL, created)])
}

/// The build's servers into `rootfs`: the binaries in [`IMAGE_BIN_DIR`], the RPC server on PATH
/// by both its names, and `llama-server` as `wrapper`.
fn add_llama_cpp(rootfs: &Path, wrapper: &str) {
    let build = llama_cpp();
    let bin = rootfs.join(IMAGE_BIN_DIR.trim_start_matches('/'));
    std::fs::create_dir_all(&bin).expect("mkdir /opt/llama.cpp/bin");
    for binary in [build.llama_server(), build.rpc_server()] {
        std::fs::copy(&binary, bin.join(binary.file_name().expect("a binary"))).expect("copy a llama.cpp binary");
    }
    for name in ["rpc-server", "ggml-rpc-server"] {
        let link = rootfs.join("usr/local/bin").join(name);
        std::os::unix::fs::symlink(format!("{IMAGE_BIN_DIR}/ggml-rpc-server"), link).expect("link the RPC server");
    }
    let path = rootfs.join("usr/local/bin/llama-server");
    std::fs::write(&path, wrapper).expect("write llama-server");
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod 755");
}

/// What a serving image does without: apt's lists and caches, translations, documentation.
const UNNEEDED: [&str; 6] =
    ["var/lib/apt/lists", "var/cache/apt", "usr/share/locale", "usr/share/doc", "usr/share/man", "usr/share/info"];

fn run(command: &mut Command) {
    let output = command.stdin(Stdio::null()).output().expect("run a step of the llama image");
    assert!(output.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}
