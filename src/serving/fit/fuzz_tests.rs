//! The header readers against many generated and mutated inputs: real headers (the fixtures'
//! configs, a safetensors header, GGUF headers) with bits flipped, counts and lengths rewritten to
//! extremes (0, 2^32-1, 2^62, 2^63, 2^64-1), bytes cut, repeated or spliced; and random bytes.
//! Every input must come back as a shape or an error, never a panic, and the largest single
//! allocation while reading it must stay within a small multiple of the input's own size: a claim
//! in the input is never what decides an allocation.
//!
//! The inputs come from a fixed seed, so a failure names an input that fails again.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use crate::model::shape::fixtures::{self, safetensors_header, GgufBuilder, TensorSpec};
use crate::model::shape::{config, gguf, safetensors, ModelShape, Sizing};

/// Records the largest allocation the current thread asks for while measuring.
struct Measuring;

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = MEASURING.try_with(|on| {
        if on.get() {
            let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
        }
    });
}

// SAFETY: every call is passed on to the system allocator unchanged; only sizes are noted.
unsafe impl GlobalAlloc for Measuring {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the system's) with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: `ptr` came from the system allocator with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Measuring = Measuring;

/// The largest single allocation `read` makes.
fn largest_allocation(read: impl FnOnce()) -> usize {
    LARGEST.with(|largest| largest.set(0));
    MEASURING.with(|on| on.set(true));
    read();
    MEASURING.with(|on| on.set(false));
    LARGEST.with(Cell::get)
}

/// What reading an input of `len` bytes may allocate at once: a few times the input (a parsed
/// copy, a map of what it holds) and a fixed allowance for messages and small tables.
fn allowed(len: usize) -> usize {
    8 * len + (256 << 10)
}

/// xorshift64*: a fixed sequence of numbers, no dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const EXTREMES: [u64; 9] = [0, 1, 0xFFFF_FFFF, 1 << 32, 1 << 40, 1 << 62, 1 << 63, u64::MAX, 100_000_000_001];

/// One mutation of `seed`, drawing on `others` for splices.
fn mutate(seed: &[u8], others: &[Vec<u8>], random: &mut Random) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for _ in 0..1 + random.below(4) {
        let len = bytes.len().max(1);
        match random.below(7) {
            0 => {
                let at = random.below(len);
                if let Some(byte) = bytes.get_mut(at) {
                    *byte ^= 1 << random.below(8);
                }
            }
            1 => {
                // A count or length rewritten to an extreme, at any byte.
                let at = random.below(len);
                let value = EXTREMES[random.below(EXTREMES.len())].to_le_bytes();
                for (i, byte) in value.iter().enumerate().take(if random.below(2) == 0 { 4 } else { 8 }) {
                    if let Some(slot) = bytes.get_mut(at + i) {
                        *slot = *byte;
                    }
                }
            }
            2 => bytes.truncate(random.below(len)),
            3 => {
                let at = random.below(len);
                let span = random.below(64).min(len - at.min(len));
                let copy: Vec<u8> = bytes.get(at..at + span).unwrap_or_default().to_vec();
                let to = random.below(len);
                bytes.splice(to.min(bytes.len())..to.min(bytes.len()), copy);
            }
            4 => {
                let other = &others[random.below(others.len())];
                let from = random.below(other.len());
                let to = random.below(len).min(bytes.len());
                bytes.truncate(to);
                bytes.extend_from_slice(other.get(from..).unwrap_or_default());
            }
            5 => {
                // Digits in JSON replaced by an extreme or a negative number.
                let text = ["-1", "1e400", "18446744073709551616", "9223372036854775808", "0", "-0.5", "null"];
                let word = text[random.below(text.len())].as_bytes();
                if let Some(at) =
                    (0..bytes.len()).map(|i| (i + random.below(len)) % len).find(|&i| bytes[i].is_ascii_digit())
                {
                    bytes.splice(at..at + 1, word.iter().copied());
                }
            }
            _ => {
                let at = random.below(len).min(bytes.len());
                let noise: Vec<u8> = (0..random.below(16)).map(|_| random.next() as u8).collect();
                bytes.splice(at..at, noise);
            }
        }
    }
    bytes
}

fn gguf_seeds() -> Vec<Vec<u8>> {
    let llama = GgufBuilder::default()
        .string("general.architecture", "llama")
        .u32("llama.block_count", 2)
        .u32("llama.context_length", 4096)
        .u32("llama.embedding_length", 64)
        .u32("llama.feed_forward_length", 128)
        .u32("llama.attention.head_count", 4)
        .u32("llama.attention.head_count_kv", 2)
        .u32_array("llama.attention.sliding_window_pattern", &[1, 0])
        .u32("llama.attention.sliding_window", 512)
        .string_array("tokenizer.ggml.tokens", &["a", "b", "c"])
        .tensor("token_embd.weight", &[64, 3], 0)
        .tensor("blk.0.attn_k.weight", &[64, 32], 8)
        .tensor("blk.1.ffn_down_exps.weight", &[256, 64, 4], 12)
        .tensor("output.weight", &[64, 3], 1)
        .build();
    let moe = GgufBuilder::default()
        .string("general.architecture", "deepseek2")
        .u32("deepseek2.block_count", 1)
        .u32("deepseek2.context_length", 163840)
        .u32("deepseek2.embedding_length", 128)
        .u32("deepseek2.attention.head_count", 2)
        .u32("deepseek2.attention.head_count_kv", 1)
        .u32("deepseek2.attention.kv_lora_rank", 64)
        .u32("deepseek2.expert_count", 8)
        .u32("deepseek2.expert_used_count", 2)
        .u32("deepseek2.leading_dense_block_count", 1)
        .tensor("blk.0.ffn_gate_exps.weight", &[128, 32, 8], 39)
        .build();
    vec![llama, moe]
}

