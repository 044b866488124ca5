"""A small Llama-style decoder, and its decode step as a graph-harness target.

    graph-harness count --target examples/llama_decode.py:make_step --module-scopes
    graph-harness count --target examples/llama_decode.py:make_compiled_step --module-scopes

RMSNorm, rotary position embedding, a static KV cache written in place, scaled
dot-product attention and a SwiGLU MLP, in the layout gpt-fast made familiar
(`layers.3.attention.wqkv`, `layers.3.feed_forward.w1`). bf16 on a GPU, float32 on the
CPU. `make_step` returns the zero-argument step to count, with the model on its `.module`
attribute (what `--module-scopes` attributes nodes by). Nothing here imports graph-harness:
the model is plain PyTorch, as a user's would be.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 4096
    n_layer: int = 8
    dim: int = 512
    n_head: int = 8
    n_local_heads: int = 4  # grouped-query attention: KV heads
    intermediate_size: int = 1408  # SwiGLU hidden size
    max_seq_len: int = 256
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_head


PRESETS = {
    "small": LlamaConfig(),  # the example the README and BENCHMARKS count
    "tiny": LlamaConfig(
        vocab_size=256,
        n_layer=2,
        dim=64,
        n_head=4,
        n_local_heads=2,
        intermediate_size=176,
        max_seq_len=32,
    ),  # for tests
}


class KVCache(nn.Module):
    def __init__(self, cfg: LlamaConfig, batch: int, dtype: torch.dtype) -> None:
        super().__init__()
        shape = (batch, cfg.n_local_heads, cfg.max_seq_len, cfg.head_dim)  # [B, Hkv, S, D]
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype), persistent=False)

    def forward(self, input_pos, k_val, v_val):
        # input_pos: [T]; k_val, v_val: [B, Hkv, T, D], written in place at input_pos
        self.k_cache.index_copy_(2, input_pos, k_val)
        self.v_cache.index_copy_(2, input_pos, v_val)
        return self.k_cache, self.v_cache


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


def rope_cache(cfg: LlamaConfig) -> torch.Tensor:
    """[S, D/2, 2]: cos and sin of each position's rotation, per pair of channels."""
    freqs = 1.0 / cfg.rope_base ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim)
    angles = torch.outer(torch.arange(cfg.max_seq_len).float(), freqs)
    return torch.stack([angles.cos(), angles.sin()], dim=-1)


def apply_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    # x: [B, T, H, D]; freqs: [T, D/2, 2]
    xs = x.float().reshape(*x.shape[:-1], -1, 2)  # [B, T, H, D/2, 2]
    f = freqs.view(1, xs.size(1), 1, xs.size(3), 2)
    out = torch.stack(
        [
            xs[..., 0] * f[..., 0] - xs[..., 1] * f[..., 1],
            xs[..., 1] * f[..., 0] + xs[..., 0] * f[..., 1],
        ],
        dim=-1,
    )
    return out.flatten(3).type_as(x)


def expand_kv(x: torch.Tensor, n_head: int) -> torch.Tensor:
    """[B, Hkv, S, D] -> [B, H, S, D], each KV head serving H / Hkv query heads (what
    repeat_interleave does, written as expand + reshape: no repeat count to read back)."""
    b, hkv, s, d = x.shape
    return x[:, :, None].expand(b, hkv, n_head // hkv, s, d).reshape(b, n_head, s, d)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        kv = 2 * cfg.n_local_heads * cfg.head_dim
        self.wqkv = nn.Linear(cfg.dim, cfg.dim + kv, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.kv_cache: KVCache | None = None

    def forward(self, x, freqs, mask, input_pos):
        cfg = self.cfg
        b, t, _ = x.shape  # x: [B, T, dim]
        kv = cfg.n_local_heads * cfg.head_dim
        q, k, v = self.wqkv(x).split([cfg.dim, kv, kv], dim=-1)
        q = apply_rope(q.view(b, t, cfg.n_head, cfg.head_dim), freqs)
        k = apply_rope(k.view(b, t, cfg.n_local_heads, cfg.head_dim), freqs)
        v = v.view(b, t, cfg.n_local_heads, cfg.head_dim)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # [B, H, T, D]
        k, v = self.kv_cache(input_pos, k, v)  # [B, Hkv, S, D]
        k, v = expand_kv(k, cfg.n_head), expand_kv(v, cfg.n_head)  # [B, H, S, D]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # [B, H, T, D]
        return self.wo(y.transpose(1, 2).reshape(b, t, cfg.dim))


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.intermediate_size, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.intermediate_size, bias=False)
        self.w2 = nn.Linear(cfg.intermediate_size, cfg.dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x, freqs, mask, input_pos):
        h = x + self.attention(self.attention_norm(x), freqs, mask, input_pos)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.output = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        self.register_buffer("freqs", rope_cache(cfg), persistent=False)
        causal = torch.tril(torch.ones(cfg.max_seq_len, cfg.max_seq_len, dtype=torch.bool))
        self.register_buffer("causal_mask", causal, persistent=False)  # [S, S]

    def setup_caches(self, batch: int) -> None:
        dtype = self.output.weight.dtype
        for layer in self.layers:
            layer.attention.kv_cache = KVCache(self.cfg, batch, dtype).to(self.freqs.device)

    def forward(self, idx, input_pos):
        # idx: [B, T] token ids; input_pos: [T] positions; returns logits [B, T, vocab]
        mask = self.causal_mask[None, None, input_pos]  # [1, 1, T, S]
        freqs = self.freqs[input_pos]  # [T, D/2, 2]
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, freqs, mask, input_pos)
        return self.output(self.norm(x))


