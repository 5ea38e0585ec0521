//! The kernel release and the distribution: what `doctor` sets beside the versions the cluster
//! guide was verified on.

use serde::{Deserialize, Serialize};

use super::HostRoot;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsFacts {
    /// /proc/sys/kernel/osrelease, e.g. "6.18.5-200.fc43.x86_64".
    pub kernel: Option<String>,
    /// os-release `ID`, e.g. "fedora".
    pub id: Option<String>,
    /// os-release `VERSION_ID`, e.g. "43".
    pub version_id: Option<String>,
    /// os-release `PRETTY_NAME`, e.g. "Fedora Linux 43 (Workstation Edition)".
    pub name: Option<String>,
}

impl OsFacts {
    /// "6.18.5" of "6.18.5-200.fc43.x86_64".
    pub fn kernel_version(&self) -> Option<&str> {
        self.kernel.as_deref().map(|release| release.split(['-', '+']).next().unwrap_or(release))
    }
}

pub fn read(root: &HostRoot) -> OsFacts {
    // os-release(5): /etc/os-release, else /usr/lib/os-release.
    let release = ["/etc/os-release", "/usr/lib/os-release"].iter().find_map(|path| root.read(path).ok().flatten());
    let field = |key: &str| release.as_deref().and_then(|text| os_release_field(text, key));
    OsFacts {
        kernel: root.attribute("/proc/sys/kernel/osrelease").filter(|k| !k.is_empty()),
        id: field("ID"),
        version_id: field("VERSION_ID"),
        name: field("PRETTY_NAME").or_else(|| field("NAME")),
    }
}

/// `KEY=value`, `KEY="value"` or `KEY='value'`.
fn os_release_field(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let value = line.trim().strip_prefix(key)?.strip_prefix('=')?;
        let unquoted = value.trim_matches(|c| c == '"' || c == '\'');
        (!unquoted.is_empty()).then(|| unquoted.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_os_release() {
        let text =
            "NAME=\"Fedora Linux\"\nVERSION_ID=43\nID=fedora\nPRETTY_NAME=\"Fedora Linux 43 (Workstation Edition)\"\n\
                    VARIANT_ID=workstation\n";
        assert_eq!(os_release_field(text, "ID").as_deref(), Some("fedora"));
        assert_eq!(os_release_field(text, "VERSION_ID").as_deref(), Some("43"));
        assert_eq!(os_release_field(text, "PRETTY_NAME").as_deref(), Some("Fedora Linux 43 (Workstation Edition)"));
        assert_eq!(os_release_field(text, "VERSION"), None, "VERSION_ID is not VERSION");
    }

    #[test]
    fn kernel_version_without_the_build() {
        let os = |kernel: &str| OsFacts { kernel: Some(kernel.into()), ..Default::default() };
        assert_eq!(os("6.18.5-200.fc43.x86_64").kernel_version(), Some("6.18.5"));
        assert_eq!(os("6.1.0-18-amd64").kernel_version(), Some("6.1.0"));
        assert_eq!(os("6.18.6+rpt").kernel_version(), Some("6.18.6"));
        assert_eq!(OsFacts::default().kernel_version(), None);
    }
}
