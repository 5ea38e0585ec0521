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

/// The value of the last `GRUB_CMDLINE_LINUX=` line of /etc/default/grub, unquoted (Debian and
/// Ubuntu put kernel parameters there).
pub fn grub_cmdline_linux(default_grub: &str) -> Option<String> {
    default_grub
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix("GRUB_CMDLINE_LINUX="))
        .map(|value| value.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
}

/// `current` (a command line) with each `name=value` of `wanted` in place of that parameter's
/// old value, or added at the end.
pub fn with_params(current: &str, wanted: &[(String, String)]) -> String {
    let mut words: Vec<String> = current.split_whitespace().map(str::to_string).collect();
    for (name, value) in wanted {
        let word = format!("{name}={value}");
        match words.iter().position(|w| w.split_once('=').map_or(w.as_str(), |(n, _)| n) == name) {
            Some(index) => words[index] = word,
            None => words.push(word),
        }
    }
    words.join(" ")
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

    #[test]
    fn reads_grub_cmdline_linux_and_changes_it() {
        let grub = "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n# GRUB_CMDLINE_LINUX=\"x\"\n\
                    GRUB_CMDLINE_LINUX=\"iommu=on amdgpu.gttsize=126976\"\n";
        let current = grub_cmdline_linux(grub).unwrap();
        assert_eq!(current, "iommu=on amdgpu.gttsize=126976");
        assert_eq!(grub_cmdline_linux("GRUB_CMDLINE_LINUX=''\n").as_deref(), Some(""));
        assert_eq!(grub_cmdline_linux("GRUB_TIMEOUT=5\n"), None);
        let wanted = [("iommu".to_string(), "pt".to_string()), ("pci".to_string(), "realloc".to_string())];
        assert_eq!(with_params(&current, &wanted), "iommu=pt amdgpu.gttsize=126976 pci=realloc");
        assert_eq!(with_params("", &wanted), "iommu=pt pci=realloc");
    }
}