def build(cfg: LlamaConfig, device: torch.device, *, batch: int = 1, seed: int = 0):
    """The model with random weights and static caches, on `device` (bf16 on CUDA)."""
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = Transformer(cfg).to(device=device, dtype=dtype).eval()
    model.freqs = rope_cache(cfg).to(device)  # rotary angles stay float32
    model.setup_caches(batch)
    return model


def make_step(
    compiled: bool | str = False, preset: str = "small", device: str | None = None, batch: int = 1
):
    """One decode step (a token at a position, its KV written in place) as a
    zero-argument callable touching only static tensors; the model on `step.module`.

    Its inputs are two static buffers, the tokens `idx` ([batch, 1]: one per sequence)
    and the position `input_pos`, as in gpt-fast's decode loop (every sequence of the
    batch at one position; `graph-harness sweep` calls make_step(batch=B) per size).
    Called alone, the step decodes the same tokens at the same position (the middle of
    the cache) again and again. `step.feed(i)` writes call i of a decode from there (the
    i-th tokens of a fixed random sequence, at position start + i)
    into those buffers, in place, as an engine copies the next inputs in before a replay;
    `step.reset()` zeroes the KV caches in place. `compiled=True` runs the model through
    `torch.compile(fullgraph=True, dynamic=False)` (default mode: graph-harness captures
    it into its own CUDA graph; never "reduce-overhead"; static shapes, as an engine
    compiles each captured size). `compiled="reduce-overhead"` compiles it in that mode:
    Inductor captures and replays its own CUDA graphs (cudagraph trees), as Hugging Face's
    generate() does by default for a static cache; graph-harness counts such a step by
    recording those graphs."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cfg = PRESETS[preset]
    model = build(cfg, dev, batch=batch)
    mode = {"mode": compiled} if isinstance(compiled, str) else {}
    run = torch.compile(model, fullgraph=True, dynamic=False, **mode) if compiled else model
    idx = torch.randint(0, cfg.vocab_size, (batch, 1), device=dev)  # [B, T=1] the tokens
    start = cfg.max_seq_len // 2
    input_pos = torch.tensor([start], device=dev)  # [T=1] their position
    tokens = torch.randint(0, cfg.vocab_size, (cfg.max_seq_len - start, batch), device=dev)
    tokens[0] = idx[:, 0]  # call 0 decodes the tokens the step starts with

    @torch.no_grad()
    def step():
        return run(idx, input_pos)

    @torch.no_grad()
    def feed(i: int):  # call i's inputs, in place: a graph keeps the buffers it captured
        i %= tokens.shape[0]  # past the cache's end, around again
        idx.copy_(tokens[i].view(batch, 1))
        input_pos.fill_(start + i)

    @torch.no_grad()
    def reset():  # the caches back to empty, in place
        for layer in model.layers:
            layer.attention.kv_cache.k_cache.zero_()
            layer.attention.kv_cache.v_cache.zero_()

    step.module = model  # what --module-scopes attributes by (the eager model)
    step.inputs = (idx, input_pos)
    step.feed, step.reset = feed, reset
    step.max_steps = tokens.shape[0]  # from the middle to the cache's end (--steps to-end)
    return step


def make_compiled_step(preset: str = "small", device: str | None = None, batch: int = 1):
    """`make_step(compiled=True)`: the form --target takes (no arguments, or sweep's batch)."""
    return make_step(compiled=True, preset=preset, device=device, batch=batch)


def make_reduce_overhead_step(preset: str = "small", device: str | None = None, batch: int = 1):
    """`make_step(compiled="reduce-overhead")`: Inductor's own CUDA graphs, recorded."""
    return make_step(compiled="reduce-overhead", preset=preset, device=device, batch=batch)


def make_tiny_reduce_overhead_step(batch: int = 1):
    """The tiny preset compiled with mode="reduce-overhead", for tests."""
    return make_step(compiled="reduce-overhead", preset="tiny", batch=batch)


def make_tiny_step(batch: int = 1):
    """The tiny preset, for tests: the same structure in a fraction of the work."""
    return make_step(preset="tiny", batch=batch)
