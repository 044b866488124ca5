"""A Hugging Face transformers decode step, and its reset, as a graph-harness target.

    graph-harness count --target examples/hf_decode.py:make_step --module-scopes 3
    graph-harness count --target examples/hf_decode.py:make_compiled_step --module-scopes 3

`LlamaForCausalLM` built from a `LlamaConfig` (random weights, seeded; no download), with
a `StaticCache` (`make_gemma3_step`: a Gemma 3 model of the same sizes, sliding-window
layers and full ones in turn). One call of the step decodes one token: every layer writes
its key and value at the cache's position and the position advances by one, in place, on
the device, as in a real decode loop. That makes the step stateful: after `max_cache_len`
calls the next write would fall outside the cache. `step.reset()` puts it back where it
started.

- **The position.** transformers 4.x passed it in as `cache_position`; since 5.0 the
  StaticCache keeps it itself, as each layer's `cumulative_length` (a device tensor its
  `update` advances in place), and the model derives `position_ids` from it. The step
  passes no position: it uses the cache's, as `generate` does.
- **The token is fed**, not fed back: `step.feed(i)` writes the i-th token of a fixed
  random sequence into the step's static `input_ids` buffer, in place, before call i, as
  an engine copies the next inputs in before a replay (graph-harness's check runs its
  trajectory that way). Called without it, the step decodes the same token again. With
  random weights the next token means nothing; feeding back `logits.argmax(-1)` would add
  an argmax to the step and the token to its state.
- **The reset** is one eager call, `StaticCache.reset()`: it zeroes every layer's keys,
  values and position in place (`zero_()`), allocating nothing, so a graph captured on
  the cache keeps reading and writing the same addresses. The cache is initialized before
  the first call (`early_initialization`), so no call, warm-up included, allocates it.
- bf16 on CUDA, float32 on the CPU; the model on `step.module` (the eager one, for
  `--module-scopes`), the cache on `step.cache`.

Runs on transformers 5.17 and later (the cache's argument is `past_key_values` in 5.17,
`cache` from 5.2x: the step passes whichever the model's forward takes). Nothing here
imports graph-harness.
"""

from __future__ import annotations

import inspect

import torch
from transformers import LlamaConfig, LlamaForCausalLM, StaticCache

# Small, so a step is a few hundred nodes: 4 layers x hidden 512, 8 query heads sharing 4
# KV heads (grouped-query attention, head_dim 64), SwiGLU hidden 1408 (about 2.75x hidden,
# as Llama's), a 4096-token vocabulary, a 256-token cache. Unlisted settings keep
# LlamaConfig's defaults (RMSNorm eps 1e-6, its default rotary embedding, untied input
# and output embeddings).
PRESETS = {
    "small": dict(
        vocab_size=4096,
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_cache_len=256,
    ),
    # for tests: the same structure in a fraction of the work
    "tiny": dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_cache_len=32,
    ),
}


def config_of(preset: str, arch: str = "llama", window: int = 8):
    """The model's config and the cache length for `preset` (`arch`: see gemma3_config)."""
    p = dict(PRESETS[preset])
    max_cache_len = p.pop("max_cache_len")
    cfg = LlamaConfig(**p, max_position_embeddings=max_cache_len, attn_implementation="sdpa")
    if arch == "gemma3":
        cfg = gemma3_config(cfg, window, max_cache_len)
    elif arch in ("qwen2", "qwen2_moe"):
        cfg = qwen2_config(cfg, moe=arch == "qwen2_moe")
    return cfg, max_cache_len


def qwen2_config(llama: LlamaConfig, *, moe: bool):
    """A Qwen2 config of the Llama preset's sizes (biased q, k, v projections), or with
    `moe` a Qwen2-MoE one: 8 experts of a quarter of the MLP's width, 2 chosen per token,
    and a shared expert, every layer sparse. Its experts run as `batched_mm` (each token's
    chosen experts' weights gathered: static shapes, no host sync, so it captures)."""
    from transformers import Qwen2Config, Qwen2MoeConfig

    common = dict(
        vocab_size=llama.vocab_size,
        hidden_size=llama.hidden_size,
        num_hidden_layers=llama.num_hidden_layers,
        num_attention_heads=llama.num_attention_heads,
        num_key_value_heads=llama.num_key_value_heads,
        max_position_embeddings=llama.max_position_embeddings,
        attn_implementation="sdpa",
    )
    if not moe:
        return Qwen2Config(**common, intermediate_size=llama.intermediate_size)
    return Qwen2MoeConfig(
        **common,
        intermediate_size=llama.intermediate_size,
        moe_intermediate_size=llama.intermediate_size // 4,
        shared_expert_intermediate_size=llama.intermediate_size // 2,
        num_experts=8,
        num_experts_per_tok=2,
        decoder_sparse_step=1,
        experts_implementation="batched_mm",
    )


