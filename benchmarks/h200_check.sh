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
#     hf:      the Hugging Face example (examples/hf_decode.py) and the llama example, eager
#              and compiled: count by module, delta, check, profile, report; the HF step
#              without its reset through profile (refused in one line); all under hf.tgz
#     seed:    benchmarks/experiments/seed_inductor.py (the shipped pack's nodes per call
#              under each pattern)
#     nosuite: skip the test suite (benchmark-only calls)
#     gpuonly: the gpu tests only (not the rest across CPU cores)
#     cpuonly: the rest only (not the gpu tests), across CPU cores
#     together: the gpu tests and the rest at the same time (the whole suite in one call)
#     cupti:   adds bench_cupti (profile raw and net of the profiler: the round, the llama
#              and HF examples and gpt-fast's model, eager against compiled), cupti.tgz
#     report:  adds `graph-harness report --out` on the defaults (the round's report.md,
#              its seed section and bit-exactness matrix among it), under report.tgz
#     check:   adds bench_check (check over a trajectory against one step: the HF and llama
#              examples, eager and compiled, fed; three steps broken on purpose)
#     sweep:   adds bench_sweep (the HF and llama examples, eager and compiled, at batch 1 to
#              256: own and shared pools, ladders for two request distributions, the
#              sweep's wall time against capturing by hand), under sweep.tgz
#     record:  adds bench_record (HF generate recorded against an independent walk, the
#              llama example with reduce-overhead at three sizes, the engine-like runner,
#              the recorder's overhead), under record.tgz
#     stepcalls: adds the llama example compiled with reduce-overhead, profiled call by call
#              against the same step compiled in the default mode and captured by
#              graph-harness (a priced pair), and swept at three sizes, under stepcalls.tgz
#     dot:     benchmarks/experiments/dot_probe.py (real cudaGraphDebugDotPrint dumps of every
#              node kind under each flag, beside an independent walk), under dot.tgz
#     host:    adds bench_host (the host side of a launch per node, three graph shapes,
#              against the device side), under host.tgz
#     launch:  adds bench_launch (exposure on the examples at batch 1 and 64, a removal where
#              the launch is exposed, each example's life, the sweep's memory against the
#              estimators; $LAUNCH_ARGS passed on, e.g. "--parts life"), under launch.tgz
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
case " $* " in *" together "*)
  # Both halves at once, to fit one call: the rest hide CUDA (tests/conftest.py makes a
  # run that selects no gpu test a CPU run), so only the gpu tests use the GPU; they keep
  # 8 of the 16 cores; each its own temporary folder.
  python3 -m pytest -q -m "not gpu" -n 8 -p no:cacheprovider --basetemp=/tmp/pt-cpu \
    > "$OUT/pytest-cpu.log" 2>&1 &
  cpu_pid=$!
  python3 -m pytest -q -m gpu -p no:cacheprovider --basetemp=/tmp/pt-gpu \
    > "$OUT/pytest-gpu.log" 2>&1
  gpu_rc=$?
  wait $cpu_pid; cpu_rc=$?
  echo "suite (together): gpu rc=$gpu_rc, not-gpu rc=$cpu_rc, $(( $(date +%s) - start )) s" \
    >> "$OUT/env.txt";;
esac
case " $* " in *" nosuite "*|*" together "*) ;; *)
  gpu_rc=skipped
  case " $* " in *" cpuonly "*) ;; *)
    python3 -m pytest -q -m gpu -p no:cacheprovider > "$OUT/pytest-gpu.log" 2>&1
    gpu_rc=$?;;
  esac
  cpu_rc=skipped
  case " $* " in *" gpuonly "*) ;; *)
    python3 -m pytest -q -m "not gpu" -n 8 -p no:cacheprovider > "$OUT/pytest-cpu.log" 2>&1
    cpu_rc=$?;;
  esac
  echo "suite: gpu rc=$gpu_rc, not-gpu rc=$cpu_rc, $(( $(date +%s) - start )) s" >> "$OUT/env.txt";;
esac
case " $* " in *" dot "*)
  python3 benchmarks/experiments/dot_probe.py --out /tmp/dot > "$OUT/dot.log" 2>&1
  echo "dot_probe rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/dot.tgz" -C /tmp dot;;
esac
case " $* " in *" stepcalls "*)
  sc=/tmp/stepcalls; mkdir -p $sc; ex=examples/llama_decode.py
  timeout 240 graph-harness profile --target $ex:make_compiled_step \
    --target $ex:make_reduce_overhead_step --module-scopes --out $sc/profile \
    > $sc/profile.txt 2> $sc/profile-stderr.txt
  echo "stepcalls profile rc=$?" >> "$OUT/env.txt"
  timeout 240 graph-harness sweep --target $ex:make_reduce_overhead_step --sizes 1 4 16 \
    --module-scopes --out $sc/sweep > $sc/sweep.txt 2> $sc/sweep-stderr.txt
  echo "stepcalls sweep rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/stepcalls.tgz" -C /tmp stepcalls;;
