#!/usr/bin/env bash
# Development probe for graph-harness record on the H200 (one device call). Logs under
# $OUT, one tarball.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT/p"
export PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/p/install.log" 2>&1
timeout 240 python3 -m pytest -q -m gpu tests/capture/record -p no:cacheprovider > "$OUT/p/pytest-record.log" 2>&1
echo "pytest rc=$?" >> "$OUT/p/env.txt"
timeout 100 graph-harness count --target examples/llama_decode.py:make_reduce_overhead_step --module-scopes > "$OUT/p/llama-ro.txt" 2> "$OUT/p/llama-ro.err"
echo "llama ro rc=$?" >> "$OUT/p/env.txt"
timeout 240 python3 benchmarks/bench_record.py --out /tmp/bench --parts ${PARTS:-hf engine overhead llama} > "$OUT/p/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/p/env.txt"
cp -r /tmp/bench "$OUT/p/" 2>/dev/null
cat "$OUT/p/env.txt"; grep -E "passed|failed|^FAILED|^E " "$OUT/p/pytest-record.log" | head -30; tail -12 "$OUT/p/llama-ro.txt"; tail -5 "$OUT/p/llama-ro.err"; tail -80 "$OUT/p/bench.log"
(cd "$OUT" && tar czf probe.tgz p && rm -rf p)