def gemma3_config(llama: LlamaConfig, window: int, max_cache_len: int):
    """A Gemma 3 text config of the Llama preset's sizes, its layers sliding-window
    attention (window `window`) and full attention in turn: decoding past the window
    exercises the static cache's sliding layers."""
    from transformers import Gemma3TextConfig

    layers = llama.num_hidden_layers
    return Gemma3TextConfig(
        vocab_size=llama.vocab_size,
        hidden_size=llama.hidden_size,
        intermediate_size=llama.intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=llama.num_attention_heads,
        num_key_value_heads=llama.num_key_value_heads,
        head_dim=llama.hidden_size // llama.num_attention_heads,
        sliding_window=window,
        layer_types=[
            "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)
        ],
        max_position_embeddings=max_cache_len,
        attn_implementation="sdpa",
    )


def model_class(arch: str):
    if arch == "gemma3":
        from transformers import Gemma3ForCausalLM

        return Gemma3ForCausalLM
    if arch == "qwen2":
        from transformers import Qwen2ForCausalLM

        return Qwen2ForCausalLM
    if arch == "qwen2_moe":
        from transformers import Qwen2MoeForCausalLM

        return Qwen2MoeForCausalLM
    return LlamaForCausalLM


def build(
    preset: str,
    device: torch.device,
    *,
    seed: int = 0,
    batch: int = 1,
    arch: str = "llama",
    window: int = 8,
):
    """The model (random weights from `seed`, eval mode) and its initialized StaticCache."""
    cfg, max_cache_len = config_of(preset, arch, window)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(seed)
    model = model_class(arch)(cfg).to(device=device, dtype=dtype).eval()
    cache = StaticCache(config=cfg, max_cache_len=max_cache_len)
    # keys, values: [B, KV heads, max_cache_len, head_dim] per layer; positions: [] each
    cache.early_initialization(
        batch_size=batch,
        num_heads=cfg.num_key_value_heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        dtype=dtype,
        device=device,
    )
    return model, cache


def cache_argument(model: torch.nn.Module) -> str:
    """The name the model's forward takes its cache by: `cache` (5.2x on), else
    `past_key_values` (passing the old name to a newer model warns at every call)."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def make_step(
    compiled: bool = False,
    preset: str = "small",
    device: str | None = None,
    seed: int = 0,
    batch: int = 1,
    arch: str = "llama",
    window: int = 8,
):
    """One decode step as a zero-argument callable returning the logits [batch, 1, vocab];
    `step.reset()` returns it (cache and position) to its starting state, `step.feed(i)`
    writes call i's tokens (one per sequence; `graph-harness sweep` calls
    make_step(batch=B) per size).

    `compiled=True` runs the model through `torch.compile(fullgraph=True, dynamic=False)`
    in the default mode (graph-harness captures it into its own CUDA graph; never
    "reduce-overhead"; static shapes, as an engine compiles each captured size).
    `arch="gemma3"`: a Gemma 3 model of the preset's sizes (gemma3_config)."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model, cache = build(preset, dev, seed=seed, batch=batch, arch=arch, window=window)
    run = torch.compile(model, fullgraph=True, dynamic=False) if compiled else model
    gen = torch.Generator().manual_seed(seed + 1)
    vocab = model.config.vocab_size
    token = torch.randint(0, vocab, (batch, 1), generator=gen).to(dev)  # [B, T=1]
    n = PRESETS[preset]["max_cache_len"]  # as many tokens as the cache holds
    tokens = torch.randint(0, vocab, (n, batch), generator=gen)
    tokens[0] = token[:, 0]  # call 0 decodes the tokens the step starts with
    tokens = tokens.to(dev)
    kwargs = {"input_ids": token, cache_argument(model): cache, "use_cache": True}

    @torch.no_grad()
    def step():
        return run(**kwargs).logits

    @torch.no_grad()
    def feed(i: int):  # call i's token, in place: a graph keeps the buffer it captured
        token.copy_(tokens[i % n].view(batch, 1))

    @torch.no_grad()
    def reset():
        cache.reset()  # keys, values and positions zeroed in place: same addresses

    step.reset, step.feed = reset, feed
    step.max_steps = n  # calls from the reset until the cache is full (check --steps to-end)
    step.module = model  # what --module-scopes attributes by (the eager model)
    step.cache = cache
    step.token = token
    return step


def make_compiled_step(preset: str = "small", device: str | None = None, batch: int = 1):
    """`make_step(compiled=True)`: the form --target takes (no arguments, or sweep's batch)."""
    return make_step(compiled=True, preset=preset, device=device, batch=batch)


def make_tiny_step(batch: int = 1):
    """The tiny preset, for tests."""
    return make_step(preset="tiny", batch=batch)


def make_gemma3_step(preset: str = "tiny", window: int = 8, batch: int = 1):
    """A Gemma 3 step (sliding-window layers, `window` tokens; make_step(arch="gemma3")):
    `check --steps to-end` runs it past its window."""
    return make_step(preset=preset, batch=batch, arch="gemma3", window=window)


def make_qwen2_step(preset: str = "small", batch: int = 1, compiled: bool = False):
    """A dense Qwen2 model of the preset's sizes (qwen2_config), eager or compiled."""
    return make_step(compiled=compiled, preset=preset, batch=batch, arch="qwen2")


def make_qwen2_moe_step(preset: str = "small", batch: int = 1, compiled: bool = False):
    """A Qwen2-MoE model of the preset's sizes (qwen2_config), eager or compiled."""
    return make_step(compiled=compiled, preset=preset, batch=batch, arch="qwen2_moe")
