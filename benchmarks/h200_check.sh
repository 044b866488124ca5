#!/usr/bin/env bash
# One device call: install, the whole test suite (gpu tests serially, the rest across CPU
# cores), then the pack timings. Everything goes under $OUT (the device tool's folder),
# full logs included; the summary lines print last.
#   bash benchmarks/h200_check.sh [pack] [replay] [model] [advise] [profile] [recompile]
#     pack:    adds bench_pack --int64-offsets
#     replay:  adds one short replay through the CLI (chains, the shipped and fused rounds)
#     model:   adds bench_model (the example decoder, eager against compiled)
#     advise:  adds bench_advise (the fusion advisor on the round and the example decoder;
#              priced by the replay above too when `replay` is given)
#     profile: adds bench_profile (in-round CUPTI profiles: the round, the decoder)
#     recompile: adds bench_recompile (the example's compiled step captured under module
#              scopes three times, beside a plain compile; compiles counted)
set -u -o pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 COLUMNS=200
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, triton, setuptools; print('torch', torch.__version__, 'triton', triton.__version__, 'setuptools', setuptools.__version__)"
} > "$OUT/env.txt" 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
  || echo "editable install failed (see install.log)" >> "$OUT/env.txt"
start=$(date +%s)
python3 -m pytest -q -m gpu -p no:cacheprovider > "$OUT/pytest-gpu.log" 2>&1
gpu_rc=$?
python3 -m pytest -q -m "not gpu" -n 8 -p no:cacheprovider > "$OUT/pytest-cpu.log" 2>&1
cpu_rc=$?
echo "suite: gpu rc=$gpu_rc, not-gpu rc=$cpu_rc, $(( $(date +%s) - start )) s" >> "$OUT/env.txt"
case " $* " in *" replay "*)
  graph-harness replay --kind triton-empty --lengths 1 16 64 --trials 8 --builds 2 \
    --variant shipped --variant fused --out "$OUT/replay" > "$OUT/replay-tables.txt" \
    2> "$OUT/replay-stderr.txt"
  echo "replay rc=$?" >> "$OUT/env.txt";;
esac
case " $* " in *" advise "*)
  costs=(); [ -f "$OUT/replay/replay.json" ] && costs=(--costs "$OUT/replay/replay.json")
  python3 benchmarks/bench_advise.py --out /tmp/advise ${costs[@]+"${costs[@]}"} \
    > "$OUT/bench-advise.log" 2>&1
  echo "bench_advise rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/advise.tgz" -C /tmp advise;;
esac
case " $* " in *" pack "*)
  python3 benchmarks/bench_pack.py --out "$OUT/pack-offsets.csv" --int64-offsets \
    --placements 5 > "$OUT/bench-pack.log" 2>&1;;
esac
case " $* " in *" model "*)
  python3 benchmarks/bench_model.py --out /tmp/model > "$OUT/bench-model.log" 2>&1
  tar czf "$OUT/model.tgz" -C /tmp model;;  # one file back, whatever the script wrote
esac
case " $* " in *" profile "*)
  python3 benchmarks/bench_profile.py --out /tmp/profile > "$OUT/bench-profile.log" 2>&1
  echo "bench_profile rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/profile.tgz" -C /tmp profile;;
esac
case " $* " in *" recompile "*)
  python3 benchmarks/bench_recompile.py --out "$OUT/recompile" --repeats 2 \
    > "$OUT/bench-recompile.log" 2>&1
  echo "bench_recompile rc=$?" >> "$OUT/env.txt";;
esac
cat "$OUT/env.txt"
grep -E "passed|failed|error" "$OUT/pytest-gpu.log" | tail -3
grep -E "passed|failed|error" "$OUT/pytest-cpu.log" | tail -3
grep -B2 -A30 "^FAILED\|^ERROR" "$OUT/pytest-gpu.log" "$OUT/pytest-cpu.log" | head -80
[ -f "$OUT/bench-pack.log" ] && tail -25 "$OUT/bench-pack.log"
[ -f "$OUT/replay-tables.txt" ] && cat "$OUT/replay-tables.txt" && tail -3 "$OUT/replay-stderr.txt"
[ -f "$OUT/bench-model.log" ] && tail -40 "$OUT/bench-model.log"
[ -f "$OUT/bench-advise.log" ] && tail -60 "$OUT/bench-advise.log"
[ -f /tmp/profile/summary.md ] && cat /tmp/profile/summary.md
[ -f "$OUT/bench-recompile.log" ] && tail -12 "$OUT/bench-recompile.log"
exit 0
