#!/usr/bin/env bash
# The GPU check: run it whenever a GPU is lent (at most 10 minutes on one H100/H200). Prepare
# here with `bash scripts/gpu_wheels.sh`, then on the device, carrying .whl:
#     bash scripts/gpu_check.sh          (writes $OUT/gpu_check.json and $OUT/logs/*)
# Each step has its own time limit (570 s in all): the GPU-marked tests; the miniature's training
# stages timed (bench train); the small built-in study on CUDA (every method, shadows, attacks;
# STUDY_WORKERS processes, 0 = the default, one on a GPU), profiled stage by stage; `bench eval`
# with the GPU's own matmul peak. The peak memory of one step of every method (LoRA on the
# 8B-shaped Llama in bf16, full-parameter on the 1B-shaped one) runs when STEPS names
# memory_8b_lora / memory_1b_full: STEPS=memory_8b_lora,memory_1b_full bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_check}
mkdir -p "$OUT/logs"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 FORGETBENCH_CACHE=/tmp/forgetbench-cache
PY=${PY:-python3}  # the GPU image's python3 holds torch
FB="$PY -m forgetbench.cli"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; $PY -c "import torch, transformers, accelerate, peft, datasets; print(torch.__version__, transformers.__version__, accelerate.__version__, peft.__version__, datasets.__version__)"; } > "$OUT/logs/gpu.txt" 2>&1

# The memory steps were measured on an H200 (docs/gpu.md); name them in STEPS to measure again.
STEPS=${STEPS:-pytest_gpu,bench_train,study_small,bench_eval}
step() {  # step NAME TIMEOUT COMMAND...: run, log, record seconds and exit code
  local name=$1 limit=$2; shift 2
  [[ ",$STEPS," == *",$name,"* ]] || return 0
  local started=$(date +%s.%N)
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  local code=$?
  echo "{\"step\": \"$name\", \"exit\": $code, \"seconds\": $(awk "BEGIN{print $(date +%s.%N) - $started}")}" >> "$OUT/steps.jsonl"
}

rm -f "$OUT/steps.jsonl"; touch "$OUT/steps.jsonl"
step pytest_gpu 60 $PY -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py
step memory_8b_lora 80 $PY scripts/gpu_memory.py --size 8b --lora --dtype bfloat16 --length 512 --batch 4
step memory_1b_full 40 $PY scripts/gpu_memory.py --size 1b --dtype bfloat16 --length 512 --batch 4
# bench train times the miniature's pretraining, finetuning and retain model stage by stage (steps
# and seconds: a GPU's time per step on a 3M-parameter model); the study then reuses them from the
# shared cache, and bench eval its finetuned model. The study's folder stays on the machine
# (thousands of files would not come back); its results.json is copied out.
step bench_train 150 $FB bench train --scale ${SCALE:-small} --out /tmp/bench_train --json --debug
step study_small ${STUDY_LIMIT:-300} $FB run --scale ${SCALE:-small} --splits forget10 --out /tmp/study --no-progress --json --debug study.workers=${STUDY_WORKERS:-0}
cp /tmp/study/results.json "$OUT/study_results.json" 2>/dev/null
step bench_eval 60 $FB bench eval --scale ${SCALE:-small} --out /tmp/bench --json --debug

$PY - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
summary = {"gpu": (out / "logs/gpu.txt").read_text().strip(), "steps": []}
for line in (out / "steps.jsonl").read_text().splitlines():
    step = json.loads(line)
    log = (out / "logs" / f"{step['step']}.log").read_text(errors="replace").splitlines()
    if step["step"].startswith("memory"):
        step["methods"] = [json.loads(l) for l in log if l.startswith("{")]
    elif step["step"] == "study_small" and (out / "study_results.json").exists():
        from forgetbench.study.bench import study_profile
        timings = json.loads((out / "study_results.json").read_text())["timings"]
        step["profile"] = {k: v for k, v in study_profile(timings).items() if k != "jobs"}
    elif step["step"] in ("bench_train", "bench_eval"):
        rows = [l for l in log if l.startswith("{")]
        if rows:
            result = json.loads(rows[-1])
            step["result"] = {k: v for k, v in result.items() if k not in ("rows", "config")}
    else:
        step["tail"] = log[-3:]
    summary["steps"].append(step)
(out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(summary)[:6000])
PY
