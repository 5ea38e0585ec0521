//! Will the new RCCL load in the image? `rccl inspect --against IMAGE` and `build --rccl` check
//! SONAME, the symbols the image's RCCL and its consumers use, and DT_NEEDED, against a real image
//! holding a gcc-built "RCCL" and a "libtorch_hip.so" that imports from it.

use std::path::Path;
use std::process::Command;

use crate::support::cli::{json, refresh_vllm, run_strix, stderr};
use crate::support::host_tree::materialize;
use crate::support::image::{stand_in_image_with, stand_in_image_with_tools};
use crate::support::podman::PodmanService;
use crate::support::rccl_fixtures::{gfx1151_library_with, sha256_of_file};
use crate::support::registry::Registry;

const TORCH_LIB: &str = "/opt/venv/lib/python3.12/site-packages/torch/lib";

fn gcc(dir: &Path, name: &str, source: &str, args: &[&str]) -> Vec<u8> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let out = dir.join(name);
    let output = Command::new("gcc").args(["-shared", "-fPIC", "-o"]).arg(&out).arg(&c).args(args).output().unwrap();
    assert!(output.status.success(), "gcc: {}", String::from_utf8_lossy(&output.stderr));
    std::fs::read(out).unwrap()
}

/// The image: the RCCL it ships (in /opt/rocm and torch's own copy) and torch, which imports
/// ncclCommInitRankScalable from it.
fn image_with_torch(podman: &PodmanService, registry: &Registry, dir: &Path) -> String {
    let old = gcc(
        dir,
        "librccl.so.1",
        "int ncclAllReduce(void){return 0;} int ncclCommInitRankScalable(void){return 0;}",
        &["-Wl,-soname,librccl.so.1"],
    );
    let libdir = format!("-L{}", dir.display());
    let torch = gcc(
        dir,
        "libtorch_hip.so",
        "extern int ncclCommInitRankScalable(void); int torch_init(void){return ncclCommInitRankScalable();}",
        &["-Wl,--no-as-needed", &libdir, "-l:librccl.so.1"],
    );
    let torch_path = format!("{TORCH_LIB}/libtorch_hip.so");
    let torch_rccl = format!("{TORCH_LIB}/librccl.so.1");
    stand_in_image_with(
        podman,
        registry,
        "vllm:latest",
        "2026-11-01T10:00:00Z",
        &[("/opt/rocm/lib/librccl.so.1", &old), (torch_rccl.as_str(), &old), (torch_path.as_str(), &torch)],
    )
}

fn inspect_against(podman: &PodmanService, library: &Path, image: &str) -> (i32, serde_json::Value) {
    let output =
        run_strix(&podman.env(), &["--json", "rccl", "inspect", library.to_str().unwrap(), "--against", image]);
    (output.status.code().unwrap_or(-1), json(&output))
}

