//! Kernel parameters from /proc/cmdline that the cluster guide requires.

use std::collections::BTreeMap;

/// The parameters the guide sets, with the value it wants (None: any value, the size is the user's).
pub const REQUIRED_PARAMS: [(&str, Option<&str>); 5] = [
    ("iommu", Some("pt")),
    ("pci", Some("realloc")),
    ("pcie_aspm", Some("off")),
    ("amdgpu.gttsize", None),
    ("ttm.pages_limit", None),
];

/// The required parameters present on the command line, name → value ("" for a bare flag).
/// The last occurrence wins, as in the kernel.
pub fn parse_required(cmdline: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for word in cmdline.split_whitespace() {
        let (name, value) = word.split_once('=').unwrap_or((word, ""));
        if REQUIRED_PARAMS.iter().any(|(required, _)| *required == name) {
            found.insert(name.to_string(), value.to_string());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_required() {
        let params = parse_required("BOOT_IMAGE=/vmlinuz ro iommu=pt amdgpu.gttsize=126976 quiet iommu=pt");
        assert_eq!(params.len(), 2);
        assert_eq!(params["iommu"], "pt");
        assert_eq!(params["amdgpu.gttsize"], "126976");
    }
}
