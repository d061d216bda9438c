#!/usr/bin/env bash
# The GPU check: run it whenever a GPU is lent (about 8 minutes on one H100/H200). Prepare
# here with `bash scripts/gpu_wheels.sh`, then on the device, carrying .whl:
#     bash scripts/gpu_check.sh          (writes $OUT/gpu_check.json and $OUT/logs/*)
# Each step has its own time limit; the default steps take at most 480 s, the 1B/8B ones first:
#   train_1b    `bench train` of the 1B-shaped Llama (random weights) on TOFU-sized data (the full
#               miniature's 4,000 questions), bf16 autocast: tokens/s, share of the measured bf16
#               matmul peak, peak memory, padding, HF's Trainer side by side, loss difference;
#   train_1b_grouped  the same with train.group_by_length=true: the padding and tokens/s that
#               length-grouped batches save (evaluation always groups by length);
#   unlearn_8b  one LoRA unlearning step of every method on the 8B-shaped Llama in bf16 (512
#               tokens, batch 4): peak memory and the warm step time (scripts/gpu_memory.py);
#   make_1b, eval_1b  a random 1B-shaped model in bf16, then `forgetbench eval` of it on forget10,
#               retain, Real Authors and World Facts (TOFU only, generation included), in seconds;
#   bench_train the small miniature's training stages timed (data, pretrain, finetune, retain);
#   workers_gpu `bench train` of the miniature's model shape (--steps 5) alone, then
#               WORKERS_PER_GPU (default 4) copies at once on the same GPU, as study.workers=N
#               places N worker processes on it: whether a launch-bound model trains faster
#               several at a time (their summed tokens/s against one's; WORKERS_LIMIT s, default 50).
# Named in STEPS only: pytest_gpu (the GPU-marked tests), study_small (the small study on
# forget10, profiled stage by stage; STUDY_LIMIT s, default 300: run it as a call of its own;
# STUDY_WORKERS=N puts N worker processes on the one GPU),
# bench_eval (fast vs naive evaluation of the miniature's model), memory_8b_lora /
# memory_1b_full (peak memory only, measured before on an H200: docs/gpu.md).
#     STEPS=study_small bash scripts/gpu_check.sh
# Try it on the CPU first, at the tiny scale, in float32 (bf16 matmuls crawl on most CPUs):
#     SCALE=tiny BIG_SCALE=tiny BIG_SIZE=tiny LORA_SIZE=tiny LORA_LENGTH=128 DEVICE=cpu \
#       PRECISION=no DTYPE=float32 PY=python bash scripts/gpu_check.sh
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
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 FORGETBENCH_CACHE=${FORGETBENCH_CACHE:-/tmp/forgetbench-cache}
PY=${PY:-python3}  # the GPU image's python3 holds torch
FB="$PY -m forgetbench.cli"
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; $PY -c "import torch, transformers, accelerate, peft, datasets; print(torch.__version__, transformers.__version__, accelerate.__version__, peft.__version__, datasets.__version__)"; } > "$OUT/logs/gpu.txt" 2>&1

STEPS=${STEPS:-train_1b,train_1b_grouped,unlearn_8b,make_1b,eval_1b,bench_train,workers_gpu}
SCALE=${SCALE:-small}         # the miniature of bench_train, study_small and bench_eval
BIG_SCALE=${BIG_SCALE:-full}  # the data of train_1b and eval_1b: full = 4,000 questions, as TOFU
BIG_SIZE=${BIG_SIZE:-1b}      # the model shape of train_1b and eval_1b
LORA_SIZE=${LORA_SIZE:-8b}    # the model shape of unlearn_8b
PRECISION=${PRECISION:-bf16}  # train_1b's autocast, for both trainers
DTYPE=${DTYPE:-bfloat16}      # the weights of unlearn_8b, make_1b and eval_1b
DEVICE=${DEVICE:-cuda}        # where the scripts build models (the commands use the GPU if any)
WORK=${WORK:-/tmp}            # the steps' scratch folders (train_1b, m1b, bench_train, ...)
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
# One epoch of the whole full split (125 steps of 32 questions) by each trainer, 32 a forward.
[[ ",$STEPS," == *",train_1b,"* ]] && rm -rf $WORK/train_1b
BIG_TRAIN="--scale $BIG_SCALE model.size=$BIG_SIZE $([[ $PRECISION != no ]] && echo model.mixed_precision=$PRECISION) train.batch_size=32 train.per_device_batch_size=32"
step train_1b 110 $FB bench train $BIG_TRAIN --out $WORK/train_1b --json --debug
# The same epoch in HF's length-grouped order (megabatches of 50 batches, each sorted by length).
rm -rf $WORK/train_1b_grouped
step train_1b_grouped 90 $FB bench train $BIG_TRAIN train.group_by_length=true \
  --out $WORK/train_1b_grouped --json --debug
step unlearn_8b 80 $PY scripts/gpu_memory.py --size $LORA_SIZE --lora --dtype $DTYPE \
  --length ${LORA_LENGTH:-512} --batch 4 --timed-steps 2 --device $DEVICE