#[test]
fn each_way_of_not_loading_is_named_and_a_superset_is_baked_in() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let dir = tempfile::tempdir().unwrap();
    let image = image_with_torch(&podman, &registry, dir.path());
    let both = ["ncclAllReduce", "ncclCommInitRankScalable"];

    // Lacks the symbol torch imports.
    let lacking = gfx1151_library_with(dir.path(), "lacking.so", &["ncclAllReduce"], &[]);
    let (code, report) = inspect_against(&podman, &lacking, &image);
    assert_eq!(code, 1, "{report}");
    let missing = &report["abi"]["missing_symbols"];
    assert_eq!(missing[0]["symbol"], "ncclCommInitRankScalable", "{report}");
    let needers = missing[0]["needed_by"].to_string();
    assert!(needers.contains("libtorch_hip.so") && needers.contains("/opt/rocm/lib/librccl.so.1"), "{report}");

    // Needs a library the image does not have (built against ROCm 7: libamdhip64.so.7).
    gcc(dir.path(), "libamdhip64.so.7", "int hipInit(void){return 0;}", &["-Wl,-soname,libamdhip64.so.7"]);
    let libdir = format!("-L{}", dir.path().display());
    let rocm7 = gfx1151_library_with(dir.path(), "rocm7.so", &both, &[&libdir, "-l:libamdhip64.so.7"]);
    let (code, report) = inspect_against(&podman, &rocm7, &image);
    assert_eq!(code, 1, "{report}");
    assert_eq!(report["abi"]["unresolved_needed"], serde_json::json!(["libamdhip64.so.7"]), "{report}");

    // Another SONAME.
    let renamed = gfx1151_library_with(dir.path(), "renamed.so", &both, &["-Wl,-soname,librccl.so.2"]);
    let (code, report) = inspect_against(&podman, &renamed, &image);
    assert_eq!(code, 1, "{report}");
    assert!(report["problems"].to_string().contains("SONAME is librccl.so.2"), "{report}");

    // A superset loads, and build bakes it in; the lacking one is refused before any build.
    let superset = gfx1151_library_with(
        dir.path(),
        "superset.so",
        &["ncclAllReduce", "ncclCommInitRankScalable", "ncclCommWindowRegister"],
        &[],
    );
    let (code, report) = inspect_against(&podman, &superset, &image);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["abi"]["ok"], true);
    assert_eq!(report["abi"]["replaced"].as_array().unwrap().len(), 2, "{report}");

    let tag = format!("{}/vllm:abi", registry.host());
    let refused =
        run_strix(&podman.env(), &["build", "--rccl", lacking.to_str().unwrap(), "--base", &image, "--tag", &tag]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("ncclCommInitRankScalable"), "{}", stderr(&refused));
    let built = run_strix(
        &podman.env(),
        &["--json", "build", "--rccl", superset.to_str().unwrap(), "--base", &image, "--tag", &tag],
    );
    assert!(built.status.success(), "{}", stderr(&built));
    let sha = sha256_of_file(&superset);
    assert_eq!(json(&built)["rccl_sha256"], sha);
}

#[test]
fn a_library_whose_headers_lie_is_refused_not_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let good = gfx1151_library_with(dir.path(), "good.so", &["ncclAllReduce"], &[]);
    let mut bytes = std::fs::read(&good).unwrap();
    // Program headers far past the end of the file.
    bytes[0x20..0x28].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let lying = dir.path().join("lying.so");
    std::fs::write(&lying, &bytes).unwrap();
    let output = run_strix(&[], &["rccl", "inspect", lying.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), stderr(&output));
    assert!(text.contains("REJECTED") && text.contains("program headers lie outside the file"), "{text}");
}

