#!/usr/bin/env bash
# The checks a session with a GPU runs (< 8 minutes), results under $OUT (default ./gpu_check_out):
#   env.txt              nvidia-smi, torch / CUDA / NCCL versions, GPU count
#   probe.json           mi-tune probe --json
#   bench_quick.json     mi-tune probe --bench --quick --json (timed; also written as hw_bench_quick.yaml)
#   estimate.json        mi-tune estimate on the probed profile (a TP-over-all-GPUs plan of the small test MoE):
#                        its `rates` provenance shows which figures came from the probe
#   kernels_check.txt    mi-tune kernels check (when the command exists)
#   steps.log            every step's stderr
#   summary.txt          one line per step: name, exit code, seconds
# Every step runs even when an earlier one fails; the script exits non-zero when any step failed.
# Never changes clocks or device settings (probe --bench only allocates and times).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-$PWD/gpu_check_out}"
mkdir -p "$OUT"
: >"$OUT/summary.txt"
: >"$OUT/steps.log"

if command -v mi-tune >/dev/null 2>&1; then
    MT=(mi-tune)
elif [ -x .venv/bin/mi-tune ]; then
    MT=(.venv/bin/mi-tune)
else
    MT=(python3 -c "from autotune.cli import main; main()")
fi
PY="python3"
[ -x .venv/bin/python ] && PY=".venv/bin/python"
FAILED=0

# step NAME STDOUT_FILE CMD...: run CMD with stdout to STDOUT_FILE, stderr appended to steps.log; record rc and time
step() {
    local name="$1" out="$2"
    shift 2
    local t0 rc
    t0=$(date +%s.%N)
    echo "=== $name: $*" >>"$OUT/steps.log"
    set +e
    "$@" >"$out" 2>>"$OUT/steps.log"
    rc=$?
    set -e
    local secs
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    printf '%-16s rc=%-3s %ss\n' "$name" "$rc" "$secs" >>"$OUT/summary.txt"
    [ "$rc" -eq 0 ] || FAILED=1
    return 0
}

env_info() {
    date -u
    uname -a
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi && nvidia-smi topo -m
    "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', \
torch.cuda.device_count(), 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None)"
}

step env "$OUT/env.txt" env_info
step probe "$OUT/probe.json" "${MT[@]}" probe --json
step bench_quick "$OUT/bench_quick.json" "${MT[@]}" probe --bench --quick --json --out "$OUT/hw_bench_quick.yaml"

if [ -s "$OUT/hw_bench_quick.yaml" ]; then
    GPUS=$("$PY" -c "import json; print(len(json.load(open('$OUT/bench_quick.json'))['accelerators']))" 2>/dev/null || echo 1)
    LIST=$(seq -s, 0 $((GPUS - 1)))
    printf 'schema: mi-tune/plan/v1\nengine: vllm\nmode: aggregated\nphases:\n  both: {gpus: [%s], tp: %s}\n' \
        "$LIST" "$GPUS" >"$OUT/plan_tp.yaml.tmp"
    step estimate "$OUT/estimate.json" "${MT[@]}" estimate "$OUT/plan_tp.yaml.tmp" \
        --model tests/fixtures/qwen3-30b-a3b --hardware "$OUT/hw_bench_quick.yaml" --isl 1024 --osl 128 \
        --concurrency 16 --json
    rm -f "$OUT/plan_tp.yaml.tmp"
else
    printf '%-16s rc=%-3s %ss\n' estimate "skip" 0 >>"$OUT/summary.txt"
fi

if "${MT[@]}" kernels check --help >/dev/null 2>&1; then
    step kernels_check "$OUT/kernels_check.txt" "${MT[@]}" kernels check
else
    printf '%-16s rc=%-3s %ss\n' kernels_check "skip" 0 >>"$OUT/summary.txt"
fi

cat "$OUT/summary.txt"
exit "$FAILED"
