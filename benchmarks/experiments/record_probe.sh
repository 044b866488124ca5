#!/usr/bin/env bash
# Development probe for graph-harness record on the H200 (one device call): the record
# GPU tests, HF generate recorded through the CLI, the llama example's reduce-overhead
# step counted. Logs under $OUT, one tarball.
set -u
OUT=${OUT:-out}; mkdir -p "$OUT/p"
export PYTHONUNBUFFERED=1 COLUMNS=200
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/p/install.log" 2>&1
python3 -c "import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)" > "$OUT/p/env.txt" 2>&1
timeout 300 python3 -m pytest -q -x -m gpu tests/capture/record -p no:cacheprovider > "$OUT/p/pytest-record.log" 2>&1
echo "pytest rc=$?" >> "$OUT/p/env.txt"
timeout 150 graph-harness record --module-scopes --out /tmp/hfrec -- examples/hf_generate.py --new-tokens 12 --stats /tmp/hfstats.json > "$OUT/p/hf-record.txt" 2> "$OUT/p/hf-record.err"
echo "hf record rc=$?" >> "$OUT/p/env.txt"
cp /tmp/hfstats.json "$OUT/p/" 2>/dev/null
timeout 120 graph-harness count --target examples/llama_decode.py:make_reduce_overhead_step --module-scopes > "$OUT/p/llama-ro.txt" 2> "$OUT/p/llama-ro.err"
echo "llama ro rc=$?" >> "$OUT/p/env.txt"
tar czf "$OUT/p/hfrec.tgz" -C /tmp hfrec 2>/dev/null
cat "$OUT/p/env.txt"; tail -30 "$OUT/p/pytest-record.log"; tail -25 "$OUT/p/hf-record.txt"; tail -8 "$OUT/p/hf-record.err"; tail -30 "$OUT/p/llama-ro.txt"; tail -5 "$OUT/p/llama-ro.err"
(cd "$OUT" && tar czf probe.tgz p && rm -rf p)