fn safetensors_seed() -> Vec<u8> {
    let tensors = [
        TensorSpec { name: "model.embed_tokens.weight".into(), dtype: "BF16", shape: vec![32, 16] },
        TensorSpec { name: "model.layers.0.self_attn.k_proj.weight".into(), dtype: "F8_E4M3", shape: vec![8, 16] },
        TensorSpec {
            name: "model.layers.0.mlp.experts.down_proj_blocks".into(),
            dtype: "U8",
            shape: vec![2, 16, 1, 16],
        },
        TensorSpec { name: "model.layers.0.input_layernorm.weight".into(), dtype: "F4", shape: vec![16] },
    ];
    safetensors_header(&tensors).0
}

#[test]
fn gguf_headers_never_panic_nor_allocate_what_they_claim() {
    let seeds = gguf_seeds();
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    let mut sized = 0;
    for round in 0..4000 {
        let input = if round % 10 == 0 {
            (0..random.below(256)).map(|_| random.next() as u8).collect()
        } else {
            mutate(&seeds[round % seeds.len()], &seeds, &mut random)
        };
        let mut shape = None;
        let largest = largest_allocation(|| {
            if let Ok(header) = gguf::parse(&input) {
                if let Ok(Sizing::Sized(sized_shape)) = gguf::shape(&header, std::slice::from_ref(&header)) {
                    shape = Some(sized_shape);
                    sized += 1;
                }
            }
        });
        if let Some(shape) = shape {
            plan_without_panic(&shape);
        }
        assert!(largest <= allowed(input.len()), "round {round}: {largest} bytes at once for {} bytes", input.len());
    }
    assert!(sized > 0, "some mutations still read as models");
}

#[test]
fn safetensors_headers_and_indexes_never_panic_nor_allocate_what_they_claim() {
    let index = br#"{"metadata": {"total_size": 1234}, "weight_map": {"a": "model-00001-of-00002.safetensors",
        "b": "model-00002-of-00002.safetensors"}}"#
        .to_vec();
    let seeds = vec![safetensors_seed(), index.clone()];
    let mut random = Random(0xD1B5_4A32_D192_ED03);
    let mut headers = 0;
    for round in 0..4000 {
        let input = mutate(&seeds[round % 2], &seeds, &mut random);
        let largest = largest_allocation(|| {
            if safetensors::parse(&input).is_ok() {
                headers += 1;
            }
            let _ = safetensors::parse_index(&input);
            let _ = safetensors::header_length(&input);
        });
        assert!(largest <= allowed(input.len()), "round {round}: {largest} bytes at once for {} bytes", input.len());
    }
    assert!(headers > 0, "some mutations still read as headers");
}

#[test]
fn configs_never_panic_nor_allocate_what_they_claim() {
    let seeds: Vec<Vec<u8>> = [
        fixtures::QWEN3_32B,
        fixtures::QWEN3_235B_A22B,
        fixtures::GPT_OSS_120B,
        fixtures::DEEPSEEK_V3,
        fixtures::QWEN3_NEXT_80B,
    ]
    .iter()
    .map(|config| config.as_bytes().to_vec())
    .collect();
    let mut random = Random(0xA076_1D64_78BD_642F);
    let mut sized = 0;
    for round in 0..3000 {
        let input = mutate(&seeds[round % seeds.len()], &seeds, &mut random);
        let largest = largest_allocation(|| {
            if let Ok(Sizing::Sized(shape)) = config::parse(&input) {
                let _ = super::Weights::estimated(&shape);
                sized += 1;
            }
        });
        // What a mutated config describes, planned: the arithmetic saturates, never panics.
        if let Ok(Sizing::Sized(shape)) = config::parse(&input) {
            plan_without_panic(&shape);
        }
        assert!(largest <= allowed(input.len()), "round {round}: {largest} bytes at once for {} bytes", input.len());
    }
    assert!(sized > 0, "some mutations still read as models");
}

/// Plan `shape` for both engines on one and on three nodes.
fn plan_without_panic(shape: &ModelShape) {
    use crate::serving::fit::{llama, vllm, NodeMemory};
    use crate::spec::Transport;
    let nodes: Vec<NodeMemory> =
        (0..3).map(|i| NodeMemory::new(&format!("n{i}"), (120 + i) << 30, 1 << 30, 4 << 30)).collect();
    let build = crate::serving::fit::vllm_build::VllmBuild::of(None, "not asked");
    if let Ok(rules) = vllm::VllmRules::new(shape, None, build) {
        let _ = vllm::fit(shape, &nodes, &Transport::EthernetTcp, &rules);
        let _ = vllm::fit(shape, nodes.get(..1).unwrap_or_default(), &Transport::EthernetTcp, &rules);
    }
    let _ = llama::fit(shape, &nodes, Some(2), &llama::LlamaRules::default());
}

#[test]
fn the_allocation_measure_sees_allocations() {
    let largest = largest_allocation(|| {
        let buffer: Vec<u8> = Vec::with_capacity(1 << 20);
        std::hint::black_box(buffer);
    });
    assert!(largest >= 1 << 20, "{largest}");
}