/// TheRock's layout: torch's libraries in `site-packages/torch/lib`, apart from every RCCL copy
/// (`/opt/rocm/lib`, the ROCm SDK's wheel). Every library under the RCCL roots that needs librccl
/// or imports nccl* symbols is a consumer, found with the image's shell alone (and grep where the
/// image has it): the same answer from an image with grep and one with only `sh` and `sleep`.
#[test]
fn torch_apart_from_every_rccl_copy_is_checked_with_or_without_grep() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let dir = tempfile::tempdir().unwrap();
    let rccl = gcc(
        dir.path(),
        "librccl.so.1",
        "int ncclAllReduce(void){return 0;} int ncclCommInitRankScalable(void){return 0;}",
        &["-Wl,-soname,librccl.so.1"],
    );
    let libdir = format!("-L{}", dir.path().display());
    // Linked to librccl (DT_NEEDED), as torch's own build links it.
    let torch_hip = gcc(
        dir.path(),
        "libtorch_hip.so",
        "extern int ncclCommInitRankScalable(void); int torch_init(void){return ncclCommInitRankScalable();}",
        &["-Wl,--no-as-needed", &libdir, "-l:librccl.so.1"],
    );
    // Importing an nccl symbol without naming librccl (another library brings it in).
    let torch_python = gcc(
        dir.path(),
        "libtorch_python.so",
        "extern int ncclAllReduce(void); int py_all_reduce(void){return ncclAllReduce();}",
        &[],
    );
    let unrelated = gcc(dir.path(), "libc10.so", "int c10(void){return 0;}", &[]);
    let site = "/opt/venv/lib/python3.12/site-packages";
    let files: Vec<(String, &[u8])> = vec![
        ("/opt/rocm/lib/librccl.so.1".into(), &rccl),
        (format!("{site}/_rocm_sdk_libraries_gfx1151/lib/librccl.so.1"), &rccl),
        (format!("{TORCH_LIB}/libtorch_hip.so"), &torch_hip),
        (format!("{TORCH_LIB}/libtorch_python.so"), &torch_python),
        (format!("{TORCH_LIB}/libc10.so"), &unrelated),
        (format!("{site}/somewheel/libfoo.so"), b"/* GNU ld script */ GROUP ( libfoo.so.1 )"),
    ];
    let files: Vec<(&str, &[u8])> = files.iter().map(|(path, bytes)| (path.as_str(), *bytes)).collect();
    let with_grep = stand_in_image_with(&podman, &registry, "vllm:grep", "2026-11-01T10:00:00Z", &files);
    let shell_only =
        stand_in_image_with_tools(&podman, &registry, "vllm:sh", "2026-11-01T10:00:00Z", &files, &["sh", "sleep"]);

    let lacking = gfx1151_library_with(dir.path(), "lacking.so", &["ncclAllReduce"], &[]);
    let superset = gfx1151_library_with(dir.path(), "superset.so", &["ncclAllReduce", "ncclCommInitRankScalable"], &[]);
    for image in [&with_grep, &shell_only] {
        let (code, report) = inspect_against(&podman, &lacking, image);
        assert_eq!(code, 1, "{image}: {report}");
        let abi = &report["abi"];
        let consumers: Vec<&str> = abi["consumers"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        assert_eq!(
            consumers.iter().copied().collect::<std::collections::BTreeSet<_>>(),
            [format!("{TORCH_LIB}/libtorch_hip.so"), format!("{TORCH_LIB}/libtorch_python.so")]
                .iter()
                .map(String::as_str)
                .collect(),
            "{image}: {report}"
        );
        assert_eq!(abi["replaced"].as_array().unwrap().len(), 2, "{image}: {report}");
        assert_eq!(abi["missing_symbols"][0]["symbol"], "ncclCommInitRankScalable", "{image}: {report}");
        let needers = abi["missing_symbols"][0]["needed_by"].to_string();
        assert!(needers.contains(&format!("{TORCH_LIB}/libtorch_hip.so")), "{image}: {report}");
        assert_eq!(abi["unreadable"], serde_json::json!([]), "{image}: no noise from what is no library: {report}");

        let (code, report) = inspect_against(&podman, &superset, image);
        assert_eq!(code, 0, "{image}: {report}");
    }
}

/// An image without a shell cannot be looked into: the error says what the check needs.
#[test]
fn an_image_without_a_shell_is_named_with_what_the_check_needs() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let dir = tempfile::tempdir().unwrap();
    let rccl = gcc(dir.path(), "librccl.so.1", "int ncclAllReduce(void){return 0;}", &["-Wl,-soname,librccl.so.1"]);
    let image = stand_in_image_with_tools(
        &podman,
        &registry,
        "vllm:bare",
        "2026-11-01T10:00:00Z",
        &[("/opt/rocm/lib/librccl.so.1", &rccl)],
        &["sleep"],
    );
    let new = gfx1151_library_with(dir.path(), "new.so", &["ncclAllReduce"], &[]);
    let output = run_strix(&podman.env(), &["--json", "rccl", "inspect", new.to_str().unwrap(), "--against", &image]);
    assert_eq!(output.status.code(), Some(1));
    let error = &json(&output)["error"];
    assert!(error["message"].as_str().unwrap().contains("sh not in the image"), "{error}");
    assert!(
        error["fix"].as_str().unwrap().contains("needs a POSIX shell (`sh`) in the image, nothing else"),
        "{error}"
    );
}

