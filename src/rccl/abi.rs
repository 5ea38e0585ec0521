//! Will a new librccl load where it goes? Against the image it replaces a library in: its SONAME
//! is librccl.so.1; it exports every nccl*/rccl* symbol the replaced copies export and the image's
//! consumers (every library under its RCCL roots that links to RCCL, libtorch_hip.so first) import — one missing symbol is
//! `undefined symbol` at `import torch`; and each of its DT_NEEDED libraries resolves in the image
//! as the dynamic loader would find it. Pure: the image's side comes in as data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::dynamic::DynamicInfo;
use super::stock::StockRccl;

pub const SONAME: &str = "librccl.so.1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingSymbol {
    pub symbol: String,
    /// Which of the image's libraries exports or imports it.
    pub needed_by: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbiReport {
    pub image: String,
    pub soname: Option<String>,
    /// The image's copies of librccl that the new library replaces.
    pub replaced: Vec<String>,
    /// The image's libraries whose imports were checked.
    pub consumers: Vec<String>,
    pub missing_symbols: Vec<MissingSymbol>,
    /// DT_NEEDED libraries the image cannot provide.
    pub unresolved_needed: Vec<String>,
    /// Copies or consumers in the image that are no readable library (nothing to compare with).
    pub unreadable: Vec<String>,
    pub ok: bool,
    pub problems: Vec<String>,
    /// What the image's own RCCL does already (None: the image carries none).
    #[serde(default)]
    pub stock: Option<StockRccl>,
}

/// The image's side: its copies of RCCL and their consumers with their dynamic views.
pub struct ImageSide {
    pub image: String,
    /// Files named like libraries that are not loadable ones (a broken copy is replaced anyway).
    pub unreadable: Vec<String>,
    pub replaced: Vec<(String, DynamicInfo)>,
    pub consumers: Vec<(String, DynamicInfo)>,
    /// The new library's DT_NEEDED entries the image has (found where the loader would look).
    pub resolvable: Vec<String>,
    /// The replaced copies judged on their own (see [`super::stock`]).
    pub stock: Option<StockRccl>,
}

/// An RCCL symbol by its name: what torch imports from RCCL.
pub fn is_rccl_symbol(symbol: &str) -> bool {
    symbol.starts_with("nccl") || symbol.starts_with("rccl") || symbol.starts_with("pnccl")
}

/// A consumer of RCCL: it needs librccl, or imports an nccl*/rccl* symbol (which another library
/// it needs may bring in).
pub fn links_to_rccl(library: &DynamicInfo) -> bool {
    library.needed.iter().any(|needed| needed.starts_with("librccl.so"))
        || library.imports.iter().any(|symbol| is_rccl_symbol(symbol))
}

