//! Every RCCL the image's ROCm and Python stack would load (/opt/rocm/lib, and the ROCm SDK and
//! torch library directories under the image's virtualenv /opt/venv) is the same
//! library, it carries gfx1151 code objects, and it is the one the image's label records. A mixed
//! image — some copies replaced, some not — fails: torch loads its own copy. The copies are found
//! with the image's shell alone, and read out through the engine's archive API.

use std::collections::BTreeMap;
use std::path::Path;

use super::devices::last_words;
use super::image_files::{shared_libraries_under, Unlooked};
use super::probe::Probe;
use super::Expected;
use crate::check::{Check, Status};
use crate::container_engine::archive::first_file;
use crate::image::short_digest;
use crate::rccl::dynamic::{parse_dynamic, DynamicInfo};
use crate::rccl::stock::{judge_stock, StockCopy};
use crate::rccl::{inspect_library, sha256_hex, ArtifactFormat};

const NAME: &str = "rccl";
/// Where the image's stack finds RCCL (as the overlay Containerfile replaces it).
pub const RCCL_ROOTS: [&str; 2] = ["/opt/rocm/lib", "/opt/venv"];
/// torch built for ROCm, the vLLM image's stack: it loads RCCL for every collective, so an image
/// that has it and no RCCL cannot serve across nodes, and its verification fails.
const NEEDS_RCCL: &str = "libtorch_hip.so";

pub async fn checks(probe: &Probe<'_>, expected: &Expected) -> Vec<Check> {
    // Through the roots when they are links (TheRock's /opt/rocm points into the venv); each
    // file itself (the archive API copies a link as a link), each soname link's target among them.
    let libraries = match shared_libraries_under(probe, &RCCL_ROOTS).await {
        Ok(libraries) => libraries,
        // An image whose label records its RCCL must show it; another may lack the shell.
        Err(Unlooked::Missing(why)) if expected.rccl_label.is_none() => {
            return vec![Check::new(NAME, Status::Skipped, format!("cannot look for librccl: {why}"), None)]
        }
        Err(Unlooked::Missing(why) | Unlooked::Failed(why)) => {
            return vec![fail(format!("cannot look for librccl: {why}"))]
        }
    };
    let needed_by = libraries.iter().find(|path| file_name(path) == NEEDS_RCCL);
    let copies: Vec<String> = libraries.iter().filter(|path| is_rccl_copy(path)).cloned().collect();
    if copies.is_empty() {
        let nowhere = format!("no librccl.so* under {}", RCCL_ROOTS.join(" or "));
        return vec![match (needed_by, &expected.rccl_label) {
            (Some(torch), _) => Check::new(
                NAME,
                Status::Fail,
                format!("{nowhere}, and {torch} loads it for every collective: vLLM cannot serve across nodes"),
                Some("use an image that carries the gfx1151 RCCL (`strix-toolbox build --rccl FILE`)".into()),
            ),
            (None, Some(label)) => Check::new(
                NAME,
                Status::Fail,
                format!("{nowhere}, and the image label records RCCL {}", short_digest(label)),
                Some("rebuild the image with `strix-toolbox build --rccl FILE`".into()),
            ),
            (None, None) => {
                Check::new(NAME, Status::Skipped, format!("{nowhere}: the image carries no RCCL to check"), None)
            }
        }];
    }

    // Copy each out once per distinct library (copies are usually one file and its links).
    let mut by_digest: BTreeMap<String, (Vec<String>, Vec<u8>)> = BTreeMap::new();
    for path in &copies {
        let library = match probe.engine.container_archive(probe.container, path).await {
            Ok(Some(archive)) => match first_file(probe.engine.kind().program(), &archive) {
                Ok(Some(bytes)) => bytes,
                Ok(None) => return vec![fail(format!("{path}: the archive holds no file"))],
                Err(error) => return vec![fail(format!("{path}: {error}"))],
            },
            Ok(None) => return vec![fail(format!("{path} vanished while it was copied out"))],
            Err(error) => return vec![fail(format!("cannot copy {path} out: {error}"))],
        };
        let entry = by_digest.entry(sha256_hex(&library)).or_insert_with(|| (Vec::new(), library));
        entry.0.push(path.clone());
    }

    let mut checks = Vec::new();
    if by_digest.len() > 1 {
        let groups: Vec<String> = by_digest
            .iter()
            .map(|(digest, (paths, _))| format!("{} ({})", short_digest(digest), paths.join(", ")))
            .collect();
        checks.push(Check::new(
            format!("{NAME}:same"),
            Status::Fail,
            format!("the image's RCCL copies differ: {}; torch may load one that lacks gfx1151", groups.join(" vs ")),
            Some("rebuild the image with `strix-toolbox build --rccl FILE` (it replaces every copy)".into()),
        ));
    } else {
        checks.push(Check::new(
            format!("{NAME}:same"),
            Status::Pass,
            format!("{} copies, one library", copies.len()),
            None,
        ));
    }
    // Whose RCCL it is: the image's own (no label: nothing replaced it) or a custom build's.
    let whose = if expected.rccl_label.is_none() { ": the image's own RCCL, no custom build" } else { "" };
    let mut dynamic_views = Vec::new();
    for (digest, (paths, library)) in by_digest {
        let shown = &paths[0];
        let inspected = inspect_library(Path::new(shown), ArtifactFormat::So, None, library);
        if let Ok(report) = &inspected {
            dynamic_views.extend(report.dynamic.clone().map(|dynamic| (paths.join(", "), dynamic)));
        }
        checks.push(match inspected {
            Ok(report) if report.has_gfx1151 => Check::new(
                format!("{NAME}:gfx1151"),
                Status::Pass,
                format!("{shown} carries {} (sha256 {}){whose}", report.gfx_targets.join(", "), short_digest(&digest)),
                None,
            ),
            Ok(report) => Check::new(
                format!("{NAME}:gfx1151"),
                Status::Fail,
                format!(
                    "{} {} no gfx1151 code objects (targets: {}): RCCL kernels cannot run on this GPU",
                    paths.join(", "),
                    if paths.len() == 1 { "has" } else { "have" },
                    if report.gfx_targets.is_empty() { "none".into() } else { report.gfx_targets.join(", ") }
                ),
                Some("use an image built with the gfx1151 RCCL (`strix-toolbox build --rccl FILE`)".into()),
            ),
            Err(error) => Check::new(
                format!("{NAME}:gfx1151"),
                Status::Fail,
                format!("{shown}: {}", last_words(&error.to_string())),
                None,
            ),
        });
        if let Some(label) = &expected.rccl_label {
            checks.push(if *label == digest {
                Check::new(
                    format!("{NAME}:label"),
                    Status::Pass,
                    format!("{shown} is the RCCL the image label records"),
                    None,
                )
            } else {
                Check::new(
                    format!("{NAME}:label"),
                    Status::Fail,
                    format!(
                        "{shown} has sha256 {}, the image label records {}",
                        short_digest(&digest),
                        short_digest(label)
                    ),
                    Some("rebuild the image with `strix-toolbox build --rccl FILE`".into()),
                )
            });
        }
    }
    if let Some(torch) = needed_by {
        checks.push(exports_check(probe, torch, &dynamic_views, expected.rccl_label.is_some()).await);
    }
    checks
}