/// TheRock's stock RCCL now carries gfx1151 and what current torch nightlies import
/// (`ncclCommResume`); a custom gfx1151 RCCL built from an older RCCL lacks it, and `import torch`
/// broke (kyuz0/amd-strix-halo-vllm-toolboxes#60). `rccl inspect --against` and `build --rccl`
/// say that the image's own RCCL suffices, build refuses the custom one naming the symbol, and
/// `verify` fails an image carrying it while the stock image passes.
#[test]
fn the_stock_rccl_is_judged_and_a_custom_one_that_exports_less_is_refused() {
    let registry = Registry::start();
    let podman = PodmanService::start(&registry);
    let dir = tempfile::tempdir().unwrap();
    let stock_exports = ["ncclAllReduce", "ncclCommInitRankScalable", "ncclCommResume"];
    let stock = gfx1151_library_with(dir.path(), "librccl.so.1", &stock_exports, &[]);
    let libdir = format!("-L{}", dir.path().display());
    let torch = gcc(
        dir.path(),
        "libtorch_hip.so",
        "extern int ncclCommResume(void); extern int ncclAllReduce(void);\n\
         int torch_init(void){return ncclCommResume() + ncclAllReduce();}",
        &["-Wl,--no-as-needed", &libdir, "-l:librccl.so.1"],
    );
    let custom = gfx1151_library_with(dir.path(), "custom.so", &["ncclAllReduce", "ncclCommInitRankScalable"], &[]);
    let torch_path = format!("{TORCH_LIB}/libtorch_hip.so");
    let with_rccl = |tag: &str, created: &str, rccl: &Path| {
        let rccl = std::fs::read(rccl).unwrap();
        let files: [(&str, &[u8]); 2] = [("/opt/rocm/lib/librccl.so.1", &rccl), (torch_path.as_str(), &torch)];
        stand_in_image_with(&podman, &registry, tag, created, &files)
    };
    let image = with_rccl("vllm:latest", "2026-11-01T10:00:00Z", &stock);

    let (code, report) = inspect_against(&podman, &custom, &image);
    assert_eq!(code, 1, "{report}");
    let said = &report["abi"]["stock"];
    assert_eq!(said["has_gfx1151"], true, "{report}");
    assert_eq!(said["missing_for_consumers"], serde_json::json!([]), "{report}");
    assert_eq!(said["exports"], serde_json::json!(stock_exports), "{report}");
    let problems = report["problems"].to_string();
    assert!(problems.contains("exports less than the RCCL") && problems.contains("(ncclCommResume)"), "{problems}");
    let text = run_strix(&podman.env(), &["rccl", "inspect", custom.to_str().unwrap(), "--against", &image]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(
            "stock RCCL    the image's own RCCL carries gfx1151 code and exports every nccl*/rccl* symbol its \
             libraries import (checked against libtorch_hip.so): a custom RCCL is not needed"
        ),
        "{text}"
    );

    let tag = format!("{}/vllm:custom", registry.host());
    let refused =
        run_strix(&podman.env(), &["build", "--rccl", custom.to_str().unwrap(), "--base", &image, "--tag", &tag]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("ncclCommResume") && message.contains("a custom RCCL is not needed"), "{message}");
    assert!(podman.podman(&["image", "exists", &tag]).status.code() == Some(1), "nothing was built");

    // verify: the stock image passes, saying its RCCL is its own; one carrying the custom RCCL fails.
    let host = materialize("strix-thunderbolt-only");
    let host_arg = host.path().to_str().unwrap();
    let created = run_strix(&podman.env(), &refresh_vllm(host_arg, &image, &[]));
    assert!(created.status.success(), "{}", stderr(&created));
    let verified = json(&run_strix(&podman.env(), &["--host-root", host_arg, "--json", "verify", "vllm"]));
    let check = |report: &serde_json::Value, name: &str| {
        report["checks"].as_array().unwrap().iter().find(|c| c["name"] == name).cloned().unwrap_or_default()
    };
    assert_eq!(check(&verified, "rccl:exports")["status"], "pass", "{verified}");
    let gfx = check(&verified, "rccl:gfx1151");
    assert!(gfx["message"].as_str().unwrap().ends_with("the image's own RCCL, no custom build"), "{verified}");

    let broken = with_rccl("vllm:broken", "2026-11-02T10:00:00Z", &custom);
    let refused = run_strix(&podman.env(), &refresh_vllm(host_arg, &broken, &[]));
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("rccl:exports") && message.contains("lacks ncclCommResume"), "{message}");
    assert!(message.contains("`import torch` fails"), "{message}");
}
