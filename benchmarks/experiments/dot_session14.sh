#!/usr/bin/env bash
# Session 14's device call (issue 40's last GPU check, issue 41's real dumps): the record
# tests, dot_probe, the examples' dumps beside their counts and recordings, two
# recordings of the engine-like runner. Everything under $OUT/s14.tgz.
set -u
OUT=${OUT:-out}; D=/tmp/s14; mkdir -p "$OUT" $D
python3 -m pip install -q --no-deps --no-build-isolation -e . > $D/install.log 2>&1
log() { echo "$*" >> $D/env.txt; }
END=$(( $(date +%s) + ${BUDGET:-460} ))  # one deadline for the whole call: the tar always runs
t() {
  local s=$(date +%s) lim=$1; shift
  (( END - s < lim )) && lim=$(( END - s ))
  (( lim < 5 )) && { log "skipped (no time left): ${*:1:8}"; return; }
  timeout $lim "$@"; local rc=$?; log "rc=$rc $(( $(date +%s)-s ))s: ${*:1:8}"
}
t 60 python3 benchmarks/experiments/dot_probe.py --out $D/probe > $D/probe.log 2>&1
X=benchmarks/experiments/dot_dumps.py
t 90 python3 $X --out $D/dumps --example hf_decode --how count > $D/dumps-hf-eager.log 2>&1
t 200 python3 -m pytest -q -rf -p no:cacheprovider -p no:logging tests/capture/record/test_record_gpu.py > $D/pytest-record.log 2>&1
for c in "" "--compiled"; do
  t 150 graph-harness record --module-scopes --out $D/rec-llama${c:+-compiled} -- \
    python3 $X --out $D/dumps --example llama_decode $c --how plain > $D/rec-llama$c.log 2>&1
done
E=examples/tiny_engine.py
t 90 graph-harness record --module-scopes --key $E:record_key --out $D/rec-engine-whole -- \
  $E --sizes 1 2 4 8 --steps 8 > $D/rec-engine-whole.log 2>&1
t 90 graph-harness record --module-scopes --key $E:record_key --out $D/rec-engine-piecewise -- \
  $E --sizes 1 2 4 8 --steps 8 --piecewise > $D/rec-engine-piecewise.log 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv >> $D/env.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $D/env.txt
cat $D/env.txt; tail -2 $D/pytest-record.log
tar czf "$OUT/s14.tgz" -C /tmp s14
