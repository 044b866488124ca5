"""The llama example (examples/llama_decode.py) at any batch size, clean or with a workspace
defect planted, for `sweep --check interleaved` (BENCHMARKS.md, issue 42):

    graph-harness sweep --target benchmarks/targets/llama_workspace.py:clean \
        --sizes 1 2 4 8 16 --check interleaved
    graph-harness sweep --target benchmarks/targets/llama_workspace.py:planted \
        --sizes 1 2 4 8 16 --check interleaved

- `clean(batch)`: the example's step; every size owns its KV caches.
- `planted(batch)`: the same step, its KV caches carved from one module-level workspace
  that is carved again from its start for every size built: a size built after a larger
  one is handed rows the larger size's graph still reads and writes. It is the defect of
  a workspace re-allocated after a larger size was captured (NVIDIA/TensorRT-LLM #16319)
  made deterministic: a real allocator hands freed memory on only when nothing else
  asked first. Each size alone is right (its own `--check` passes); taking turns, a
  smaller size's reset and calls write into a larger size's cache between two of its
  calls.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
PRESET = "small"


def _example():
    name = "llama_decode_workspace"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "llama_decode.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # its dataclass looks the module up there
        spec.loader.exec_module(mod)
    return sys.modules[name]


def clean(batch: int = 1):
    return _example().make_step(preset=PRESET, batch=batch)


_WORKSPACE: dict[str, torch.Tensor] = {}


def planted(batch: int = 1):
    """The example's step, its caches carved from the shared workspace (module docstring)."""
    step = _example().make_step(preset=PRESET, batch=batch)
    caches = [layer.attention.kv_cache for layer in step.module.layers]
    first = caches[0].k_cache
    need = 2 * len(caches) * first.numel()
    ws = _WORKSPACE.get("buf")
    if ws is None or ws.numel() < need or ws.dtype != first.dtype:  # grown, else carved again
        ws = _WORKSPACE["buf"] = torch.zeros(need, dtype=first.dtype, device=first.device)
    at = 0
    for kv in caches:
        for name in ("k_cache", "v_cache"):
            t = getattr(kv, name)
            setattr(kv, name, ws[at : at + t.numel()].view(t.shape))  # the buffer rebound
            at += t.numel()
    step.reset()  # the carved caches zeroed, as the step's own were
    return step
