#!/usr/bin/env bash
# A short probe on the H200 (one device call): the record GPU tests of module scopes, and
# bench_record's HF part. Logs under $OUT, one tarball.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT/p"
export PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/p/install.log" 2>&1
timeout 90 python3 -m pytest -q -m gpu tests/capture/record -k "nobody_named" -p no:cacheprovider > "$OUT/p/pytest-record.log" 2>&1
echo "pytest rc=$?" >> "$OUT/p/env.txt"
timeout 45 python3 benchmarks/bench_record.py --out /tmp/bench --parts hf > "$OUT/p/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/p/env.txt"
cp -r /tmp/bench "$OUT/p/" 2>/dev/null
cat "$OUT/p/env.txt"; grep -E "passed|failed|^FAILED|^E " "$OUT/p/pytest-record.log" | head -20; grep -E "compiled_attribution|scope|provenance" "$OUT/p/bench.log" | head -20
(cd "$OUT" && tar czf probe.tgz p && rm -rf p)
