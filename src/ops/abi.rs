//! The image's side of the ABI check (see [`crate::rccl::abi`]): a throwaway container of the
//! image, the copies of librccl it carries and every library under its RCCL roots that links to
//! RCCL (torch's `libtorch_hip.so` sits in `site-packages/torch/lib`, apart from every copy), its
//! ld.so.conf, and which of the new library's DT_NEEDED entries exist where the loader looks.
//! Inside it needs only a shell (`sh`); `grep`, where the image has it, spares reading libraries
//! that never mention RCCL. Files are read through the engine's archive API. The container is
//! always removed.

use std::collections::BTreeSet;
use std::path::Path;

use crate::container_engine::archive::first_file;
use crate::container_engine::{ContainerEngine, CreateRequest};
use crate::error::{Error, Result};
use crate::rccl::abi::{check_abi, ld_so_conf_dirs, links_to_rccl, search_path, AbiReport, ImageSide};
use crate::rccl::dynamic::{parse_dynamic, DynamicInfo};
use crate::rccl::stock::{judge_stock, StockCopy};
use crate::rccl::{inspect_library, ArtifactFormat};
use crate::verify::image_files::{existing, matching, mentioning, shared_libraries_under, Unlooked};
use crate::verify::probe::Probe;
use crate::verify::rccl::{is_rccl_copy, RCCL_ROOTS};

/// Where `build` puts the new library.
const INSTALL_DIR: &str = "/opt/rocm/lib";
/// What a library that links to RCCL holds somewhere in its bytes: `librccl.so` among its
/// DT_NEEDED, or `nccl…`/`rccl…` symbol names.
const RCCL_MENTIONS: [&str; 2] = ["nccl", "rccl"];

/// Check `new` against `image` (present locally).
pub async fn abi_against(engine: &dyn ContainerEngine, image: &str, new: &DynamicInfo) -> Result<AbiReport> {
    let name = format!("strix-abi-{}-{}", std::process::id(), chrono::Utc::now().timestamp_millis());
    let request = CreateRequest {
        name: name.clone(),
        image: image.to_string(),
        command: vec!["sleep".into(), "infinity".into()],
        ..Default::default()
    };
    engine.container_create(&request).await?;
    let result = async {
        engine
            .container_start(&name)
            .await
            .map_err(|e| e.context(format!("cannot look inside {image} (its container does not start)")))?;
        image_side(engine, &name, image, new).await
    }
    .await;
    let removed = engine.container_remove(&name, true).await;
    let side = result?;
    removed?;
    Ok(check_abi(new, &side))
}

async fn image_side(
    engine: &dyn ContainerEngine,
    container: &str,
    image: &str,
    new: &DynamicInfo,
) -> Result<ImageSide> {
    let probe = Probe::new(engine, container, None);
    let libraries =
        inside(shared_libraries_under(&probe, &RCCL_ROOTS).await, "list the libraries under its RCCL roots")?;
    let (copies, others): (Vec<String>, Vec<String>) = libraries.into_iter().partition(|path| is_rccl_copy(path));

    // Every other library there that needs librccl or imports its symbols. grep narrows the ones
    // worth reading; without grep every one is read (slower, same answer).
    let (candidates, narrowed) = match mentioning(&probe, &others, &RCCL_MENTIONS).await {
        Ok(mentioning_rccl) => (mentioning_rccl, true),
        Err(Unlooked::Missing(_)) => (others, false),
        Err(Unlooked::Failed(why)) => return Err(look_failed("grep its libraries for RCCL", &why)),
    };
    let mut unreadable = Vec::new();
    let replaced = read_copies(engine, container, &copies, &mut unreadable).await?;
    // A library grep did not point at that is no ELF (a linker script named .so) is nobody's concern.
    let mut not_libraries = Vec::new();
    let candidates =
        read_libraries(engine, container, &candidates, if narrowed { &mut unreadable } else { &mut not_libraries })
            .await?;
    let consumers: Vec<(String, DynamicInfo)> =
        candidates.into_iter().filter(|(_, info)| links_to_rccl(info)).collect();
    let stock_copies: Vec<StockCopy> = replaced
        .iter()
        .map(|(path, dynamic, targets)| StockCopy { path, dynamic, gfx_targets: targets.as_deref() })
        .collect();
    let stock = judge_stock(&stock_copies, &consumers);
    let replaced = replaced.into_iter().map(|(path, dynamic, _)| (path, dynamic)).collect();

    // ld.so.conf and what it includes, then every DT_NEEDED looked for in the loader's order.
    let mut conf_dirs = Vec::new();
    let mut pending = vec!["/etc/ld.so.conf".to_string()];
    let mut seen = BTreeSet::new();
    while let Some(file) = pending.pop() {
        if !seen.insert(file.clone()) || seen.len() > 64 {
            continue;
        }
        let text = read_text(engine, container, &file).await?.unwrap_or_default();
        let (dirs, includes) = ld_so_conf_dirs(&text);
        conf_dirs.extend(dirs);
        // Relative patterns are relative to the including file's directory, as glibc reads them.
        let base = file.rsplit_once('/').map_or("/etc", |(dir, _)| dir).to_string();
        let patterns: Vec<String> = includes
            .into_iter()
            .map(|pattern| if pattern.starts_with('/') { pattern } else { format!("{base}/{pattern}") })
            .collect();
        pending.extend(inside(matching(&probe, &patterns).await, "expand ld.so.conf's includes")?);
    }
    let search = search_path(new, INSTALL_DIR, &conf_dirs);
    let wanted: Vec<String> =
        search.iter().flat_map(|dir| new.needed.iter().map(move |needed| format!("{dir}/{needed}"))).collect();
    let resolvable = inside(existing(&probe, &wanted).await, "look for the libraries it needs")?
        .iter()
        .filter_map(|path| path.rsplit_once('/').map(|(_, file)| file.to_string()))
        .collect();
    Ok(ImageSide { image: image.to_string(), unreadable, replaced, consumers, resolvable, stock })
}

