#!/usr/bin/env bash
# The device runs the open issues wait for (58, 59, 61), in parts that each fit one call;
# each part packs its files into $OUT as it ends (a call cut short keeps them):
#   bash benchmarks/pending_gpu.sh tests|watch|moe|checks|predict|predict-compiled|ladder|startup
# tests: the gpu tests whose code changed since session 27's gpu half (the sweep's
#   shared-pool rows and prediction, the recording's tables and delta, the read watch that
#   stays on the stack and sleeps), and the sleeping watch's CPU tests; watch: the read
#   watch's costs (59), device launch's executable at 5,000 nodes measured first in a
#   fresh process (58); moe: the compiled MoE predicted, its traces kept (58); checks: the
#   project's own checks (the HF example, record of generate(), record --check against the
#   plain run; hf and live: its halves); predict*: issue 58 again on every model; ladder:
#   issue 59's time a graph, profiled and timed; startup: issue 59's start-up goals.
set -u; OUT=${OUT:-out}; X=/tmp/x; mkdir -p "$X" "$OUT"
pack() { tar czf "$OUT/x.tgz" -C /tmp x; }
case "${1:?tests, watch, moe, checks (hf, live), predict, predict-compiled, ladder or startup}" in
tests)
  BUDGET=${BUDGET:-420} bash benchmarks/gpu_part.sh a tests/capture/sweep/test_predict_gpu.py \
    tests/capture/sweep/test_sweep.py tests/capture/record/test_step_calls_gpu.py \
    tests/capture/sweep/test_interleaved_gpu.py tests/capture/sweep/test_updated_gpu.py \
    tests/capture/record/test_record_gpu.py tests/capture/record/test_names_gpu.py
  # the sleeping watch's CPU tests, on this torch (dormant.py leans on its private functions)
  timeout 60 python3 -m pytest -q -p no:cacheprovider tests/capture/record/test_dormant_cpu.py \
    tests/capture/record/test_reads_cpu.py > $X/dormant-tests.log 2>&1
  echo "dormant tests rc=$?"; tail -1 $X/dormant-tests.log; pack ;;
moe)
  timeout 200 python3 benchmarks/bench_predict.py --out $X/moe --models qwen2-moe-compiled \
    > $X/moe.log 2>&1; echo "moe rc=$?"; tail -6 $X/moe.log; pack ;;
checks|hf)
  timeout 200 bash benchmarks/hf_runs.sh $X/hf > $X/hf.log 2>&1; echo "hf rc=$?"; pack
  timeout 150 python3 benchmarks/bench_record.py --out $X/rec --parts hf > $X/rec.log 2>&1
  echo "record hf rc=$?"; tail -5 $X/rec.log; pack ;;&
checks|live)
  timeout 280 python3 benchmarks/bench_live.py --out $X/live --parts hf window cost > $X/live.log 2>&1
  echo "live rc=$?"; tail -8 $X/live.log; pack ;;
watch)
  timeout 150 python3 benchmarks/experiments/read_watch_cost.py --layers 8 64 256 --repeats 9 \
    --json $X/read_watch.json > $X/read_watch.log 2>&1; echo "read watch rc=$?"; pack
  timeout 60 python3 benchmarks/experiments/exec_memory.py --nodes 5000 --copies 32 --flags \
    device-launch none --json $X/exec_memory_dl.json > $X/exec_memory_dl.log 2>&1
  echo "device launch first rc=$?"; tail -2 $X/exec_memory_dl.log; pack ;;
predict)
  timeout 500 python3 benchmarks/bench_predict.py --out $X/p --models llama qwen2 qwen2-moe \
    hf-llama > $X/predict.log 2>&1; echo "predict rc=$?"; tail -10 $X/predict.log; pack ;;
predict-compiled)
  timeout 540 python3 benchmarks/bench_predict.py --out $X/pc --models llama-compiled \
    qwen2-moe-compiled > $X/predict-compiled.log 2>&1; echo "rc=$?"; tail -8 $X/predict-compiled.log; pack ;;
ladder)
  # where the recorder's time a graph goes (a profile, alone and recorded), then the
  # ladder's own loop timed alone and recorded; _ab_old: the checkout before, if there
  # (untracked, so it travels: mkdir _ab_old && git archive 12e2a6f graph_harness capture
  # pools kernels reports pyproject.toml | tar -x -C _ab_old)
  timeout 60 python3 benchmarks/experiments/recorder_profile.py --sizes 64 --out $X/prof \
    > $X/prof-alone.log 2>&1; echo "profile alone rc=$?"
  timeout 90 python3 -m graph_harness record -- benchmarks/experiments/recorder_profile.py \
    --sizes 64 --out $X/prof > $X/prof-recorded.log 2>&1; echo "profile recorded rc=$?"; pack
  timeout 300 python3 benchmarks/bench_record_ladder.py --sizes 64 --repeats ${REPEATS:-5} --variants \
    record "record --module-scopes" --json $X/ladder.json > $X/ladder.log 2>&1
  echo "ladder rc=$?"; tail -c 1500 $X/ladder.log; pack
  if [ -d _ab_old ]; then timeout 150 python3 benchmarks/bench_record_ladder.py --sizes 64 \
    --repeats ${REPEATS:-4} --repo _ab_old --json $X/ladder_old.json > $X/ladder_old.log 2>&1
    echo "ladder old rc=$?"; tail -c 600 $X/ladder_old.log; pack; fi ;;
startup)
  timeout 560 python3 benchmarks/bench_record_startup.py --repeats 5 --processes 3 --variants \
    record "record --module-scopes" "record --module-scopes --out --json" "record --no-read-names" \
    --json $X/startup.json > $X/startup.log 2>&1; echo "startup rc=$?"; tail -20 $X/startup.log; pack ;;
esac
