//! What llama.cpp says it allocated after loading, from llama-server's log: each device's model
//! buffer (`load_tensors: %12s model buffer size = %8.2f MiB`), KV buffer (`llama_kv_cache: %10s
//! KV buffer size = %8.2f MiB`, one line per cache, a sliding-window model has two) and compute
//! buffer (`sched_reserve: %10s compute buffer size = %8.2f MiB`), and the context it took
//! (`llama_context: n_ctx = N`). Devices by llama.cpp's names: `CPU_Mapped`, `RPC0[host:port]`,
//! `ROCm0`. Lines that are not these are ignored; a figure that is not a size is skipped.

use serde::{Deserialize, Serialize};

/// The longest line looked at (llama.cpp's are short; a pasted prompt is not a figure).
const MAX_LINE: usize = 4096;
const MIB: f64 = (1u64 << 20) as f64;

/// One device's buffers, in bytes (llama.cpp prints MiB with two decimals: ±5 KiB).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceBuffers {
    pub device: String,
    pub model_bytes: u64,
    pub kv_bytes: u64,
    pub compute_bytes: u64,
}

/// What llama-server said it allocated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlamaSaid {
    /// Devices in the order the log first names them.
    pub devices: Vec<DeviceBuffers>,
    /// The cache's cells (`n_ctx`, after llama.cpp padded it).
    pub context_tokens: Option<u64>,
    /// Sequences the cache serves (`n_seq_max`: llama-server's slots).
    pub sequences: Option<u64>,
}

impl LlamaSaid {
    pub fn device(&self, name: &str) -> Option<&DeviceBuffers> {
        self.devices.iter().find(|d| d.device == name)
    }
}

/// What `log` (llama-server's output) says about its buffers.
pub fn parse(log: &str) -> LlamaSaid {
    let mut said = LlamaSaid::default();
    for line in log.lines().filter(|line| line.len() <= MAX_LINE) {
        for (marker, slot) in [
            (" model buffer size = ", Buffer::Model),
            (" KV buffer size = ", Buffer::Kv),
            (" compute buffer size = ", Buffer::Compute),
        ] {
            let Some((left, right)) = line.split_once(marker) else { continue };
            let Some(bytes) = mib(right) else { continue };
            let device = left.rsplit_once(": ").map_or(left, |(_, device)| device).trim();
            if device.is_empty() {
                continue;
            }
            let entry = match said.devices.iter().position(|d| d.device == device) {
                Some(at) => &mut said.devices[at],
                None => {
                    said.devices.push(DeviceBuffers { device: device.to_string(), ..DeviceBuffers::default() });
                    let last = said.devices.len() - 1;
                    &mut said.devices[last]
                }
            };
            let field = match slot {
                Buffer::Model => &mut entry.model_bytes,
                Buffer::Kv => &mut entry.kv_bytes,
                Buffer::Compute => &mut entry.compute_bytes,
            };
            *field = field.saturating_add(bytes);
        }
        if let Some(value) = setting(line, "llama_context: n_ctx ") {
            said.context_tokens = Some(value);
        }
        if let Some(value) = setting(line, "llama_context: n_seq_max ") {
            said.sequences = Some(value);
        }
    }
    said
}

enum Buffer {
    Model,
    Kv,
    Compute,
}

/// `   11.72 MiB` as bytes.
fn mib(text: &str) -> Option<u64> {
    let number = text.trim().strip_suffix("MiB")?.trim();
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && (0.0..1e12).contains(&value)).then(|| (value * MIB).round() as u64)
}

/// `llama_context: n_ctx                 = 2048`: the number after the `=`.
fn setting(line: &str, key: &str) -> Option<u64> {
    let (_, rest) = line.split_once(key)?;
    rest.trim_start().strip_prefix('=')?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RPC_SPLIT: &str = include_str!("../../../tests/fixtures/engine-logs/llama-server-rpc-ts-3-1.log");
    const CPU: &str = include_str!("../../../tests/fixtures/engine-logs/llama-server-cpu.log");

    #[test]
    fn a_real_split_over_two_rpc_servers() {
        // llama-server --rpc 127.0.0.1:50152,127.0.0.1:50153 -ngl 999 -ts 3,1 -c 2048 on the tests' tiny
        // llama (6 layers): the first server has the layers, the second the output layer.
        let said = parse(RPC_SPLIT);
        let names: Vec<&str> = said.devices.iter().map(|d| d.device.as_str()).collect();
        assert_eq!(names, ["CPU_Mapped", "RPC0[127.0.0.1:50152]", "RPC0[127.0.0.1:50153]", "CPU"]);
        let first = said.device("RPC0[127.0.0.1:50152]").expect("the first server");
        // 2.25 MiB of layers, 1.50 MiB of cache, 10.85 MiB of compute buffer, as printed.
        assert_eq!(first.model_bytes, 2_359_296);
        assert_eq!(first.kv_bytes, 1_572_864);
        assert_eq!(first.compute_bytes, (10.85 * MIB).round() as u64);
        let second = said.device("RPC0[127.0.0.1:50153]").expect("the second server");
        assert_eq!((second.model_bytes, second.kv_bytes), ((11.72 * MIB).round() as u64, 0));
        assert_eq!(said.device("CPU_Mapped").expect("the embedding").model_bytes, (11.72 * MIB).round() as u64);
        assert_eq!((said.context_tokens, said.sequences), (Some(2048), Some(4)));
    }

    #[test]
    fn a_real_run_on_the_cpu() {
        // -ngl 0 -c 4000: llama.cpp pads the context to 4096 cells.
        let said = parse(CPU);
        assert_eq!(said.context_tokens, Some(4096));
        let cpu = said.device("CPU").expect("the CPU's cache");
        assert_eq!(cpu.kv_bytes, 3 << 20);
        assert_eq!(said.device("CPU_Mapped").expect("the weights").model_bytes, (25.69 * MIB).round() as u64);
    }

    #[test]
    fn lines_that_are_not_figures_are_ignored() {
        let said = parse(
            "load_tensors: CPU model buffer size = lots MiB\n\
             llama_kv_cache: ROCm0 KV buffer size = -3.00 MiB\n\
             llama_kv_cache: ROCm0 KV buffer size =     1.00 MiB\n\
             llama_kv_cache: ROCm0 KV buffer size =     0.50 MiB\n\
             load_tensors:  model buffer size = 1.00 MiB\n\
             llama_context: n_ctx = many\n",
        );
        assert_eq!(said.devices.len(), 1);
        assert_eq!(said.devices[0].kv_bytes, 3 << 19, "two caches on one device add up");
        assert_eq!(said.context_tokens, None);
        assert_eq!(parse(&"x".repeat(MAX_LINE + 1)), LlamaSaid::default());
    }
}
