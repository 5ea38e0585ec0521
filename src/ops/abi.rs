//! The image's side of the ABI check (see [`crate::rccl::abi`]): a throwaway container of the
//! image, the copies of librccl it carries and the libraries beside them that link to it, its
//! ld.so.conf, and which of the new library's DT_NEEDED entries exist where the loader looks.
//! The container is always removed.

use std::collections::BTreeSet;

use crate::engine::archive::first_file;
use crate::engine::{CreateRequest, Engine};
use crate::error::{Error, Result};
use crate::rccl::abi::{check_abi, ld_so_conf_dirs, search_path, AbiReport, ImageSide};
use crate::rccl::dynamic::{parse_dynamic, DynamicInfo};
use crate::verify::probe::{Probe, Ran};

/// Where the image's stack keeps RCCL, and where `build` puts the new one.
const RCCL_DIRS: [&str; 2] = ["/opt/rocm/lib", "/opt/venv"];
const INSTALL_DIR: &str = "/opt/rocm/lib";

/// Check `new` against `image` (present locally).
pub async fn abi_against(engine: &dyn Engine, image: &str, new: &DynamicInfo) -> Result<AbiReport> {
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

async fn image_side(engine: &dyn Engine, container: &str, image: &str, new: &DynamicInfo) -> Result<ImageSide> {
    let probe = Probe::new(engine, container, None);
    let mut find = vec!["find", "-H"];
    find.extend(RCCL_DIRS);
    find.extend(["-name", "librccl.so*", "-type", "f"]);
    let copies = lines(&probe, &find).await?;

    // The libraries beside each copy that name librccl (DT_NEEDED holds the string).
    let dirs: BTreeSet<String> = copies.iter().filter_map(|c| c.rsplit_once('/').map(|(d, _)| d.to_string())).collect();
    let mut consumers = Vec::new();
    for dir in &dirs {
        let libraries = lines(&probe, &["find", "-H", dir, "-maxdepth", "1", "-name", "*.so*", "-type", "f"]).await?;
        if libraries.is_empty() {
            continue;
        }
        let mut grep = vec!["grep", "-l", "-s", "librccl.so"];
        grep.extend(libraries.iter().map(String::as_str));
        for path in lines(&probe, &grep).await? {
            if !copies.contains(&path) && !consumers.contains(&path) {
                consumers.push(path);
            }
        }
    }

    let mut unreadable = Vec::new();
    let replaced = read_libraries(engine, container, &copies, &mut unreadable).await?;
    let consumers = read_libraries(engine, container, &consumers, &mut unreadable).await?;

    // ld.so.conf and what it includes, then every DT_NEEDED looked for in the loader's order.
    let mut conf_dirs = Vec::new();
    let mut pending = vec!["/etc/ld.so.conf".to_string()];
    let mut seen = BTreeSet::new();
    while let Some(file) = pending.pop() {
        if !seen.insert(file.clone()) || seen.len() > 64 {
            continue;
        }
        let text = lines(&probe, &["cat", &file]).await.unwrap_or_default().join("\n");
        let (dirs, includes) = ld_so_conf_dirs(&text);
        conf_dirs.extend(dirs);
        for include in includes {
            let (dir, pattern) = include.rsplit_once('/').unwrap_or(("/etc", &include));
            let found = lines(&probe, &["find", dir, "-maxdepth", "1", "-name", pattern]).await.unwrap_or_default();
            pending.extend(found);
        }
    }
    let mut resolvable = Vec::new();
    if !new.needed.is_empty() {
        let mut find = vec!["find", "-H"];
        let search = search_path(new, INSTALL_DIR, &conf_dirs);
        find.extend(search.iter().map(String::as_str));
        find.extend(["-maxdepth", "1", "("]);
        for (index, needed) in new.needed.iter().enumerate() {
            if index > 0 {
                find.push("-o");
            }
            find.extend(["-name", needed.as_str()]);
        }
        find.push(")");
        for path in lines(&probe, &find).await? {
            if let Some((_, file)) = path.rsplit_once('/') {
                resolvable.push(file.to_string());
            }
        }
    }
    Ok(ImageSide { image: image.to_string(), unreadable, replaced, consumers, resolvable })
}

/// What a program printed, a line each; exit status 1 (find: a directory absent; grep: no match)
/// still counts. A program the image lacks is an error naming it.
async fn lines(probe: &Probe<'_>, argv: &[&str]) -> Result<Vec<String>> {
    match probe.run(argv).await {
        Ran::Exited(0 | 1, stdout, _) => Ok(stdout.lines().filter(|l| !l.is_empty()).map(str::to_string).collect()),
        Ran::Exited(code, _, stderr) => Err(Error::Command {
            program: argv.join(" "),
            message: format!("exit {code} inside the image: {}", stderr.trim()),
            fix: None,
        }),
        Ran::Missing(why) => Err(Error::Command {
            program: argv.join(" "),
            message: format!("cannot look inside the image: {why}"),
            fix: Some(format!("the ABI check needs {} in the image; check against an image that has it", argv[0])),
        }),
        Ran::Broken(why) => Err(Error::engine(probe.engine.kind().program(), "look inside the image", why)),
    }
}

/// Each path's dynamic view; a file that is no loadable library goes to `unreadable`.
async fn read_libraries(
    engine: &dyn Engine,
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
