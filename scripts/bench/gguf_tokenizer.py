"""A Hugging Face tokenizer directory for a llama SPM GGUF, without torch: the GGUF's pieces as a
BPE model whose merges come from the pieces' scores (as transformers' SentencePiece extractor makes
them), with SentencePiece's metaspace and byte fallback."""
import sys
import gguf
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

gguf_path, out = sys.argv[1], sys.argv[2]
reader = gguf.GGUFReader(gguf_path)
field = lambda name: reader.fields[name]
tokens = [bytes(field("tokenizer.ggml.tokens").parts[i]).decode("utf-8") for i in field("tokenizer.ggml.tokens").data]
scores = [float(field("tokenizer.ggml.scores").parts[i][0]) for i in field("tokenizer.ggml.scores").data]
bos = int(field("tokenizer.ggml.bos_token_id").parts[-1][0])
eos = int(field("tokenizer.ggml.eos_token_id").parts[-1][0])
unk = int(field("tokenizer.ggml.unknown_token_id").parts[-1][0])
vocab = {piece: index for index, piece in enumerate(tokens)}
merges = []
for piece, index in vocab.items():
    for cut in range(1, len(piece)):
        left, right = piece[:cut], piece[cut:]
        if left in vocab and right in vocab:
            merges.append((-scores[index], vocab[left], vocab[right], left, right))
merges.sort()
tok = Tokenizer(models.BPE(vocab, [(left, right) for *_, left, right in merges], unk_token=tokens[unk], fuse_unk=True, byte_fallback=True))
tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
tok.pre_tokenizer = None
tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=tokens[bos], eos_token=tokens[eos], unk_token=tokens[unk])
fast.add_bos_token = True
fast.save_pretrained(out)
print(len(tokens), fast("Hello world").input_ids)
