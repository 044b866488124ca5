#!/usr/bin/env bash
# The Hugging Face example (examples/hf_decode.py) and the llama example through the CLI,
# eager and compiled, on a GPU: count by module (the default depth: one row per layer),
# their delta, check, profile (both, the second priced against the first), report; and the
# HF step with its reset taken away through profile (refused before any replay, one line).
#   bash benchmarks/hf_runs.sh DIR
# Each command's stdout and stderr go to DIR/NAME.txt, its folder to DIR/NAME/; rc lines
# print as it goes.
set -u
dir=${1:?usage: hf_runs.sh DIR}
mkdir -p "$dir"
export PYTHONUNBUFFERED=1 COLUMNS=200
hf=examples/hf_decode.py
ll=examples/llama_decode.py
run() {  # NAME ARGS...
  local name=$1; shift
  local t0
  t0=$(date +%s%N)
  graph-harness "$@" > "$dir/$name.txt" 2>&1
  local rc=$?
  printf '%-22s rc=%s %6d ms  graph-harness %s\n' "$name" "$rc" \
    $(( ($(date +%s%N) - t0) / 1000000 )) "$*"
}
for m in hf ll; do
  f=${!m}
  run "$m-count-eager" count --target "$f:make_step" --module-scopes --out "$dir/$m-count-eager"
  run "$m-count-compiled" count --target "$f:make_compiled_step" --module-scopes \
    --out "$dir/$m-count-compiled"
  run "$m-delta" delta "$dir/$m-count-eager/nodes-target.json" \
    "$dir/$m-count-compiled/nodes-target.json"
done
run hf-check-eager check --target "$hf:make_step" --module-scopes --out "$dir/hf-check-eager"
run hf-check-compiled check --target "$hf:make_compiled_step" --module-scopes \
  --out "$dir/hf-check-compiled"
run hf-profile profile --target "$hf:make_step" --target "$hf:make_compiled_step" \
  --module-scopes --out "$dir/hf-profile"
run hf-report report --target "$hf:make_step" --target "$hf:make_compiled_step" --check \
  --module-scopes --out "$dir/hf-report"
# the issue's failure: the HF step replayed without its reset
cat > "$dir/hf_no_reset.py" <<PY
import importlib.util, sys
spec = importlib.util.spec_from_file_location("hf_decode_example", "$PWD/$hf")
hf = importlib.util.module_from_spec(spec); sys.modules[spec.name] = hf
spec.loader.exec_module(hf)
def make_step():
    step = hf.make_step()
    del step.reset
    return step
PY
run hf-profile-no-reset profile --target "$dir/hf_no_reset.py:make_step" --module-scopes
run hf-check-no-reset check --target "$dir/hf_no_reset.py:make_step"
# the refusals and errors, one line each (the tables are in the .txt files)
grep -h "error:" "$dir"/*.txt | cut -c1-400
