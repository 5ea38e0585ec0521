//! The image's own RCCL, judged before anyone replaces it: does it already carry gfx1151 code and
//! export every nccl*/rccl* symbol its consumers (torch's libtorch_hip.so) import? TheRock's stock
//! RCCL now carries gfx1151, NET/IB and the symbols current torch nightlies import, while a custom
//! gfx1151 build from an older RCCL broke `import torch` on them (`undefined symbol:
//! ncclCommResume`, kyuz0/amd-strix-halo-vllm-toolboxes#60): when the stock one suffices, a custom
//! one is not needed, and one that exports less is refused. Pure: the image's side comes in as data.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::abi::{is_rccl_symbol, MissingSymbol};
use super::dynamic::DynamicInfo;
use super::verdict::REQUIRED_TARGET;

/// One copy of the image's RCCL: where it is, its dynamic view, and the gfx targets of its code
/// objects (None: its code objects could not be read).
pub struct StockCopy<'a> {
    pub path: &'a str,
    pub dynamic: &'a DynamicInfo,
    pub gfx_targets: Option<&'a [String]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockRccl {
    /// The copies judged (each must suffice: the loader may find any of them first).
    pub copies: Vec<String>,
    /// The gfx targets every copy carries.
    pub gfx_targets: Vec<String>,
    pub has_gfx1151: bool,
    /// nccl*/rccl* symbols every copy exports.
    pub exports: BTreeSet<String>,
    /// The consumers whose imports were compared.
    pub consumers: Vec<String>,
    /// nccl*/rccl* symbols a consumer imports that a copy does not export.
    pub missing_for_consumers: Vec<MissingSymbol>,
}

impl StockRccl {
    /// The image needs no custom RCCL: its own carries gfx1151 and everything its consumers import.
    pub fn suffices(&self) -> bool {
        self.has_gfx1151 && self.missing_for_consumers.is_empty()
    }

    /// One sentence on what the image's own RCCL does, for reports and build's progress.
    pub fn summary(&self) -> String {
        let importers = if self.consumers.is_empty() {
            "no library in the image imports from it".to_string()
        } else {
            format!("checked against {}", self.consumers.iter().map(|c| file_name(c)).collect::<Vec<_>>().join(", "))
        };
        let gfx = if self.has_gfx1151 {
            "carries gfx1151 code".to_string()
        } else if self.gfx_targets.is_empty() {
            "carries no gfx1151 code (no readable code objects)".to_string()
        } else {
            format!("carries no gfx1151 code (targets: {})", self.gfx_targets.join(", "))
        };
        let symbols = if self.missing_for_consumers.is_empty() {
            "exports every nccl*/rccl* symbol its libraries import".to_string()
        } else {
            let names: Vec<&str> = self.missing_for_consumers.iter().map(|m| m.symbol.as_str()).collect();
            format!("lacks {} that its libraries import", names.join(", "))
        };
        let verdict = if self.suffices() { ": a custom RCCL is not needed" } else { "" };
        format!("the image's own RCCL {gfx} and {symbols} ({importers}){verdict}")
    }
}

/// Judge `copies` against what `consumers` import. None when the image has no copy.
pub fn judge_stock(copies: &[StockCopy<'_>], consumers: &[(String, DynamicInfo)]) -> Option<StockRccl> {
    let (first, rest) = copies.split_first()?;
    let rccl_exports = |info: &DynamicInfo| -> BTreeSet<String> {
        info.exports.iter().filter(|symbol| is_rccl_symbol(symbol)).cloned().collect()
    };
    let exports = rest.iter().fold(rccl_exports(first.dynamic), |all, copy| {
        all.intersection(&rccl_exports(copy.dynamic)).cloned().collect()
    });
    let targets_of =
        |copy: &StockCopy<'_>| -> BTreeSet<String> { copy.gfx_targets.unwrap_or_default().iter().cloned().collect() };
    let gfx_targets: BTreeSet<String> =
        rest.iter().fold(targets_of(first), |all, copy| all.intersection(&targets_of(copy)).cloned().collect());
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, info) in consumers {
        for symbol in info.imports.iter().filter(|symbol| is_rccl_symbol(symbol) && !exports.contains(*symbol)) {
            let needers = missing.entry(symbol.clone()).or_default();
            if !needers.contains(path) {
                needers.push(path.clone());
            }
        }
    }
    Some(StockRccl {
        copies: copies.iter().map(|copy| copy.path.to_string()).collect(),
        has_gfx1151: gfx_targets.contains(REQUIRED_TARGET),
        gfx_targets: gfx_targets.into_iter().collect(),
        exports,
        consumers: consumers.iter().map(|(path, _)| path.clone()).collect(),
        missing_for_consumers: missing
            .into_iter()
            .map(|(symbol, needed_by)| MissingSymbol { symbol, needed_by })
            .collect(),
    })
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(exports: &[&str], imports: &[&str]) -> DynamicInfo {
        DynamicInfo {
            exports: exports.iter().map(|s| s.to_string()).collect(),
            imports: imports.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    const TORCH: &str = "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_hip.so";

    #[test]
    fn therocks_stock_rccl_with_gfx1151_and_every_import_suffices() {
        let stock = lib(&["ncclAllReduce", "ncclCommResume", "ncclCommSuspend"], &["hipMalloc"]);
        let targets = vec!["gfx1100".to_string(), "gfx1151".to_string()];
        let copies = [StockCopy { path: "/opt/rocm/lib/librccl.so.1", dynamic: &stock, gfx_targets: Some(&targets) }];
        let torch = vec![(TORCH.to_string(), lib(&[], &["ncclCommResume", "ncclAllReduce", "memcpy"]))];
        let judged = judge_stock(&copies, &torch).unwrap();
        assert!(judged.suffices(), "{judged:?}");
        assert_eq!(judged.exports.len(), 3);
        assert_eq!(
            judged.summary(),
            "the image's own RCCL carries gfx1151 code and exports every nccl*/rccl* symbol its libraries import \
             (checked against libtorch_hip.so): a custom RCCL is not needed"
        );
    }

    #[test]
    fn a_copy_without_gfx1151_or_an_import_makes_it_fall_short() {
        let stock = lib(&["ncclAllReduce"], &[]);
        let gfx1100 = vec!["gfx1100".to_string()];
        let gfx1151 = vec!["gfx1151".to_string()];
        let copies = [
            StockCopy { path: "/opt/rocm/lib/librccl.so.1", dynamic: &stock, gfx_targets: Some(&gfx1151) },
            StockCopy { path: "/opt/venv/torch/lib/librccl.so.1", dynamic: &stock, gfx_targets: Some(&gfx1100) },
        ];
        let torch = vec![(TORCH.to_string(), lib(&[], &["ncclCommResume", "ncclAllReduce"]))];
        let judged = judge_stock(&copies, &torch).unwrap();
        assert!(!judged.has_gfx1151 && !judged.suffices());
        assert_eq!(judged.missing_for_consumers[0].symbol, "ncclCommResume");
        assert_eq!(judged.missing_for_consumers[0].needed_by, [TORCH]);
        let said = judged.summary();
        assert!(said.contains("no gfx1151 code") && said.contains("lacks ncclCommResume"), "{said}");
        let unreadable = [StockCopy { path: "/opt/rocm/lib/librccl.so.1", dynamic: &stock, gfx_targets: None }];
        assert!(!judge_stock(&unreadable, &[]).unwrap().has_gfx1151);
        assert_eq!(judge_stock(&[], &torch), None);
    }
}
