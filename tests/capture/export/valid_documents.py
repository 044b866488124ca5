"""Valid documents, small and written by hand, for tests to read or to edit into bad ones:
an export as versions 1, 2 and 3 write it, and a version-2 replay document."""


def node(i, type_, kernel, stage, step, deps, **extra):
    return dict(
        index=i,
        type=type_,
        kernel=kernel,
        grid=[1, 1, 1] if type_ == "kernel" else None,
        block=[128, 1, 1] if type_ == "kernel" else None,
        stage=stage,
        step=step,
        deps=deps,
        parent=None,
        **extra,
    )


def export_doc():
    """A valid export: three launching nodes and one view."""
    return {
        "schema": "graph-harness/nodes",
        "schema_version": 1,
        "source": "cuda-graph",
        "workload": "decode-round",
        "variant": "fused",
        "params": {"stages": 1, "rows": 2, "k": 4, "world": 2, "rank": 0, "shard": 8, "seed": 0},
        "rank": 0,
        "options": {"pdl": False, "distributed": False},
        "env": {"torch": "2.13.0", "device": "NVIDIA H200", "triton": None},
        "created": "2026-12-01T00:00:00+00:00",
        "total_nodes": 3,
        "nodes": [
            node(0, "kernel", "topk_kernel", 0, "topk", []),
            node(1, "kernel", "_pack_flat_kernel", 0, "pack", [0], programmatic_deps=[0]),
            node(2, "view", "aten::view", 0, "select", [1]),
            node(3, "memcpy", None, 0, "copy", [1]),
        ],
    }


def export_doc_v2():
    """The same export as version 2 writes it: nested scope columns on every node."""
    doc = dict(export_doc(), schema_version=2)
    doc["nodes"] = [
        dict(n, scope=f"stage0/{n['step']}", scope_path=["layers", f"stage0/{n['step']}"])
        for n in doc["nodes"]
    ]
    return doc


def export_doc_v3():
    """The same export as version 3 writes it for a step: its capture's settings in options."""
    doc = dict(export_doc_v2(), schema_version=3, workload="llama_decode.py:make_step")
    doc["variant"] = doc["params"] = None
    doc["options"] = {
        "compiled": True,
        "warmup": 3,
        "module_depth": "every level",
        "blocks": "model.layers",
        "block_depth": 3,
        "target": "examples/llama_decode.py:make_step",
        "compiled_attribution": "inductor provenance of 1 compiled graphs",
    }
    return doc


def replay_doc():
    """A valid version-2 replay document."""
    chain = [
        dict(kind="torch-add", calls=n, nodes=n, trial=t, us=1.0 + 0.9 * n + 0.01 * t)
        for n in (1, 8)
        for t in range(2)
    ]
    fit = dict(
        kind="torch-add",
        slope=0.9,
        intercept=1.0,
        slope_lo=0.85,
        slope_hi=0.95,
        intercept_lo=0.9,
        intercept_hi=1.1,
        r2=0.999,
        points=4,
    )
    rounds = [
        dict(variant=v, build=b, trial=t, us=100.0 - 10 * (v == "fused") + t)
        for v in ("shipped", "fused")
        for b in range(2)
        for t in range(2)
    ]
    saving = dict(
        a="shipped",
        b="fused",
        removed_nodes=12,
        removed_by_type='{"kernel": 10, "memcpy": 2}',
        round_a_us=100.5,
        round_b_us=90.5,
        measured_us=10.0,
        measured_lo=9.5,
        measured_hi=10.5,
        predicted_us=10.8,
        ratio=10.0 / 10.8,
        predicted_shapes_us=float("nan"),
        ratio_shapes=float("nan"),
    )
    return {
        "schema": "graph-harness/replay",
        "schema_version": 2,
        "env": {"torch": "2.13.0", "device": "NVIDIA H200"},
        "created": "2026-12-01T00:00:00+00:00",
        "params": {"stages": 1, "rows": 2},
        "options": {"pdl": False, "builds": 2},
        "chain_trials": chain,
        "fits": [fit],
        "round_trials": rounds,
        "savings": [saving],
    }
