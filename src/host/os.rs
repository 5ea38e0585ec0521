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
    /// os-release `ID_LIKE`, the distributions this one derives from, e.g. ["ubuntu", "debian"].
    #[serde(default)]
    pub id_like: Vec<String>,
    /// os-release `VERSION_ID`, e.g. "43".
    pub version_id: Option<String>,
    /// os-release `PRETTY_NAME`, e.g. "Fedora Linux 43 (Workstation Edition)".
    pub name: Option<String>,
}

/// How a distribution sets kernel parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OsFamily {
    /// Fedora, RHEL and their kin: `grubby`.
    Fedora,
    /// Debian, Ubuntu and their kin: /etc/default/grub and `update-grub`.
    Debian,
    Other,
}

impl OsFacts {
    /// The family of `ID`, else of the first `ID_LIKE` entry that names one.
    pub fn family(&self) -> OsFamily {
        let of = |id: &str| match id {
            "fedora" | "rhel" | "centos" | "rocky" | "almalinux" => Some(OsFamily::Fedora),
            "debian" | "ubuntu" => Some(OsFamily::Debian),
            _ => None,
        };
        self.id.iter().chain(&self.id_like).find_map(|id| of(id)).unwrap_or(OsFamily::Other)
    }

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
        id_like: field("ID_LIKE").map(|ids| ids.split_whitespace().map(str::to_string).collect()).unwrap_or_default(),
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
    fn the_family_comes_from_id_then_id_like() {
        let os = |id: &str, like: &[&str]| OsFacts {
            id: Some(id.into()),
            id_like: like.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        assert_eq!(os("fedora", &[]).family(), OsFamily::Fedora);
        assert_eq!(os("debian", &[]).family(), OsFamily::Debian);
        assert_eq!(os("pop", &["ubuntu", "debian"]).family(), OsFamily::Debian);
        assert_eq!(os("nobara", &["fedora"]).family(), OsFamily::Fedora);
        assert_eq!(os("arch", &[]).family(), OsFamily::Other);
        assert_eq!(OsFacts::default().family(), OsFamily::Other);
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
