"""capture/replay/progress.py on the CPU: stderr's file descriptor held while a window runs
and written back whole, the device assertions' conditions read from it. (Marks count on
the device: tests/capture/check/test_device_assert_gpu.py.)"""

from __future__ import annotations

import subprocess
import sys

from graph_harness.capture.replay.progress import assertions

LINE = (
    "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:{t}: operator(): block: [0,0,0], "
    'thread: [{t},0,0] Assertion `idx >= 0 && idx < self_dim_size && "index_copy_(): index '
    'out of bounds"` failed.\n'
)


def test_assertions_are_read_once_each_in_order():
    text = "".join(LINE.format(t=t) for t in range(40)) + "other Assertion `x > 0` failed.\n"
    assert assertions(text) == [
        'idx >= 0 && idx < self_dim_size && "index_copy_(): index out of bounds"',
        "x > 0",
    ]
    assert assertions("CUDA error: device-side assert triggered") == []


HELD = r"""
import os, sys
from graph_harness.capture.replay.progress import held_stderr
big = open(sys.argv[1], "rb").read()
print("before", file=sys.stderr, flush=True)
with held_stderr() as said:
    os.write(2, big)  # as the driver writes: to the descriptor, not through sys.stderr
    print("python's own", file=sys.stderr)
    os.write(1, b"not held\n")
print("said", said, flush=True)
print("after", file=sys.stderr, flush=True)
"""


def test_held_stderr_writes_everything_back_in_order(tmp_path):
    big = tmp_path / "printed"
    big.write_text(LINE.format(t=7) * 3000)  # more than a pipe holds: a file, no deadlock
    r = subprocess.run(
        [sys.executable, "-c", HELD, str(big)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr[-2000:]
    err = r.stderr
    assert err.startswith("before\n") and err.endswith("python's own\nafter\n"), err[-300:]
    assert err.count("Assertion `") == 3000
    assert r.stdout.startswith("not held\nsaid ") and "index out of bounds" in r.stdout
