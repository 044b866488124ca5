"""What the delta tests compare, made by hand: kernel names of four families, exports built
from them, and chain costs whose slopes are set here, so that every expected figure is
worked out by hand."""

from __future__ import annotations

from graph_harness.capture.advise.costs import Costs
from graph_harness.capture.export.nodes import NodeExport

GEMM = "_Z17cublasLt_gemm_kernelv"  # cuBLAS family by name
NVJET = "nvjet_tst_128x64_64x4_1x2_h_bz_TNT"
ADD = "_ZN2at6native29vectorized_elementwise_kernelILi4EEEvv"
TRITON = "triton_poi_fused_add_0"


def export(kernels: list[str], key: str, memcpy: int = 0) -> NodeExport:
    kinds = [("kernel", k) for k in kernels] + [("memcpy", "")] * memcpy
    nodes = [
        {
            "index": i, "type": t, "kernel": k, "grid": None, "block": None, "stage": None,
            "step": "unscoped", "scope": "unscoped", "scope_path": [],
            "deps": [i - 1] if i else [], "parent": None,
        }
        for i, (t, k) in enumerate(kinds)
    ]  # fmt: skip
    return NodeExport(
        source="cuda-graph", workload=key, variant=None, params=None, nodes=nodes,
        env={"device": "test"}, created="now", options={"recorded": True, "module_depth": None},
    )  # fmt: skip


COSTS = Costs(
    label="test costs",
    slopes={"torch-add": (2.0, 1.9, 2.1), "memcpy": (3.0, 2.9, 3.1), "memset": (5.0, 4.9, 5.1)},
)
