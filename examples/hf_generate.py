"""Hugging Face `generate()` with a static cache, as a program to record: nothing here
knows of graph-harness.

    graph-harness record --module-scopes -- examples/hf_generate.py --new-tokens 16

The model is examples/hf_decode.py's (`LlamaForCausalLM` from a config, random weights, no
download). `generate(..., cache_implementation="static")` on CUDA compiles the model's
forward by itself, with `CompileConfig`'s default mode, "reduce-overhead": Inductor's
cudagraph trees capture and replay the decode steps' graphs. Every sequence is made to
generate exactly `--new-tokens` tokens (min = max), so the decode steps are known: the
first token comes from the prefill, each of the others from one decode step.
`--stats FILE` writes that account (and the tokens' checksum and the tokens) as JSON.

`--arch gemma3` takes a Gemma 3 text model instead (from a config, random weights), its
layers alternating sliding-window attention (window `--window`) and full attention:
generating past the window exercises the static cache's sliding layers. `--no-compile`
runs generate() eagerly (`disable_compile`: no graphs), the independent route its tokens
are compared against; `--dtype float32` takes the weights in fp32 (bf16 on CUDA otherwise).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch


def _hf_decode():
    path = Path(__file__).resolve().parent / "hf_decode.py"
    spec = importlib.util.spec_from_file_location("hf_decode_example", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small", choices=["small", "tiny"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=8, help="prompt length in tokens")
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--runs", type=int, default=1, help="generate() calls, one after another")
    ap.add_argument("--stats", help="write the decode steps and a checksum here (JSON)")
    ap.add_argument("--arch", default="llama", choices=["llama", "gemma3"])
    ap.add_argument("--window", type=int, default=8, help="gemma3: the sliding window")
    ap.add_argument("--no-compile", action="store_true", help="generate eagerly, no graphs")
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default=None)
    args = ap.parse_args(argv)
    hf = _hf_decode()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg, max_cache_len = hf.config_of(args.preset, args.arch, args.window)
    default = torch.bfloat16 if device.type == "cuda" else torch.float32
    dtype = getattr(torch, args.dtype) if args.dtype else default
    torch.manual_seed(0)
    model = hf.model_class(args.arch)(cfg).to(device=device, dtype=dtype).eval()
    model.generation_config.pad_token_id = 0
    prompt = torch.randint(1, cfg.vocab_size, (args.batch, args.prompt), device=device)
    tokens = None
    for _ in range(args.runs):
        tokens = model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=args.new_tokens,
            min_new_tokens=args.new_tokens,
            do_sample=False,
            cache_implementation="static",
            disable_compile=args.no_compile,
        )
    new = tokens.shape[1] - args.prompt
    print(f"hf generate: {args.runs} x {new} new tokens, batch {args.batch}")
    if args.stats:
        doc = {
            "runs": args.runs,
            "new_tokens": new,
            "decode_steps_per_run": new - 1,
            "checksum": int(tokens.sum()),
            "max_cache_len": max_cache_len,
            "tokens": tokens[:, args.prompt :].tolist(),
        }
        Path(args.stats).write_text(json.dumps(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
