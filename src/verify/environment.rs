//! The NCCL/Gloo environment the spec chose (which netdev, which GID index, which HCA) is what the
//! processes inside see.

use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};

const NAME: &str = "environment";

pub async fn check(probe: &Probe<'_>, expected: &Expected) -> Check {
    if expected.nccl_env.is_empty() {
        return Check::new(NAME, Status::Info, "the spec sets no NCCL/Gloo variables on this node", None);
    }
    let env = match probe.run(&["env"]).await {
        Ran::Exited(0, stdout, _) => stdout,
        Ran::Exited(_, _, stderr) => {
            return Check::new(NAME, Status::Fail, format!("`env` failed inside: {stderr}"), None)
        }
        Ran::Missing(why) => return Check::new(NAME, Status::Skipped, why, None),
        Ran::Broken(why) => return Check::new(NAME, Status::Fail, why, None),
    };
    let wrong: Vec<String> = expected
        .nccl_env
        .iter()
        .filter(|(key, value)| !env.lines().any(|line| line.split_once('=') == Some((key.as_str(), value.as_str()))))
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    if wrong.is_empty() {
        let set: Vec<&str> = expected.nccl_env.iter().map(|(k, _)| k.as_str()).collect();
        Check::new(NAME, Status::Pass, format!("{} set inside", set.join(", ")), None)
    } else {
        Check::new(
            NAME,
            Status::Fail,
            format!("not set inside as the spec asks: {}", wrong.join(" ")),
            Some("recreate the toolbox (`strix-toolbox refresh --force`)".into()),
        )
    }
}
