//! Every device of the spec is there inside and opens read-write: a node the device cgroup does
//! not allow, or one a group does not open, fails at open(2). One `dd` per node opens it for
//! reading and then for writing (`if=` first, so a missing node is never created by `of=`), and
//! count=0 reads and writes nothing. The nodes are checked at the same time.

use futures_util::future::join_all;

use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};

pub async fn checks(probe: &Probe<'_>, expected: &Expected) -> Vec<Check> {
    join_all(expected.devices.iter().map(|device| check(probe, device))).await
}

async fn check(probe: &Probe<'_>, device: &str) -> Check {
    let name = format!("device:{device}");
    let (read, write) = (format!("if={device}"), format!("of={device}"));
    match probe.run(&["dd", &read, &write, "count=0", "conv=notrunc"]).await {
        Ran::Exited(0, ..) => Check::new(name, Status::Pass, format!("{device} opens read-write"), None),
        Ran::Exited(_, _, stderr) => Check::new(
            name,
            Status::Fail,
            format!("{device} does not open read-write inside: {}", last_line(&stderr)),
            Some(fix_for(device)),
        ),
        Ran::Missing(why) => Check::new(name, Status::Skipped, format!("cannot open {device}: {why}"), None),
        Ran::Broken(why) => Check::new(name, Status::Fail, why, None),
    }
}

fn fix_for(device: &str) -> String {
    let group = if device.starts_with("/dev/infiniband") { "rdma" } else { "render and video" };
    format!(
        "recreate the toolbox with the node's devices and groups (`strix-toolbox refresh --force`); `strix-toolbox \
         doctor` checks that the devices exist and that you are in {group}"
    )
}

pub fn last_line(text: &str) -> &str {
    text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("no message")
}
