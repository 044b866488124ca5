#!/usr/bin/env bash
# One device call's share of the gpu half of the suite, under one deadline, so that the
# archive of logs always comes back (the gpu half no longer fits one 10-minute call):
#   BUDGET=470 bash benchmarks/gpu_part.sh NAME PATH...
# SIGINT at the deadline, so pytest still prints its failures and summary.
# Writes $OUT/NAME.tgz (pytest's log with -rf and durations, env) and prints the summary.
set -u
OUT=${OUT:-out}; name=$1; shift; D=/tmp/$name; mkdir -p "$OUT" "$D"
export PYTHONUNBUFFERED=1 COLUMNS=200
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "tree $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git status --porcelain 2>/dev/null | grep -q . && echo ' (with changes)')"
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} > "$D/env.txt" 2>&1
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
start=$(date +%s)
timeout -s INT -k 30 "${BUDGET:-470}" python3 -m pytest -v --tb=short -rfE -m gpu -p no:cacheprovider --durations=25 \
  "$@" > "$D/pytest.log" 2>&1
echo "pytest rc=$? $(( $(date +%s) - start )) s: $*" >> "$D/env.txt"
cat "$D/env.txt"; grep -E "^(FAILED|ERROR)|passed|failed" "$D/pytest.log" | tail -20
tar czf "$OUT/$name.tgz" -C /tmp "$name"
