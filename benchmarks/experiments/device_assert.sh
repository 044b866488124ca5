#!/usr/bin/env bash
# Issue 57, item 2, on a GPU: `check --steps to-end` of the Gemma 3 step past its sliding
# window (examples/hf_decode.py make_gemma3_step: did it abort with a core dump, or end in
# one line naming the call?), and what locating the call costs (benchmarks/bench_marks.py).
# Should it abort: Python's stack at the signal (faulthandler, into its own file) and what
# stderr held in the window (progress.py keeps it in graph-harness-held-stderr-*).
#   bash benchmarks/experiments/device_assert.sh DIR
set -u
export PYTHONUNBUFFERED=1
E=${1:-/tmp/device_assert}; mkdir -p "$E"; T=$(mktemp -d); export TMPDIR=$T
timeout 150 python3 -c "
import faulthandler, runpy, sys
faulthandler.enable(open('$E/fault.txt', 'w'), all_threads=True)
sys.argv = ['graph-harness', 'check', '--target', 'examples/hf_decode.py:make_gemma3_step', '--steps', 'to-end']
runpy.run_module('graph_harness', run_name='__main__')
" > "$E/gemma.out" 2> "$E/gemma.err"; echo "gemma rc=$?" >> "$E/rc.txt"
cat "$T"/graph-harness-held-stderr-* > "$E/held.txt" 2>/dev/null
timeout 60 python3 benchmarks/bench_marks.py --json "$E/marks.json" > "$E/marks.log" 2>&1
echo "marks rc=$?" >> "$E/rc.txt"
cat "$E/rc.txt"; tail -c 1500 "$E/gemma.err"; tail -c 1500 "$E/gemma.out"
echo "--- held stderr"; tail -c 2500 "$E/held.txt"; echo "--- fault"; head -c 3000 "$E/fault.txt"