/// Every nccl*/rccl* symbol `torch` imports is exported by each RCCL (`rccls`, by their paths):
/// one missing is `undefined symbol` at `import torch` (a custom gfx1151 RCCL built from an older
/// RCCL than current nightlies' torch: kyuz0/amd-strix-halo-vllm-toolboxes#60). torch is read
/// whole through the archive API (its dynamic symbols are what the loader reads).
async fn exports_check(probe: &Probe<'_>, torch: &str, rccls: &[(String, DynamicInfo)], custom: bool) -> Check {
    let name = format!("{NAME}:exports");
    let bytes = match probe.engine.container_archive(probe.container, torch).await {
        Ok(Some(archive)) => match first_file(probe.engine.kind().program(), &archive) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Check::new(name, Status::Skipped, format!("{torch}: the archive holds no file"), None),
            Err(error) => return fail(format!("{torch}: {error}")),
        },
        Ok(None) => {
            return Check::new(name, Status::Skipped, format!("{torch} vanished while it was copied out"), None)
        }
        Err(error) => return fail(format!("cannot copy {torch} out: {error}")),
    };
    let imports = match parse_dynamic(&bytes) {
        Ok(info) => info,
        Err(why) => {
            return Check::new(
                name,
                Status::Skipped,
                format!("{torch} is no loadable library ({why}): what it imports from RCCL is unknown"),
                None,
            )
        }
    };
    let copies: Vec<StockCopy> =
        rccls.iter().map(|(path, dynamic)| StockCopy { path, dynamic, gfx_targets: None }).collect();
    let Some(judged) = judge_stock(&copies, &[(torch.to_string(), imports)]) else {
        return Check::new(name, Status::Skipped, "no RCCL copy could be read for its symbols", None);
    };
    let torch_name = file_name(torch);
    if judged.missing_for_consumers.is_empty() {
        return Check::new(
            name,
            Status::Pass,
            format!("RCCL exports every nccl*/rccl* symbol {torch_name} imports ({} exported)", judged.exports.len()),
            None,
        );
    }
    let missing: Vec<&str> = judged.missing_for_consumers.iter().map(|m| m.symbol.as_str()).collect();
    let fix = if custom {
        "the image's custom RCCL is older than its torch: refresh to the image as it comes (TheRock's stock RCCL \
         carries gfx1151, NET/IB and these symbols), or build from an RCCL at least as new (`strix-toolbox build \
         --rccl FILE`, which refuses one that exports less than the image's own)"
    } else {
        "use an image whose RCCL matches its torch (the image's newer tag, or `strix-toolbox build --rccl FILE` \
         from an RCCL at least as new as its torch)"
    };
    Check::new(
        name,
        Status::Fail,
        format!(
            "RCCL ({}) lacks {} that {torch_name} imports: `import torch` fails with `undefined symbol`",
            judged.copies.join("; "),
            missing.join(", ")
        ),
        Some(fix.into()),
    )
}

/// `librccl.so`, `librccl.so.1`, `librccl.so.1.0`: a copy of RCCL itself.
pub fn is_rccl_copy(path: &str) -> bool {
    file_name(path).starts_with("librccl.so")
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn fail(message: String) -> Check {
    Check::new(NAME, Status::Fail, message, None)
}