pub fn check_abi(new: &DynamicInfo, image: &ImageSide) -> AbiReport {
    let mut problems = Vec::new();
    if new.soname.as_deref() != Some(SONAME) {
        problems.push(format!(
            "its SONAME is {}, not {SONAME}: torch and the image's libraries link against {SONAME} and would not \
             load it. Fix: link it with -Wl,-soname,{SONAME}",
            new.soname.as_deref().unwrap_or("(none)")
        ));
    }
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let wanted = image
        .replaced
        .iter()
        .flat_map(|(path, info)| info.exports.iter().map(move |s| (s, path)))
        .chain(image.consumers.iter().flat_map(|(path, info)| info.imports.iter().map(move |s| (s, path))));
    for (symbol, path) in wanted.filter(|(symbol, _)| is_rccl_symbol(symbol)) {
        if !new.exports.contains(symbol) {
            let needers = missing.entry(symbol.clone()).or_default();
            if !needers.contains(path) {
                needers.push(path.clone());
            }
        }
    }
    let missing_symbols: Vec<MissingSymbol> =
        missing.into_iter().map(|(symbol, needed_by)| MissingSymbol { symbol, needed_by }).collect();
    if !missing_symbols.is_empty() {
        let names: Vec<&str> = missing_symbols.iter().map(|m| m.symbol.as_str()).collect();
        // The image's own RCCL exports them: the new one is a step back from what it replaces.
        let stock_has = |symbol: &str| image.stock.as_ref().is_some_and(|stock| stock.exports.contains(symbol));
        let behind: Vec<&str> = names.iter().copied().filter(|name| stock_has(name)).collect();
        let use_stock = match &image.stock {
            Some(stock) if stock.suffices() => {
                " (the image's own RCCL carries gfx1151 and every symbol its libraries import: keep it, no build \
                 needed)"
            }
            _ => "",
        };
        if behind.is_empty() {
            problems.push(format!(
                "it lacks {} symbol(s) the image uses: {} (`undefined symbol` at import). Fix: build it from an \
                 RCCL at least as new as the one in {}",
                names.len(),
                names.join(", "),
                image.image
            ));
        } else {
            problems.push(format!(
                "it exports less than the RCCL {} carries: it lacks {} of its symbols ({}){}, and `import torch` \
                 fails with `undefined symbol`. Fix: build it from an RCCL at least as new as the image's{use_stock}",
                image.image,
                behind.len(),
                behind.join(", "),
                if names.len() > behind.len() {
                    format!("; {} symbol(s) the image uses in all", names.len())
                } else {
                    String::new()
                },
            ));
        }
    }
    let unresolved_needed: Vec<String> = new.needed.iter().filter(|n| !image.resolvable.contains(n)).cloned().collect();
    if !unresolved_needed.is_empty() {
        problems.push(format!(
            "it needs {} which {} does not have, so it cannot load there. Fix: build it against the ROCm the image \
             carries",
            unresolved_needed.join(", "),
            image.image
        ));
    }
    AbiReport {
        image: image.image.clone(),
        soname: new.soname.clone(),
        replaced: image.replaced.iter().map(|(p, _)| p.clone()).collect(),
        consumers: image.consumers.iter().map(|(p, _)| p.clone()).collect(),
        missing_symbols,
        unresolved_needed,
        unreadable: image.unreadable.clone(),
        ok: problems.is_empty(),
        problems,
        stock: image.stock.clone(),
    }
}

/// Where the loader looks for a DT_NEEDED of a library installed in `dir`: its RUNPATH (else its
/// RPATH), `$ORIGIN` being `dir`; then ld.so.conf's directories; then the default paths.
pub fn search_path(new: &DynamicInfo, dir: &str, ld_so_conf_dirs: &[String]) -> Vec<String> {
    let own = if new.runpath.is_empty() { &new.rpath } else { &new.runpath };
    let mut dirs: Vec<String> = own.iter().map(|p| p.replace("$ORIGIN", dir).replace("${ORIGIN}", dir)).collect();
    dirs.extend(ld_so_conf_dirs.iter().cloned());
    dirs.extend(["/lib", "/usr/lib", "/lib64", "/usr/lib64"].map(String::from));
    let mut seen = Vec::new();
    dirs.retain(|d| {
        !seen.contains(d) && {
            seen.push(d.clone());
            true
        }
    });
    dirs
}

