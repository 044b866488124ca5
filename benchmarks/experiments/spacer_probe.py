"""Where a 32 MiB chunk lands build after build behind spacers of each design: the round's
builds (capture/round/timing.py) exist to put its buffers at new addresses, and one design
that looked right on paper did not (session 20: the round's first chunk at one address in
all three builds).

    python benchmarks/experiments/spacer_probe.py --out DIR     (needs a GPU)

Each design runs in a fresh process, plain or after dirtying the allocator and the driver
with allocations of assorted sizes. A build returns the cache to the driver, allocates the
design's spacers, then two 32 MiB chunks (the shipped and fused rounds' first chunks), and
records their addresses. Writes DIR/spacers.json: {design: {"clean"|"dirty": [[a, b], ...]}}.

Session 20 on the H200: under every design, clean or dirty, both chunks sat at one address
in all six builds (docs/data/suite-2026-12-03c/spacers.json), so the round's builds now
hold every earlier build's memory instead.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

MiB = 1 << 20


def spacers(design: str, b: int) -> list[int]:
    if design == "none":
        return []
    if design == "segment20":  # session 19's: under 10 MiB, so a 20 MiB segment each build
        return [(2 * b + 2) << 20 | 4096 * 37 * b, 4096 * (1 + 37 * b % 255)]
    if design == "exact":  # 10 MiB and over: a segment of its own, of its own size
        return [(10 + 2 * (b % 64)) * MiB, 4096 * (1 + 37 * b % 255)]
    raise SystemExit(f"unknown design {design!r}")


def one(design: str, dirty: bool, builds: int) -> list[list[int]]:
    keep = []
    if dirty:  # what ran before in the process: assorted sizes, some kept, most freed
        junk = [
            torch.empty(s, dtype=torch.uint8, device="cuda")
            for s in (3 * MiB, 40 * MiB, 7 * MiB, 300_000, 64 * MiB, 12 * MiB)
        ]
        keep = junk[1::3]
        del junk
    out = []
    for b in range(builds):
        torch.cuda.empty_cache()
        sp = [torch.empty(s, dtype=torch.uint8, device="cuda") for s in spacers(design, b)]
        chunks = [torch.empty(32 * MiB, dtype=torch.uint8, device="cuda") for _ in range(2)]
        out.append([c.data_ptr() for c in chunks])
        del sp, chunks
    del keep
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--one", nargs=2, metavar=("DESIGN", "DIRTY"))
    ap.add_argument("--builds", type=int, default=6)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1] == "dirty", a.builds)))
        return
    res = {}
    for design in ("none", "segment20", "exact"):
        for state in ("clean", "dirty"):
            got = subprocess.run(
                [sys.executable, __file__, "--one", design, state, "--builds", str(a.builds)],
                capture_output=True,
                text=True,
                check=True,
            )
            res.setdefault(design, {})[state] = json.loads(got.stdout)
            firsts = [p[0] for p in res[design][state]]
            print(design, state, "distinct first chunks:", len(set(firsts)), "of", len(firsts))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "spacers.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
