#!/usr/bin/env python3
"""Writes a Tessera model folder (Llama-family safetensors, as `tessera model
init` makes) as a GGUF file for llama.cpp, with llama.cpp's own gguf-py
library (GGUFWriter), so llama.cpp reads exactly the weights Tessera reads.

  bench/hf_to_gguf.py --model DIR --out FILE.gguf --type f16|bf16 \
      --gguf-py LLAMA_CPP_CHECKOUT/gguf-py

Matrices are written as F16 (converted from bf16: exact for bf16 values in
f16's range) or BF16 (the same bits); norms as F32. q and k rows are
reordered from Hugging Face's rotary layout (two halves per head) to the
interleaved pairs llama.cpp's rope expects, which is what its own converter
does for Llama checkpoints. The byte-level BPE vocabulary and merges go in
as a "gpt2" tokenizer. Needs numpy (Debian: python3-numpy); nothing is
downloaded.
"""

import argparse
import json
import struct
import sys
from pathlib import Path


def read_safetensors(path):
    """Yields (name, dtype, shape, raw bytes) for every tensor of a file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        if n > 100 * 1024 * 1024:
            sys.exit(f"{path}: header of {n} bytes is not a safetensors header")
        header = json.loads(f.read(n))
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            f.seek(base + begin)
            yield name, info["dtype"], info["shape"], f.read(end - begin)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="model folder (config.json, tokenizer.json, *.safetensors)")
    ap.add_argument("--out", required=True, help="GGUF file to write")
    ap.add_argument("--type", choices=["f16", "bf16"], default="f16", help="matrix type")
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    try:
        import numpy as np
        import gguf
    except ImportError as e:
        sys.exit(f"cannot import {e.name}: install python3-numpy and python3-sentencepiece (Debian) and pass llama.cpp's gguf-py folder")

    model = Path(a.model)
    cfg = json.loads((model / "config.json").read_text())
    if cfg.get("model_type") != "llama":
        sys.exit(f"{model}/config.json: model_type {cfg.get('model_type')!r}, expected 'llama'")
    n_head = cfg["num_attention_heads"]
    n_kv = cfg.get("num_key_value_heads", n_head)
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // n_head)

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name(model.name)
    w.add_vocab_size(cfg["vocab_size"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if a.type == "f16" else gguf.LlamaFileType.MOSTLY_BF16)

    tok = json.loads((model / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    tokens = [""] * cfg["vocab_size"]
    types = [gguf.TokenType.NORMAL] * cfg["vocab_size"]
    for t, i in vocab.items():
        if i < len(tokens):
            tokens[i] = t
    for t in tok.get("added_tokens", []):
        if t["id"] < len(tokens):
            tokens[t["id"]] = t["content"]
            types[t["id"]] = gguf.TokenType.CONTROL if t.get("special") else gguf.TokenType.USER_DEFINED
    for i, t in enumerate(tokens):
        if not t:
            tokens[i] = f"[PAD{i}]"
            types[i] = gguf.TokenType.UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges", [])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eos = cfg.get("eos_token_id", 1)
    w.add_bos_token_id(int(cfg.get("bos_token_id", 0)))
    w.add_eos_token_id(int(eos[0] if isinstance(eos, list) else eos))

    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    per_layer = {
        "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
    }

    def rope_rows(m, heads):
        # Hugging Face keeps each head's rotary pairs as (i, i + d/2);
        # llama.cpp as (2i, 2i + 1): reorder each head's rows accordingly.
        rows, cols = m.shape
        return m.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)

    files = sorted(model.glob("*.safetensors"))
    if not files:
        sys.exit(f"{model}: no .safetensors file")
    for path in files:
        for name, dt, shape, raw in read_safetensors(path):
            if dt != "BF16":
                sys.exit(f"{path}: {name} is {dt}; this converter reads bf16 checkpoints")
            bits = np.frombuffer(raw, dtype=np.uint16).reshape(shape)
            if name in names:
                out = names[name]
            else:
                parts = name.split(".")
                if parts[:2] != ["model", "layers"] or ".".join(parts[3:-1]) not in per_layer:
                    sys.exit(f"{path}: unexpected tensor {name}")
                out = f"blk.{parts[2]}.{per_layer['.'.join(parts[3:-1])]}.weight"
            if out.endswith("attn_q.weight"):
                bits = rope_rows(bits, n_head)
            elif out.endswith("attn_k.weight"):
                bits = rope_rows(bits, n_kv)
            bits = np.ascontiguousarray(bits)
            f32 = (bits.astype(np.uint32) << 16).view(np.float32)
            if len(shape) == 1:
                w.add_tensor(out, f32)
            elif a.type == "f16":
                w.add_tensor(out, f32.astype(np.float16))
            else:
                w.add_tensor(out, bits, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {a.out} ({a.type})")


if __name__ == "__main__":
    main()