esac
case " $* " in *" seed "*)
  python3 benchmarks/experiments/seed_inductor.py --out "$OUT/seed-inductor.csv" \
    > "$OUT/seed-inductor.log" 2>&1
  echo "seed_inductor rc=$?" >> "$OUT/env.txt";;
esac
case " $* " in *" hf "*)
  bash benchmarks/hf_runs.sh /tmp/hf > "$OUT/hf.log" 2>&1
  echo "hf_runs rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/hf.tgz" -C /tmp hf;;
esac
case " $* " in *" cupti "*)
  python3 benchmarks/bench_cupti.py --out /tmp/cupti > "$OUT/cupti.log" 2>&1
  echo "bench_cupti rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/cupti.tgz" -C /tmp cupti;;
esac
case " $* " in *" report "*)
  graph-harness report --out /tmp/report > "$OUT/report-stdout.txt" 2> "$OUT/report-stderr.txt"
  echo "report rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/report.tgz" -C /tmp report;;
esac
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
case " $* " in *" check "*)
  python3 benchmarks/bench_check.py --out "$OUT/check" > "$OUT/bench-check.log" 2>&1
  echo "bench_check rc=$?" >> "$OUT/env.txt";;
esac
case " $* " in *" sweep "*)
  python3 benchmarks/bench_sweep.py --out /tmp/sweep ${SWEEP_ARGS:-} > "$OUT/bench-sweep.log" 2>&1
  echo "bench_sweep rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/sweep.tgz" -C /tmp sweep;;
esac
case " $* " in *" record "*)
  python3 benchmarks/bench_record.py --out /tmp/record > "$OUT/bench-record.log" 2>&1
  echo "bench_record rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/record.tgz" -C /tmp record;;
esac
case " $* " in *" host "*)
  python3 benchmarks/bench_host.py --out /tmp/host > "$OUT/bench-host.log" 2>&1
  echo "bench_host rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/host.tgz" -C /tmp host;;
esac
case " $* " in *" launch "*)
  python3 benchmarks/bench_launch.py --out /tmp/launch ${LAUNCH_ARGS:-} > "$OUT/bench-launch.log" 2>&1
  echo "bench_launch rc=$?" >> "$OUT/env.txt"
  tar czf "$OUT/launch.tgz" -C /tmp launch;;
esac
case " $* " in *" recompile "*)
  # after: this checkout; before: the tree in .old (a copy of an earlier commit's code,
  # carried with the call), when there is one
  python3 benchmarks/bench_recompile.py --out "$OUT/recompile-after" \
    --repeats "${RECOMPILE_REPEATS:-2}" > "$OUT/bench-recompile.log" 2>&1
  echo "bench_recompile rc=$?" >> "$OUT/env.txt"
  if [ -d .old ]; then
    python3 benchmarks/bench_recompile.py --out "$OUT/recompile-before" --repo .old \
      --repeats "${RECOMPILE_REPEATS:-2}" >> "$OUT/bench-recompile.log" 2>&1
    echo "bench_recompile (before) rc=$?" >> "$OUT/env.txt"
  fi;;
esac
cat "$OUT/env.txt"
for log in "$OUT/pytest-gpu.log" "$OUT/pytest-cpu.log"; do
  [ -f "$log" ] && grep -E "passed|failed|error" "$log" | tail -3
done
grep -h "^FAILED\|^ERROR" "$OUT"/pytest-*.log 2>/dev/null | head -40
[ -f "$OUT/seed-inductor.log" ] && cat "$OUT/seed-inductor.log"
[ -f /tmp/report/report.md ] && sed -n '/side by side/,$p' /tmp/report/report.md
[ -f "$OUT/hf.log" ] && tail -60 "$OUT/hf.log"
[ -f "$OUT/bench-pack.log" ] && tail -25 "$OUT/bench-pack.log"
[ -f "$OUT/replay-tables.txt" ] && cat "$OUT/replay-tables.txt" && tail -3 "$OUT/replay-stderr.txt"
[ -f "$OUT/bench-model.log" ] && tail -40 "$OUT/bench-model.log"
[ -f "$OUT/bench-advise.log" ] && tail -60 "$OUT/bench-advise.log"
[ -f /tmp/profile/summary.md ] && cat /tmp/profile/summary.md
[ -f "$OUT/bench-check.log" ] && tail -20 "$OUT/bench-check.log"
[ -f "$OUT/bench-sweep.log" ] && grep -v "^\[" "$OUT/bench-sweep.log" | tail -60
[ -f "$OUT/bench-record.log" ] && grep -v "^  " "$OUT/bench-record.log" | tail -40
[ -f "$OUT/bench-launch.log" ] && grep -E "launch |parts that failed|gave back" "$OUT/bench-launch.log"
[ -f "$OUT/bench-recompile.log" ] && grep -v "^capture [0-9]" "$OUT/bench-recompile.log" | tail -20
# The device tool brings back at most 8 files: everything but env.txt in one archive.
(cd "$OUT" && find . -mindepth 1 -maxdepth 1 ! -name env.txt ! -name results.tgz -print0 \
  | xargs -0 tar czf results.tgz && find . -mindepth 1 -maxdepth 1 ! -name env.txt \
  ! -name results.tgz -exec rm -rf {} +)
exit 0
