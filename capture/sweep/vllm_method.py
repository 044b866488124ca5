"""vLLM's own estimate of its CUDA graphs' memory, implemented here from its code and
labelled as such: "vLLM's method (as described in vllm/v1/worker/gpu_model_runner.py,
GPUModelRunner.profile_cudagraph_memory)", vllm-project/vllm #30515; its arithmetic is
quoted in #45178 and #45197. The first two capture sizes (largest first) are captured into
a temporary pool, the free memory each took read, and
`estimate = first + max(second, 1 MiB) * (n - 1)`; across modes, the largest `first`
plus every mode's `(n - 1)` part. The sweep's shared stage reads exactly those two
(shared.py `free_drop`); docs/sweep.md says more. Plain arithmetic."""

from __future__ import annotations

from collections.abc import Sequence

from .truth import SharedRow

MIB = 1 << 20
LABEL = "vLLM's method (profile_cudagraph_memory)"


def vllm_estimate(first: int, second: int | None, graphs: int) -> int:
    """vLLM's estimate for `graphs` sizes from the free memory its first two captures
    took (`second` None: one size sampled, as vLLM's `descs[:2]` gives for one size)."""
    if graphs < 1:
        raise ValueError(f"a ladder of {graphs} sizes: vLLM's estimate needs one at least")
    per_graph = max(second if second is not None else 0, MIB)
    return first + per_graph * (graphs - 1)


def vllm_for_ladder(
    ladder: Sequence[int], shared: Sequence[SharedRow] | None
) -> tuple[int | None, str | None]:
    """vLLM's estimate for `ladder` from a sweep's shared-pool rows (capture order), or
    None and why: its samples are the ladder's two largest sizes, captured first."""
    order = sorted(ladder, reverse=True)
    want = order[:2]
    rows = list(shared or [])[: len(want)]
    got = [r.batch for r in rows]
    if got != want or any(r.free_drop is None for r in rows):
        return None, (
            f"vLLM's method samples the ladder's largest sizes {want} captured first into a "
            f"fresh pool; this sweep's shared pool began with {got or 'none'}"
            + ("" if got == want else f": sweep --sizes with {' and '.join(map(str, want))}")
        )
    drops = [r.free_drop for r in rows if r.free_drop is not None]
    return vllm_estimate(drops[0], drops[1] if len(drops) > 1 else None, len(order)), None