/// The directories an ld.so.conf names (`include` lines are the caller's to follow).
pub fn ld_so_conf_dirs(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut dirs, mut includes) = (Vec::new(), Vec::new());
    for line in text.lines().map(|l| l.split('#').next().unwrap_or("").trim()).filter(|l| !l.is_empty()) {
        match line.strip_prefix("include") {
            Some(pattern) if pattern.starts_with(char::is_whitespace) => includes.push(pattern.trim().to_string()),
            _ => dirs.extend(line.split([':', ',', ' ', '\t']).filter(|d| d.starts_with('/')).map(str::to_string)),
        }
    }
    (dirs, includes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(soname: &str, exports: &[&str], imports: &[&str], needed: &[&str]) -> DynamicInfo {
        DynamicInfo {
            soname: Some(soname.into()),
            needed: needed.iter().map(|s| s.to_string()).collect(),
            exports: exports.iter().map(|s| s.to_string()).collect(),
            imports: imports.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn image(replaced: DynamicInfo, torch: DynamicInfo, resolvable: &[&str]) -> ImageSide {
        ImageSide {
            image: "vllm:latest".into(),
            unreadable: vec![],
            replaced: vec![("/opt/rocm/lib/librccl.so.1.0".into(), replaced)],
            consumers: vec![("/opt/venv/torch/lib/libtorch_hip.so".into(), torch)],
            resolvable: resolvable.iter().map(|s| s.to_string()).collect(),
            stock: None,
        }
    }

    #[test]
    fn a_superset_that_resolves_is_accepted() {
        let new = lib(SONAME, &["ncclAllReduce", "ncclCommInitRankScalable", "ncclExtra"], &[], &["libamdhip64.so.7"]);
        let old = lib(SONAME, &["ncclAllReduce"], &[], &[]);
        let torch = lib("libtorch_hip.so", &[], &["ncclCommInitRankScalable", "memcpy"], &[]);
        let report = check_abi(&new, &image(old, torch, &["libamdhip64.so.7"]));
        assert!(report.ok, "{report:?}");
    }

    #[test]
    fn a_missing_symbol_a_wrong_soname_and_an_absent_library_are_each_named() {
        let new = lib("librccl.so.2", &["ncclAllReduce"], &[], &["libamdhip64.so.7"]);
        let old = lib(SONAME, &["ncclAllReduce", "ncclCommWindowRegister"], &[], &[]);
        let torch = lib("libtorch_hip.so", &[], &["ncclCommInitRankScalable", "memcpy"], &[]);
        let report = check_abi(&new, &image(old, torch, &["libamdhip64.so.6"]));
        assert!(!report.ok);
        let missing: Vec<&str> = report.missing_symbols.iter().map(|m| m.symbol.as_str()).collect();
        assert_eq!(missing, ["ncclCommInitRankScalable", "ncclCommWindowRegister"]);
        assert_eq!(report.missing_symbols[0].needed_by, ["/opt/venv/torch/lib/libtorch_hip.so"]);
        assert_eq!(report.unresolved_needed, ["libamdhip64.so.7"]);
        assert!(report.problems.iter().any(|p| p.contains("SONAME is librccl.so.2")));
    }

    #[test]
    fn a_library_that_exports_less_than_the_stock_one_says_so_and_that_the_stock_one_suffices() {
        use crate::rccl::stock::{judge_stock, StockCopy};
        let new = lib(SONAME, &["ncclAllReduce"], &[], &[]);
        let old = lib(SONAME, &["ncclAllReduce", "ncclCommResume"], &[], &[]);
        let torch = lib("libtorch_hip.so", &[], &["ncclCommResume"], &[]);
        let mut side = image(old.clone(), torch.clone(), &[]);
        let targets = vec!["gfx1151".to_string()];
        let copies = [StockCopy { path: "/opt/rocm/lib/librccl.so.1.0", dynamic: &old, gfx_targets: Some(&targets) }];
        side.stock = judge_stock(&copies, &side.consumers);
        let report = check_abi(&new, &side);
        assert!(!report.ok);
        assert_eq!(
            report.problems,
            ["it exports less than the RCCL vllm:latest carries: it lacks 1 of its symbols (ncclCommResume), and \
              `import torch` fails with `undefined symbol`. Fix: build it from an RCCL at least as new as the \
              image's (the image's own RCCL carries gfx1151 and every symbol its libraries import: keep it, no \
              build needed)"]
        );
        assert!(report.stock.is_some_and(|stock| stock.suffices()));
    }

    #[test]
    fn the_search_path_is_the_loaders() {
        let mut new = lib(SONAME, &[], &[], &[]);
        new.runpath = vec!["$ORIGIN".into(), "/opt/rocm/lib/llvm/lib".into()];
        new.rpath = vec!["/ignored/when/runpath".into()];
        let dirs = search_path(&new, "/opt/rocm/lib", &["/usr/lib/x86_64-linux-gnu".into()]);
        assert_eq!(dirs[..3], ["/opt/rocm/lib", "/opt/rocm/lib/llvm/lib", "/usr/lib/x86_64-linux-gnu"]);
        assert!(dirs.ends_with(&["/lib".into(), "/usr/lib".into(), "/lib64".into(), "/usr/lib64".into()]));
        let (dirs, includes) =
            ld_so_conf_dirs("# comment\ninclude /etc/ld.so.conf.d/*.conf\n/opt/rocm/lib\n/usr/local/lib # x\n");
        assert_eq!(
            (dirs, includes),
            (vec!["/opt/rocm/lib".into(), "/usr/local/lib".into()], vec!["/etc/ld.so.conf.d/*.conf".into()])
        );
    }
}
