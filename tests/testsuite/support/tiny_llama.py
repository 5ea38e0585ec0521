"""Write a tiny llama-architecture GGUF with random weights: the tests' real model for llama.cpp.

Usage: tiny_llama.py VOCAB_GGUF OUT_GGUF SEED LAYERS

Every layer is a real llama block (RMS norm, grouped-query attention with RoPE, SwiGLU FFN), so
llama.cpp runs its full llama graph over it; the tokenizer is the llama SPM vocabulary (32000
tokens) copied from llama.cpp's models/ggml-vocab-llama-spm.gguf, so prompts are real text.
Weights are float32 from numpy's PCG64 seeded with SEED: the same seed and layer count write the
same bytes, another seed another model.

The output matrix is 32000 x 96 float32 (12.3 MB): above the 10 MiB from which llama.cpp's RPC
client asks an rpc-server started with -c for its cached copy of a weight (HASH_THRESHOLD in
ggml-rpc.cpp), so a second load over RPC sends fewer bytes than the first.
"""

import sys

import numpy as np
import gguf

N_EMBD = 96
N_HEAD = 6
N_HEAD_KV = 2
HEAD_DIM = N_EMBD // N_HEAD
N_FF = 256
CONTEXT = 4096
ROPE_FREQ_BASE = 10000.0
RMS_EPS = 1e-5


def copy_tokenizer(vocab_path, writer):
    """Every tokenizer.* key of the vocabulary file, with its type."""
    reader = gguf.GGUFReader(vocab_path)
    vocab_size = None
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        value = field.contents()
        main = field.types[0]
        if main == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(field.name, value, main, sub_type=field.types[-1])
            if field.name == "tokenizer.ggml.tokens":
                vocab_size = len(value)
        else:
            writer.add_key_value(field.name, value, main)
    if vocab_size is None:
        sys.exit(f"{vocab_path} has no tokenizer.ggml.tokens")
    return vocab_size


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    vocab_path, out_path, seed, layers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = np.random.default_rng(seed)

    def weight(rows, cols):
        # Scaled by 1/sqrt(fan-in), so activations keep their size through the layers.
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.float32(np.sqrt(cols))).astype(np.float32)

    def norm():
        return (1.0 + 0.1 * rng.standard_normal(N_EMBD, dtype=np.float32)).astype(np.float32)

    writer = gguf.GGUFWriter(out_path, "llama")
    writer.add_name(f"strix-tiny-llama-s{seed}-l{layers}")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_rope_freq_base(ROPE_FREQ_BASE)
    writer.add_layer_norm_rms_eps(RMS_EPS)
    vocab_size = copy_tokenizer(vocab_path, writer)
    writer.add_vocab_size(vocab_size)

    # numpy shapes are ggml's ne reversed: (rows = outputs, cols = inputs).
    writer.add_tensor("token_embd.weight", rng.standard_normal((vocab_size, N_EMBD), dtype=np.float32))
    for i in range(layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", norm())
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(N_HEAD * HEAD_DIM, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(N_HEAD_KV * HEAD_DIM, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(N_HEAD_KV * HEAD_DIM, N_EMBD))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(N_EMBD, N_HEAD * HEAD_DIM))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", norm())
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(N_FF, N_EMBD))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", norm())
    writer.add_tensor("output.weight", weight(vocab_size, N_EMBD))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
