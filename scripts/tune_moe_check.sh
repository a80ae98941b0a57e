#!/usr/bin/env bash
# GPU check of `mi-tune kernels tune-moe` (< 5 minutes on one GPU). Results under $OUT (default ./tune_moe_check_out):
#   check.txt        mi-tune kernels check: mi-tune's fused-MoE kernel against torch on this GPU
#   dry_run.txt      the files each engine looks up for the shape below, on this GPU
#   tune.log         per batch size: default-config time -> tuned time (the tuner's own lines)
#   moe_configs/     the written vLLM / SGLang files and their .mi-tune.json benchmarks
#   summary.txt      one line per batch: default vs tuned kernel time and the speedup, read from the benchmark
# Shape: Qwen3-235B-A22B experts at TP 8 (E=128, N=192, K=4096, top-8), bf16, three batch sizes, 8 timed configs
# each. The kernel timed is the installed engine's (vLLM) or, without vLLM, mi-tune's own (tune.log says which).
# Override: MODEL, TP, DTYPE, BATCHES, TRIALS. Never changes clocks or device settings.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-$PWD/tune_moe_check_out}"
MODEL="${MODEL:-qwen3-235b-a22b}"
TP="${TP:-8}"
DTYPE="${DTYPE:-bf16}"
BATCHES="${BATCHES:-1,64,512}"
TRIALS="${TRIALS:-8}"
mkdir -p "$OUT"
MT=(mi-tune)
[ -x .venv/bin/mi-tune ] && MT=(.venv/bin/mi-tune)
PY="python3"
[ -x .venv/bin/python ] && PY=".venv/bin/python"

rc=0
"${MT[@]}" kernels check >"$OUT/check.txt" 2>&1 || rc=1
ARGS=(--model "$MODEL" --tp "$TP" --dtype "$DTYPE" --engine vllm --batch-sizes "$BATCHES" --trials "$TRIALS"
      --out "$OUT/moe_configs")
"${MT[@]}" kernels tune-moe "${ARGS[@]}" --dry-run >"$OUT/dry_run.txt" 2>&1 || rc=1
SECONDS=0
timeout 290 "${MT[@]}" kernels tune-moe "${ARGS[@]}" >"$OUT/tune.out" 2>"$OUT/tune.log" || rc=1
echo "tune-moe took ${SECONDS}s" >>"$OUT/tune.log"

"$PY" - "$OUT/moe_configs" >"$OUT/summary.txt" <<'PYEOF' || rc=1
import json, pathlib, sys
sidecars = sorted(pathlib.Path(sys.argv[1]).rglob("*.mi-tune.json"))
if not sidecars:
    sys.exit("no tune-moe benchmark written")
for path in sidecars:
    doc = json.loads(path.read_text())
    s = doc["shape"]
    print(f"{doc['device_name']}: E={s['E']} N={s['N']} K={s['K']} top-k={s['topk']} {s['dtype']} -- {doc['kernel']}")
    for batch, row in sorted(doc["batches"].items(), key=lambda kv: int(kv[0])):
        print(f"  batch {int(batch):>5}: default {row['default_time_us']:9.1f} us  tuned {row['time_us']:9.1f} us"
              f"  x{row['speedup_vs_default']:.2f}  ({row['measured']} timed, {row['pruned']} pruned)")
PYEOF
cat "$OUT/summary.txt" "$OUT/tune.log" | tail -n 30
exit "$rc"
