//! Every device of the spec is there inside and opens read-write: a node the device cgroup does
//! not allow, or one a group does not open, fails at open(2). The image's shell opens each node
//! read-write (`exec 3<>`, as ROCm opens /dev/kfd), after making sure it is a character device (so
//! a missing one is never created); it needs nothing else in the image. The nodes are checked at
//! the same time.

use futures_util::future::join_all;

use super::image_files::open_read_write;
use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};
use crate::error::last_line;

pub async fn checks(probe: &Probe<'_>, expected: &Expected) -> Vec<Check> {
    join_all(expected.devices.iter().map(|device| check(probe, device))).await
}

async fn check(probe: &Probe<'_>, device: &str) -> Check {
    let name = format!("device:{device}");
    match open_read_write(probe, device).await {
        Ran::Exited(0, ..) => Check::new(name, Status::Pass, format!("{device} opens read-write"), None),
        Ran::Exited(_, _, stderr) => Check::new(
            name,
            Status::Fail,
            format!("{device} does not open read-write inside: {}", last_words(&stderr)),
            Some(fix_for(device)),
        ),
        Ran::Missing(why) => {
            Check::new(name, Status::Skipped, format!("{device} not opened: {why} (it opens the devices)"), None)
        }
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

/// What a program said last, for a check's message.
pub fn last_words(text: &str) -> &str {
    last_line(text).unwrap_or("no message")
}