# The model eval_1b scores: random weights in BIG_SIZE's shape, bf16, with the miniature's
# tokenizer at BIG_SCALE (made in $WORK/train_1b by train_1b, or here).
step make_1b 30 $PY -c "
import torch
from pathlib import Path
from transformers import AutoTokenizer
from forgetbench.modeling import build_tiny_model, save_model
from forgetbench.study.miniature import Miniature
mini = Miniature(Path('$WORK/train_1b'), '$BIG_SCALE', progress=False)
tokenizer = AutoTokenizer.from_pretrained(mini.tokenizer_dir())
torch.set_default_dtype(getattr(torch, '$DTYPE'))
with torch.device('$DEVICE'):
    model = build_tiny_model(tokenizer, scale='$BIG_SCALE', size='$BIG_SIZE')
save_model(model, tokenizer, '$WORK/m1b')
print(sum(p.numel() for p in model.parameters()), 'parameters')"
rm -rf $WORK/eval_1b
step eval_1b 50 $FB eval --model $WORK/m1b --data $WORK/train_1b/data/tofu --split forget10 \
  model.dtype=$DTYPE eval.batch_size=auto eval.mia=false \
  eval.formats=false eval.lume=false --out $WORK/eval_1b --json --no-progress --debug
step memory_8b_lora 80 $PY scripts/gpu_memory.py --size 8b --lora --dtype bfloat16 --length 512 --batch 4
step memory_1b_full 40 $PY scripts/gpu_memory.py --size 1b --dtype bfloat16 --length 512 --batch 4
# bench train times the miniature's pretraining, finetuning and retain model stage by stage (steps
# and seconds: a GPU's time per step on a 3M-parameter model); the study then reuses them from the
# shared cache, and bench eval its finetuned model. The study's folder stays on the machine
# (thousands of files would not come back); its results.json is copied out.
[[ ",$STEPS," == *",bench_train,"* ]] && rm -rf $WORK/bench_train
step bench_train 70 $FB bench train --scale $SCALE --out $WORK/bench_train --json --debug
# One `bench train` of the miniature's model shape on the GPU, then K at once (each its own
# process and CUDA context, as K study workers): the data come from the cache bench_train filled.
workers_gpu() {
  local k=${WORKERS_PER_GPU:-4} i
  rm -rf $WORK/workers_gpu; mkdir -p $WORK/workers_gpu
  $FB bench train --scale $SCALE model.size=$SCALE --steps 5 --out $WORK/workers_gpu/alone --json > "$OUT/logs/workers_gpu_1_1.log" 2>&1
  for i in $(seq 1 $k); do
    # The cores split between them, as the study's pool splits them (study/pool.py).
    OMP_NUM_THREADS=$(( $(nproc) / k > 0 ? $(nproc) / k : 1 )) \
      $FB bench train --scale $SCALE model.size=$SCALE --steps 5 --out $WORK/workers_gpu/$i --json > "$OUT/logs/workers_gpu_${k}_$i.log" 2>&1 &
  done
  wait
}
export -f workers_gpu; export FB SCALE OUT WORK  # `timeout` runs programs, not functions
step workers_gpu ${WORKERS_LIMIT:-50} bash -c workers_gpu
step study_small ${STUDY_LIMIT:-300} $FB run --scale $SCALE --splits forget10 --out $WORK/study --no-progress --json --debug study.workers=${STUDY_WORKERS:-0}
cp $WORK/study/results.json "$OUT/study_results.json" 2>/dev/null
step bench_eval 60 $FB bench eval --scale $SCALE --out $WORK/bench --json --debug

$PY - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
summary = {"gpu": (out / "logs/gpu.txt").read_text().strip(), "steps": []}
for line in (out / "steps.jsonl").read_text().splitlines():
    step = json.loads(line)
    log = (out / "logs" / f"{step['step']}.log").read_text(errors="replace").splitlines()
    rows = [l for l in log if l.startswith("{")]
    if step["step"].startswith(("memory", "unlearn")):
        step["methods"] = [json.loads(l) for l in rows]
    elif step["step"] == "study_small" and (out / "study_results.json").exists():
        from forgetbench.study.bench import study_profile
        timings = json.loads((out / "study_results.json").read_text())["timings"]
        step["profile"] = {k: v for k, v in study_profile(timings).items() if k != "jobs"}
    elif step["step"] == "workers_gpu":
        # Tokens/s (padded, forgetbench's loop) of one process alone and of K at once, summed.
        runs = {}
        for path in sorted((out / "logs").glob("workers_gpu_*_*.log")):
            k = int(path.stem.split("_")[2])
            rows_k = [l for l in path.read_text(errors="replace").splitlines() if l.startswith("{")]
            rate = json.loads(rows_k[-1])["forgetbench"]["tokens_per_s"]["padded"] if rows_k else None
            runs.setdefault(k, []).append(rate)
        step["tokens_per_s_padded"] = {f"{k} at once": r for k, r in runs.items()}
        done = {k: r for k, r in runs.items() if r and None not in r}
        if 1 in done and len(done) > 1:
            k = max(done)
            step["throughput_k_over_1"] = round(sum(done[k]) / done[1][0], 2)
    elif step["step"] in ("bench_train", "bench_eval", "train_1b", "train_1b_grouped") and rows:
        result = json.loads(rows[-1])
        for run in ("forgetbench", "hf_trainer"):  # per-step losses stay in the log
            if run in result:
                result[run] = {k: v for k, v in result[run].items() if k != "losses"}
        step["result"] = {k: v for k, v in result.items() if k not in ("rows", "config")}
    elif step["step"] == "eval_1b" and rows:
        step["result"] = json.loads(rows[-1]).get("scores")  # the seconds are the step's
    else:
        step["tail"] = log[-3:]
    summary["steps"].append(step)
(out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
print(json.dumps(summary)[:6000])
PY