/// What a look inside found; an image without a shell is an error naming what the check needs.
fn inside(looked: std::result::Result<Vec<String>, Unlooked>, what: &str) -> Result<Vec<String>> {
    looked.map_err(|unlooked| match unlooked {
        Unlooked::Missing(why) => Error::Command {
            program: "sh".into(),
            message: format!("cannot {what} inside the image: {why}"),
            fix: Some(
                "the ABI check needs a POSIX shell (`sh`) in the image, nothing else (grep makes it faster); check \
                 against an image that has one"
                    .into(),
            ),
        },
        Unlooked::Failed(why) => look_failed(what, &why),
    })
}

fn look_failed(what: &str, why: &str) -> Error {
    Error::Command { program: "sh".into(), message: format!("cannot {what} inside the image: {why}"), fix: None }
}

/// A text file's contents, through the archive API (no `cat` needed); None when absent.
async fn read_text(engine: &dyn ContainerEngine, container: &str, path: &str) -> Result<Option<String>> {
    let Some(archive) = engine.container_archive(container, path).await? else { return Ok(None) };
    Ok(first_file(engine.kind().program(), &archive)?.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
}

/// Each copy of RCCL's dynamic view and gfx targets (None: its code objects could not be read);
/// a file that is no loadable library goes to `unreadable`.
async fn read_copies(
    engine: &dyn ContainerEngine,
    container: &str,
    paths: &[String],
    unreadable: &mut Vec<String>,
) -> Result<Vec<(String, DynamicInfo, Option<Vec<String>>)>> {
    let mut copies = Vec::new();
    for path in paths {
        let bytes = match engine.container_archive(container, path).await? {
            Some(archive) => first_file(engine.kind().program(), &archive)?.unwrap_or_default(),
            None => continue,
        };
        let dynamic = parse_dynamic(&bytes);
        let targets = inspect_library(Path::new(path), ArtifactFormat::So, None, bytes).ok().map(|r| r.gfx_targets);
        match dynamic {
            Ok(info) => copies.push((path.clone(), info, targets)),
            Err(_) => unreadable.push(path.clone()),
        }
    }
    Ok(copies)
}

/// Each path's dynamic view; a file that is no loadable library goes to `unreadable`.
async fn read_libraries(
    engine: &dyn ContainerEngine,
    container: &str,
    paths: &[String],
    unreadable: &mut Vec<String>,
) -> Result<Vec<(String, DynamicInfo)>> {
    let mut libraries = Vec::new();
    for path in paths {
        let bytes = match engine.container_archive(container, path).await? {
            Some(archive) => first_file(engine.kind().program(), &archive)?.unwrap_or_default(),
            None => continue,
        };
        match parse_dynamic(&bytes) {
            Ok(info) => libraries.push((path.clone(), info)),
            Err(_) => unreadable.push(path.clone()),
        }
    }
    Ok(libraries)
}
