"""A tiny Hugging Face model the real vLLM serves in milliseconds a token: random weights from a
fixed seed (the same model on every machine, so greedy answers are the same), saved by
transformers as safetensors, with a byte-level BPE tokenizer of 512 tokens trained on a few
sentences (any text tokenizes, as with GPT-2's; the bench's passage into many different tokens)
and a chat template (the `openai` client's chat requests need one). Run inside the vLLM CPU image
(it has torch, transformers and tokenizers): `python3 tiny_hf_model.py SHAPE OUT_DIR`.

Shapes (the config each is, beyond the vocabulary and a 4096-token context unless it says
another), each a kind of KV cache vLLM sizes its own way:
- llama-gqa: Llama, hidden 128, 4 heads and 2 KV heads of 32, 4 layers, bf16.
- llama-mha: Llama, hidden 128, 4 heads and 4 KV heads of 32, 4 layers, bf16, 16384 tokens.
- gemma3-sliding: Gemma 3 (text), hidden 128, 4 heads and 2 KV heads of 32, 6 layers: 4 that
  slide over 256 tokens and 2 full, bf16 (vLLM's hybrid cache groups).
- qwen3-moe: Qwen3-MoE, hidden 128, 4 heads and 2 KV heads of 32, 4 layers of 4 experts (2 a
  token, 64 wide), bf16, 16384 tokens.
"""

import os
import sys

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

# What every shape shares: hidden 128, an MLP of 256, 4 heads of 32.
BASE = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4)
GQA = dict(BASE, num_key_value_heads=2, head_dim=32)

SHAPES = {
    "llama-gqa": (transformers.LlamaConfig, transformers.LlamaForCausalLM, dict(GQA, num_hidden_layers=4)),
    "llama-mha": (
        transformers.LlamaConfig,
        transformers.LlamaForCausalLM,
        dict(BASE, num_hidden_layers=4, num_key_value_heads=4, max_position_embeddings=16384),
    ),
    "gemma3-sliding": (
        transformers.Gemma3TextConfig,
        transformers.Gemma3ForCausalLM,
        dict(
            GQA,
            num_hidden_layers=6,
            query_pre_attn_scalar=32,
            sliding_window=256,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 2,
        ),
    ),
    "qwen3-moe": (
        transformers.Qwen3MoeConfig,
        transformers.Qwen3MoeForCausalLM,
        dict(
            GQA,
            num_hidden_layers=4,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            max_position_embeddings=16384,
        ),
    ),
}

# What the tokenizer's merges are learnt from (bench/prompt.rs's passage among it).
CORPUS = [
    "The harbour town woke slowly. Fishermen hauled their nets along the quay while gulls argued over scraps, "
    "and the baker on the corner opened his shutters to let out the smell of bread.",
    "Up the hill, the schoolmaster walked his usual route, counting the steps between the church and the old "
    "stone bridge, a habit he had kept for thirty years.",
    "By noon the market square was full: merchants sold wool, copper pots, apples from the valley and salt from "
    "the flats beyond the lighthouse.",
    "Children ran between the stalls, and an old woman told anyone who would listen that the winter would be "
    "long, because the swallows had left early and the river ran low.",
    "user assistant system: What is the capital of France? Say hello. Count to ten: one two three four five.",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }} {{ message['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant{% endif %}"
)


def main(shape, out):
    config_class, model_class, sizes = SHAPES[shape]
    os.makedirs(out, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = config_class(
        **dict(
            dict(
                vocab_size=tokenizer.get_vocab_size(),
                max_position_embeddings=4096,
                bos_token_id=tokenizer.token_to_id("<s>"),
                eos_token_id=tokenizer.token_to_id("</s>"),
                torch_dtype="bfloat16",
            ),
            **sizes,
        )
    )
    model_class(config).to(torch.bfloat16).save_pretrained(out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
