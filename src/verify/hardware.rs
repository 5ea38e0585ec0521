//! Where the image has the tools, the real hardware as the stack sees it: ROCm lists a gfx1151
//! agent, the RDMA port is PORT_ACTIVE, torch sees a GPU. Where a tool is missing the check is
//! skipped with the reason.

use futures_util::future::OptionFuture;

use super::devices::last_words;
use super::probe::{Probe, Ran};
use super::Expected;
use crate::check::{Check, Status};

/// The three tools run at the same time (torch's import alone takes seconds on a real node).
pub async fn checks(probe: &Probe<'_>, expected: &Expected) -> Vec<Check> {
    let rdma = OptionFuture::from(expected.rdma_port.as_ref().map(|(device, port)| rdma_port(probe, device, *port)));
    let (rocm, rdma, torch) = tokio::join!(rocm_agent(probe), rdma, torch_device(probe, expected.cpu_only));
    [Some(rocm), rdma, Some(torch)].into_iter().flatten().collect()
}

async fn rocm_agent(probe: &Probe<'_>) -> Check {
    const NAME: &str = "hw:rocm";
    let mut outcome = probe.run(&["rocminfo"]).await;
    if matches!(outcome, Ran::Missing(_)) {
        outcome = probe.run(&["amd-smi", "static", "--asic"]).await;
    }
    match outcome {
        Ran::Exited(0, stdout, _) if stdout.contains("gfx1151") => Check::new(NAME, Status::Pass, "ROCm sees a gfx1151 agent", None),
        Ran::Exited(code, stdout, stderr) => Check::new(
            NAME,
            Status::Fail,
            format!("ROCm lists no gfx1151 agent (exit {code}): {}", last_words(if stderr.trim().is_empty() { &stdout } else { &stderr })),
            Some("check /dev/kfd and the render group inside (the device checks above), and `strix-toolbox doctor` on the node".into()),
        ),
        Ran::Missing(_) => Check::new(NAME, Status::Skipped, "rocminfo and amd-smi not in the image", None),
        Ran::Broken(why) => Check::new(NAME, Status::Fail, why, None),
    }
}

async fn rdma_port(probe: &Probe<'_>, device: &str, port: u32) -> Check {
    let name = format!("hw:rdma:{device}/{port}");
    let port_text = port.to_string();
    match probe.run(&["ibv_devinfo", "-d", device, "-i", &port_text]).await {
        Ran::Exited(0, stdout, _) if stdout.contains("PORT_ACTIVE") => {
            Check::new(name, Status::Pass, format!("{device} port {port} is PORT_ACTIVE inside"), None)
        }
        Ran::Exited(_, stdout, stderr) => Check::new(
            name,
            Status::Fail,
            format!(
                "{device} port {port} is not PORT_ACTIVE inside: {}",
                last_words(if stderr.trim().is_empty() { &stdout } else { &stderr })
            ),
            Some("check /dev/infiniband and memlock inside (above), and the port with `strix-toolbox doctor`".into()),
        ),
        Ran::Missing(_) => Check::new(name, Status::Skipped, "ibv_devinfo not in the image", None),
        Ran::Broken(why) => Check::new(name, Status::Fail, why, None),
    }
}

/// torch sees the GPU; or, in an image that computes on the CPU, computes there (a product of two
/// small matrices: what every layer of the model does).
async fn torch_device(probe: &Probe<'_>, cpu_only: bool) -> Check {
    const NAME: &str = "hw:torch";
    // Fixed programs, no input: torch's own answer.
    let program = if cpu_only {
        "import torch; x = torch.ones(4, 4); print('cpu', torch.__version__, float((x @ x).sum()))"
    } else {
        "import torch; print(torch.cuda.is_available(), torch.cuda.device_count())"
    };
    match probe.run(&["python3", "-c", program]).await {
        Ran::Exited(0, stdout, _) if stdout.trim_start().starts_with("True") => {
            Check::new(NAME, Status::Pass, format!("torch sees the GPU ({})", stdout.trim()), None)
        }
        Ran::Exited(0, stdout, _) if cpu_only && stdout.trim().starts_with("cpu") && stdout.trim().ends_with(" 64.0") => {
            let version = stdout.split_whitespace().nth(1).unwrap_or_default().to_string();
            let said = format!("torch {version} computes on the CPU, where the image's engine runs (its device label)");
            Check::new(NAME, Status::Pass, said, None)
        }
        Ran::Exited(_, _, stderr) if stderr.contains("No module named 'torch'") || stderr.contains("No module named torch") => {
            Check::new(NAME, Status::Skipped, "torch not in the image's python3", None)
        }
        Ran::Exited(_, stdout, stderr) => Check::new(
            NAME,
            Status::Fail,
            format!("torch sees no GPU: {}", last_words(if stderr.trim().is_empty() { &stdout } else { &stderr })),
            Some("\"No HIP GPUs available\" after a group change: log in again on the host, then `strix-toolbox refresh --force`".into()),
        ),
        Ran::Missing(_) => Check::new(NAME, Status::Skipped, "python3 not in the image", None),
        Ran::Broken(why) => Check::new(NAME, Status::Fail, why, None),
    }
}
