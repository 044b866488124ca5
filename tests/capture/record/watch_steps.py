"""Steps of many small operators run under the read watch, shared by its CPU tests
(test_reads_cpu.py, test_dormant_cpu.py), and the check that nothing of it is left."""

import torch

from graph_harness.capture.record.reads_mode import RegionWatch


def watched(fn, **kw):
    """`fn()` under a watch (`kw`: RegionWatch's): its result, reads and closing note."""
    watch = RegionWatch(**kw)
    watch.start()
    try:
        out = fn()
    finally:
        note = watch.stop()
    return out, watch.reads, note


def chain(x: torch.Tensor, n: int) -> torch.Tensor:
    for _ in range(n):
        x = x * 1.0001
    return x


def _one(x: torch.Tensor) -> torch.Tensor:
    return x * 1.0001


def step_by_step(x: torch.Tensor, n: int) -> torch.Tensor:
    """`chain`, with a Python call between operators (where a hook of any kind runs)."""
    for _ in range(n):
        x = _one(x)
    return x


def flags() -> tuple:
    from torch.utils import _python_dispatch as pd

    return (pd._is_in_torch_dispatch_mode, pd._is_in_non_infra_torch_dispatch_mode,
            pd._is_in_any_mode_without_ignore_compile_internals)  # fmt: skip


def clean() -> None:
    """Nothing of the watch left: no mode, the modes' flags as before any, no Python
    dispatch key left on (a factory operator would hit it with no mode to take it), torch's
    routes unwrapped (dormant.py)."""
    import torch.utils._python_dispatch as pd

    assert torch._C._len_torch_dispatch_stack() == 0
    assert flags() == (False, False, False), flags()
    assert not torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.Python)
    assert torch.equal(torch.zeros(2), torch.tensor([0.0, 0.0]))
    for route in (pd._push_on_torch_dispatch_stack, torch._C._set_dispatch_mode,
                  torch._ops._compute_keyset):  # fmt: skip
        assert not hasattr(route, "__wrapped__"), route
