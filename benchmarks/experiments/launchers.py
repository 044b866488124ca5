# Same fused kernel binary, four launch paths, in a captured graph: is the last 1% at
# 1 x 48 the launch path? Triton's launcher (cuLaunchKernelEx, no attributes), torch's
# static launcher (what Inductor uses), and cuda-bindings cuLaunchKernel / cuLaunchKernelEx.
import ctypes
import os
import sys

sys.path.insert(0, ".")
import torch
import triton
from cuda.bindings import driver as drv

from graph_harness.capture.replay.timing import Quantiles, capture_unrolled, time_replays_us
from graph_harness.kernels import pack_scores_ids_shipped
from graph_harness.kernels.pack import _pack_flat_kernel

OUT = os.environ.get("OUT", "/tmp/out")
CT = {
    "O": ctypes.c_void_p,
    "i": ctypes.c_int32,
    "l": ctypes.c_int64,
    "I": ctypes.c_uint32,
    "K": ctypes.c_uint64,
}


def main():
    from torch._inductor.runtime.static_triton_launcher import StaticallyLaunchedCudaKernel

    def measure(rows, k, block, warps):
        width, n = 8192, rows * k
        idx = torch.randint(0, width, (rows, k), device="cuda")
        idx[torch.rand(rows, k, device="cuda") < 0.1] = -1
        sc = torch.randn(rows, k, device="cuda")
        rank = torch.tensor(3, dtype=torch.int32, device="cuda")
        names = ["compiled", "triton", "static", "cu-launch", "cu-launch-ex"]
        outs = {m: torch.full((rows, k, 2), float("nan"), device="cuda") for m in names}
        pairs = {m: outs[m].view(torch.int64).squeeze(-1) for m in names}
        grid = (triton.cdiv(n, block),)
        jf = _pack_flat_kernel.compiled
        kw = dict(RANK_FROM_MEMORY=True, BLOCK=block, USE_PDL=False, num_warps=warps)
        ck = jf.warmup(idx, sc, rank, pairs["triton"], 0, width, n, grid=grid, **kw)
        ck._init_handles()
        ck._cubin_path = None  # Inductor sets this when it writes the cubin
        sk = StaticallyLaunchedCudaKernel(ck)
        if getattr(sk, "cubin_path", None) is None:
            sk.reload_cubin_from_raw(f"/tmp/static_{rows}x{k}_{warps}.cubin")
        sk.load_kernel(torch.cuda.current_device())
        tys = sk.arg_tys + "O" * (int(sk.has_global_scratch) + int(sk.has_profile_scratch))
        print(
            f"{rows}x{k} B{block} w{warps}: arg_tys {sk.arg_tys} global {sk.has_global_scratch} "
            f"profile {sk.has_profile_scratch} shared {sk.shared} fn {ck.function}",
            flush=True,
        )
        compiled = torch.compile(pack_scores_ids_shipped, fullgraph=True, dynamic=False)

        def vals(m):
            base = [
                idx.data_ptr(),
                sc.data_ptr(),
                rank.data_ptr(),
                pairs[m].data_ptr(),
                0,
                width,
                n,
            ]
            assert sk.arg_tys == "OOOOiii", sk.arg_tys  # no argument specialised away
            base += [0] * (len(tys) - len(base))
            return tuple(base), tuple(CT[t] for t in tys)

        def stream():
            return torch.cuda.current_stream().cuda_stream

        def cu(m):
            p = vals(m)
            (err,) = drv.cuLaunchKernel(
                ck.function, grid[0], 1, 1, 32 * warps, 1, 1, ck.metadata.shared, stream(), p, 0
            )
            assert int(err) == 0, err

        def cu_ex(m):
            cfg = drv.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid[0], 1, 1
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32 * warps, 1, 1
            cfg.sharedMemBytes = ck.metadata.shared
            cfg.hStream = stream()
            cfg.numAttrs = 0
            (err,) = drv.cuLaunchKernelEx(cfg, ck.function, vals(m), 0)
            assert int(err) == 0, err

        fns = {
            "compiled": lambda: compiled(idx, sc, rank, width, outs["compiled"]),
            "triton": lambda: jf[grid](idx, sc, rank, pairs["triton"], 0, width, n, **kw),
            "static": lambda: sk.run(
                grid[0], 1, 1, stream(), idx, sc, rank, pairs["static"], 0, width, n
            ),
            "cu-launch": lambda: cu("cu-launch"),
            "cu-launch-ex": lambda: cu_ex("cu-launch-ex"),
        }
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        ref = outs["compiled"].view(torch.int32)
        for m in names:
            print(f"  {m} bit-equal {torch.equal(outs[m].view(torch.int32), ref)}", flush=True)
        gs = {m: capture_unrolled(f, 200) for m, f in fns.items()}
        for rep in range(3):
            t = time_replays_us(gs, replays=10, trials=41)
            print(
                f"  rep{rep} "
                + "  ".join(
                    f"{m}={Quantiles.of([x / 200 for x in v]).median:.4f}" for m, v in t.items()
                ),
                flush=True,
            )

    for shape in [
        (1, 48, 64, 2),
        (1, 48, 64, 1),
        (8, 2048, 256, 4),
        (256, 2048, 256, 4),
    ]:
        measure(*shape)


if __name__ == "__main__":
    main()
