#!/usr/bin/env bash
# Issue 57, item 2, on a GPU: `check --steps to-end` of the Gemma 3 step past its sliding
# window (examples/hf_decode.py make_gemma3_step: did it abort with a core dump, or end in
# one line naming the call?), and what locating the call costs (benchmarks/bench_marks.py).
#   bash benchmarks/experiments/device_assert.sh DIR
set -u
export PYTHONUNBUFFERED=1
E=${1:-/tmp/device_assert}; mkdir -p "$E"
timeout 120 python3 -m graph_harness check --target examples/hf_decode.py:make_gemma3_step \
  --steps to-end > "$E/gemma.out" 2> "$E/gemma.err"; echo "gemma rc=$?" >> "$E/rc.txt"
timeout 60 python3 benchmarks/bench_marks.py --json "$E/marks.json" > "$E/marks.log" 2>&1
echo "marks rc=$?" >> "$E/rc.txt"
cat "$E/rc.txt"; tail -c 1500 "$E/gemma.err"; tail -c 1500 "$E/gemma.out"; tail -20 "$E/marks.log"
