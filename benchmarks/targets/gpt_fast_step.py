"""A decode step of gpt-fast's Transformer (benchmarks/third_party/gpt_fast/model.py,
verbatim), for `--target`: the public Llama-style model the profile benchmarks run.

    graph-harness profile --target benchmarks/targets/gpt_fast_step.py:make_step \
        --target benchmarks/targets/gpt_fast_step.py:make_compiled_step --module-scopes 2

The model is gpt-fast's own code with a config of our choosing (6 layers, dim 512, 8
heads, random bf16 weights: nothing is downloaded), its caches set up as gpt-fast's
generate.py does, and the step its `decode_one_token` less the sampling: the logits of
one token per sequence at one position. As examples/llama_decode.py: static `idx` and
`input_pos` buffers, `feed(i)` writes call i's inputs in place, `reset()` zeroes the KV
caches, and the compiled step is `torch.compile(fullgraph=True, dynamic=False)`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "third_party" / "gpt_fast"))
from model import ModelArgs, Transformer  # gpt-fast's file, by path

CONFIG = dict(n_layer=6, n_head=8, dim=512, vocab_size=32000, block_size=1024)
MAX_SEQ = 512  # cache length: a decode in the middle of it


def make_step(compiled: bool = False, device: str | None = None, batch: int = 1):
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(0)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    with torch.device(dev):
        model = Transformer(ModelArgs(**CONFIG))
        model.setup_caches(max_batch_size=batch, max_seq_length=MAX_SEQ)
    model = model.to(device=dev, dtype=dtype).eval()
    run = torch.compile(model, fullgraph=True, dynamic=False) if compiled else model
    start = MAX_SEQ // 2
    idx = torch.randint(0, CONFIG["vocab_size"], (batch, 1), device=dev)
    input_pos = torch.tensor([start], device=dev)
    tokens = torch.randint(0, CONFIG["vocab_size"], (MAX_SEQ - start, batch), device=dev)
    tokens[0] = idx[:, 0]

    @torch.no_grad()
    def step():
        return run(idx, input_pos)

    @torch.no_grad()
    def feed(i: int):
        i %= tokens.shape[0]
        idx.copy_(tokens[i].view(batch, 1))
        input_pos.fill_(start + i)

    @torch.no_grad()
    def reset():
        for layer in model.layers:
            layer.attention.kv_cache.k_cache.zero_()
            layer.attention.kv_cache.v_cache.zero_()

    step.module = model
    step.inputs = (idx, input_pos)
    step.feed, step.reset = feed, reset
    return step


def make_compiled_step(device: str | None = None, batch: int = 1):
    return make_step(compiled=True, device=device, batch=batch)
