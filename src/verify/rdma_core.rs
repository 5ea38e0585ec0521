//! On an RDMA node, the image's rdma-core is new enough for the E810: kyuz0's E810 notes found
//! that rdma-core older than v62 (Ubuntu 24.04 carries 50) gives RCCL "Unknown completion" errors
//! through the irdma provider, however well the host is set up.
//!
//! The version is read from libibverbs' file name, which rdma-core builds as
//! `libibverbs.so.1.<ABI>.<PACKAGE_VERSION>` (rdma-core's buildlib/rdma_functions.cmake and
//! libibverbs/CMakeLists.txt: `libibverbs.so.1.14.50.0` is rdma-core 50.0). The library is what
//! RCCL loads and its providers come with it, whatever package manager (or none) put it there,
//! and finding it needs only the image's shell.

use super::image_files::{matching, Unlooked};
use super::probe::Probe;
use super::Expected;
use crate::check::{Check, Status};

const NAME: &str = "rdma-core";
/// The first rdma-core whose irdma provider RCCL runs over without "Unknown completion" errors.
pub const OLDEST_GOOD: u32 = 62;
/// Where distributions put libibverbs (Fedora's lib64, Debian's and Ubuntu's multiarch
/// directory, a build's /usr/local).
const LIBIBVERBS: [&str; 7] = [
    "/usr/lib64/libibverbs.so.1.*",
    "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.*",
    "/usr/lib/libibverbs.so.1.*",
    "/lib64/libibverbs.so.1.*",
    "/lib/x86_64-linux-gnu/libibverbs.so.1.*",
    "/usr/local/lib/libibverbs.so.1.*",
    "/usr/local/lib64/libibverbs.so.1.*",
];
const FIX: &str = "use an image with rdma-core 62 or newer (Fedora 43's, or linux-rdma/rdma-core v62 built into \
                   the image): `strix-toolbox refresh --image IMAGE`";

/// An rdma-core release, as its libibverbs names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RdmaCoreVersion {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for RdmaCoreVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The rdma-core release a libibverbs file name carries (`libibverbs.so.1.14.50.0`: 50.0); None
/// for another name (`libibverbs.so.1`, a link's).
pub fn version_of(file_name: &str) -> Option<RdmaCoreVersion> {
    let rest = file_name.strip_prefix("libibverbs.so.1.")?;
    let parts: Vec<u32> = rest.split('.').map(|part| part.parse().ok()).collect::<Option<_>>()?;
    match parts.as_slice() {
        [_abi, major, minor] => Some(RdmaCoreVersion { major: *major, minor: *minor }),
        _ => None,
    }
}

pub async fn checks(probe: &Probe<'_>, expected: &Expected) -> Vec<Check> {
    if !expected.rdma {
        return Vec::new();
    }
    let patterns: Vec<String> = LIBIBVERBS.iter().map(|pattern| pattern.to_string()).collect();
    vec![match matching(probe, &patterns).await {
        Ok(found) => judge(&found),
        Err(Unlooked::Missing(why)) => {
            Check::new(NAME, Status::Skipped, format!("cannot look for libibverbs: {why}"), None)
        }
        Err(Unlooked::Failed(why)) => {
            Check::new(NAME, Status::Fail, format!("cannot look for libibverbs: {why}"), None)
        }
    }]
}

/// The check for the libibverbs files `found` inside: the oldest release decides (any copy may be
/// the one the loader finds first).
fn judge(found: &[String]) -> Check {
    let mut versions: Vec<(RdmaCoreVersion, &str)> = found
        .iter()
        .filter_map(|path| version_of(path.rsplit('/').next().unwrap_or(path)).map(|version| (version, path.as_str())))
        .collect();
    versions.sort();
    let Some((oldest, path)) = versions.first() else {
        return Check::new(
            NAME,
            Status::Warn,
            "no libibverbs in the image: nothing in it can use RDMA (RCCL falls back to sockets, llama.cpp's RPC \
             to TCP)",
            Some(FIX.into()),
        );
    };
    if oldest.major < OLDEST_GOOD {
        return Check::new(
            NAME,
            Status::Fail,
            format!(
                "rdma-core {oldest} ({path}) is older than {OLDEST_GOOD}: RCCL over the E810's irdma provider fails \
                 with \"Unknown completion\" errors"
            ),
            Some(FIX.into()),
        );
    }
    Check::new(NAME, Status::Pass, format!("rdma-core {oldest} ({path})"), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_release_from_libibverbs_file_name() {
        assert_eq!(version_of("libibverbs.so.1.14.50.0"), Some(RdmaCoreVersion { major: 50, minor: 0 }));
        assert_eq!(version_of("libibverbs.so.1.15.62.1"), Some(RdmaCoreVersion { major: 62, minor: 1 }));
        for other in ["libibverbs.so.1", "libibverbs.so", "libibverbs.so.1.14.50", "libibverbs.so.1.x.50.0", ""] {
            assert_eq!(version_of(other), None, "{other}");
        }
        assert_eq!(version_of("libibverbs.so.1.14.99999999999.0"), None, "too big to be a release");
    }

    #[test]
    fn below_62_fails_with_the_fix_and_the_oldest_copy_decides() {
        let old = judge(&["/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0".to_string()]);
        assert_eq!(old.status, Status::Fail);
        assert!(old.message.starts_with("rdma-core 50.0 (/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0)"));
        assert!(old.fix.as_deref().is_some_and(|fix| fix.contains("rdma-core 62 or newer")));

        let good = judge(&["/usr/lib64/libibverbs.so.1.15.62.0".to_string()]);
        assert_eq!(
            (good.status, good.message.as_str()),
            (Status::Pass, "rdma-core 62.0 (/usr/lib64/libibverbs.so.1.15.62.0)")
        );

        let mixed =
            judge(&["/usr/lib64/libibverbs.so.1.15.62.0".into(), "/usr/local/lib/libibverbs.so.1.14.57.0".into()]);
        assert_eq!(mixed.status, Status::Fail);
        assert!(mixed.message.contains("57.0 (/usr/local/lib/"), "{}", mixed.message);

        let none = judge(&["/usr/lib64/libibverbs.so.1".to_string()]);
        assert_eq!(none.status, Status::Warn);
    }
}
