#!/usr/bin/env bash
# One device call of session 26 (scarce device time): the gpu tests whose code changed
# since the last whole gpu half, issue 59's read-watch cost and issue 58's prediction.
# Each step's files are packed as it ends: a call cut short keeps what ran.
set -u; OUT=${OUT:-out}; X=/tmp/x; mkdir -p "$X"
BUDGET=180 bash benchmarks/gpu_part.sh a tests/capture/graph/test_exec_size.py \
  tests/capture/sweep/test_predict_gpu.py tests/capture/live/test_live_gpu.py \
  tests/capture/record/test_record_gpu.py tests/capture/record/test_names_gpu.py
timeout 55 python3 benchmarks/experiments/read_watch_cost.py --layers 8 64 256 --repeats 7 \
  --json $X/read_watch.json > $X/read_watch.log 2>&1; echo "read watch rc=$?"; cut -c1-300 $X/read_watch.log
tar czf "$OUT/x.tgz" -C /tmp x
timeout 100 python3 benchmarks/bench_predict.py --out $X/p --models llama qwen2-moe \
  > $X/predict.log 2>&1; echo "predict rc=$?"; tail -8 $X/predict.log
tar czf "$OUT/x.tgz" -C /tmp x
