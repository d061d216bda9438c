#!/usr/bin/env bash
# The GPU check: run it whenever a GPU is lent. It measures every figure of the speed targets
# (docs/speed.md, "The GPU check") in at most 8 minutes (each step under its own limit, 470 s in
# all), prints the targets' table with the measured column filled, and leaves at most 8 files in
# $OUT: gpu_check.json (every figure), logs.tar.gz (every step's log, the GPU-busy samples, the
# study's results.json) and table.md (the table printed). Prepare here with
# `bash scripts/gpu_wheels.sh`, then on the device, carrying .whl:
#     bash scripts/gpu_check.sh
# The default steps:
#   train_1b    `bench train` of the 1B-shaped Llama (random weights) on TOFU-sized data (the full
#               miniature's 4,000 questions, one epoch, 125 steps), bf16 autocast, beside HF's
#               Trainer: tokens/s, share of the measured bf16 matmul peak, first step, padding,
#               loss difference, and both trainers' profile of steps 2-4 (GPU busy, host syncs,
#               top kernels, launch vs GPU time);
#   unlearn_8b  one LoRA unlearning step of every method on the 8B-shaped Llama in bf16 (512
#               tokens, batch 4): peak memory and the warm step time (scripts/gpu_memory.py);
#   make_1b, eval_1b  a random 1B-shaped model in bf16, then `forgetbench eval` of it on forget10,
#               retain, Real Authors and World Facts (probes, generation to 200 tokens,
#               eval.batch_size=auto, MIA and formats off): seconds and GPU busy (nvidia-smi);
#   study_small `forgetbench run --scale small --splits forget10`, defaults: seconds, GPU busy;
#   study_demo  `make demo`'s study (the tiny scale, forget10, two shadow models): seconds.
# The levers (docs/speed.md, "Levers"), each train_1b or eval_1b with one setting turned, named
# in STEPS or all at once as STEPS=...,levers: train_1b_random (train.group_by_length=false:
# random order, padded, as before it was the GPU's default), train_1b_no_liger
# (model.liger_kernel=false), train_1b_compile (model.compile=true), train_1b_padding_free
# (model.padding_free=true: packed batches with the model's attention, sdpa unless flash-attn is
# installed), eval_1b_static
# (eval.cache_implementation=static, compiled decoding), eval_1b_static_eager (the static cache,
# not compiled), static_generations (how many of eval_1b_static's generated answers differ from
# eval_1b's in bf16).
# Named in STEPS only: pytest_gpu,
# bench_train (the small miniature's stages timed), bench_eval (fast vs naive evaluation of the
# miniature's model, with the fast path's profile), workers_gpu (the miniature's model shape
# alone, then WORKERS_PER_GPU at once on the GPU), study_small_one (the small study with
# study.workers=1, one process on the GPU: the alternative to study_small's placement, which the
# study measures and chooses itself), memory_8b_lora / memory_1b_full.
#     STEPS=bench_eval,workers_gpu bash scripts/gpu_check.sh
# The CPU dry run (tiny shapes and data, float32, the same steps and table; the figures are the
# CPU's, the GPU-busy ones absent): CPU=1 bash scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/gpu_check}
mkdir -p "$OUT/logs"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
if [[ ${CPU:-0} == 1 ]]; then  # the dry run's defaults; each can still be given
  : "${SCALE:=tiny}" "${BIG_SCALE:=tiny}" "${BIG_SIZE:=tiny}" "${LORA_SIZE:=tiny}" "${LORA_LENGTH:=128}"
  : "${DEVICE:=cpu}" "${PRECISION:=no}" "${DTYPE:=float32}" "${LIMIT_FACTOR:=3}" "${PY:=python}" "${PROFILE:=on}"
  export CUDA_VISIBLE_DEVICES=""
fi
export PYTHONPATH=$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 FORGETBENCH_CACHE=${FORGETBENCH_CACHE:-/tmp/forgetbench-cache}
PY=${PY:-python3}  # the GPU image's python3 holds torch
FB="$PY -m forgetbench.cli"
{ command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; $PY -c "import torch, transformers, accelerate, peft, datasets; print(torch.__version__, transformers.__version__, accelerate.__version__, peft.__version__, datasets.__version__)"; } > "$OUT/logs/gpu.txt" 2>&1

STEPS=${STEPS:-train_1b,unlearn_8b,make_1b,eval_1b,study_small,study_demo}
LEVERS=train_1b_random,train_1b_no_liger,train_1b_compile,train_1b_padding_free,eval_1b_static,eval_1b_static_eager,static_generations
STEPS=${STEPS/levers/$LEVERS}
LIMIT_FACTOR=${LIMIT_FACTOR:-1}  # the dry run's slower CPU gets its limits multiplied
SCALE=${SCALE:-small}         # the miniature of bench_train, study_small and bench_eval
BIG_SCALE=${BIG_SCALE:-full}  # the data of train_1b and eval_1b: full = 4,000 questions, as TOFU
BIG_SIZE=${BIG_SIZE:-1b}      # the model shape of train_1b and eval_1b
LORA_SIZE=${LORA_SIZE:-8b}    # the model shape of unlearn_8b
PRECISION=${PRECISION:-bf16}  # train_1b's autocast, for both trainers
DTYPE=${DTYPE:-bfloat16}      # the weights of unlearn_8b, make_1b and eval_1b
DEVICE=${DEVICE:-cuda}        # where the scripts build models (the commands use the GPU if any)
WORK=${WORK:-/tmp}            # the steps' scratch folders (train_1b, m1b, bench_train, ...)
step() {  # step NAME TIMEOUT COMMAND...: run, log, record seconds, exit code and GPU busy
  local name=$1 limit=$(( $2 * LIMIT_FACTOR )); shift 2
  [[ ",$STEPS," == *",$name,"* ]] || return 0
  local started=$(date +%s.%N) smi=""
  if [[ ${CPU:-0} != 1 ]] && command -v nvidia-smi >/dev/null; then  # SM busy %, every 0.5 s
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 \
      > "$OUT/logs/$name.smi" 2>/dev/null &
    smi=$!
  fi
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  local code=$?
  [[ -n $smi ]] && kill "$smi" 2>/dev/null
  echo "{\"step\": \"$name\", \"exit\": $code, \"seconds\": $(awk "BEGIN{print $(date +%s.%N) - $started}")}" >> "$OUT/steps.jsonl"
}

rm -f "$OUT/steps.jsonl"; touch "$OUT/steps.jsonl"
step pytest_gpu 60 $PY -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py
# One epoch of the whole full split (125 steps of 32 questions) by each trainer, 32 a forward.
[[ ",$STEPS," == *",train_1b,"* ]] && rm -rf $WORK/train_1b
BIG_TRAIN="--scale $BIG_SCALE model.size=$BIG_SIZE $([[ $PRECISION != no ]] && echo model.mixed_precision=$PRECISION) train.batch_size=32 train.per_device_batch_size=32"
step train_1b 105 $FB bench train $BIG_TRAIN --profile ${PROFILE:-auto} --out $WORK/train_1b --json --debug
# The levers of training, one at a time against train_1b (which on a GPU groups by length, and
# uses liger-kernel where installed): the same epoch in random order, without liger, compiled.
lever() {  # lever NAME LIMIT SETTING...: train_1b with SETTINGs, into $WORK/NAME
  local name=$1 limit=$2; shift 2
  rm -rf "$WORK/$name"
  step "$name" "$limit" $FB bench train $BIG_TRAIN "$@" --out "$WORK/$name" --json --debug
}
lever train_1b_random 90 train.group_by_length=false
lever train_1b_no_liger 90 model.liger_kernel=false
lever train_1b_compile 150 model.compile=true
lever train_1b_padding_free 90 model.padding_free=true
step unlearn_8b 75 $PY scripts/gpu_memory.py --size $LORA_SIZE --lora --dtype $DTYPE \
  --length ${LORA_LENGTH:-512} --batch 4 --timed-steps 2 --device $DEVICE
# The model eval_1b scores: random weights in BIG_SIZE's shape, bf16, with the miniature's
# tokenizer at BIG_SCALE (made in $WORK/train_1b by train_1b, or here).
step make_1b 25 $PY -c "
import torch
from pathlib import Path
from transformers import AutoTokenizer
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.loading import save_model
from forgetbench.study.miniature import Miniature
mini = Miniature(Path('$WORK/train_1b'), '$BIG_SCALE', progress=False)
tokenizer = AutoTokenizer.from_pretrained(mini.tokenizer_dir())
torch.set_default_dtype(getattr(torch, '$DTYPE'))
with torch.device('$DEVICE'):
    model = build_tiny_model(tokenizer, scale='$BIG_SCALE', size='$BIG_SIZE')
save_model(model, tokenizer, '$WORK/m1b')
print(sum(p.numel() for p in model.parameters()), 'parameters')"
rm -rf $WORK/eval_1b
EVAL_1B="--model $WORK/m1b --data $WORK/train_1b/data/tofu --split forget10 model.dtype=$DTYPE eval.batch_size=auto eval.mia=false eval.formats=false eval.lume=false --json --no-progress --debug"
step eval_1b 45 $FB eval $EVAL_1B --out $WORK/eval_1b
# Generation's levers: the static KV cache with its decoding step compiled, then without.
rm -rf $WORK/eval_1b_static $WORK/eval_1b_static_eager
step eval_1b_static 90 $FB eval $EVAL_1B eval.cache_implementation=static --out $WORK/eval_1b_static
step eval_1b_static_eager 60 $FB eval $EVAL_1B eval.cache_implementation=static \
  eval.compile_generation=false --out $WORK/eval_1b_static_eager
# Greedy decoding in bf16 may round differently with another cache: count the answers that differ.
step static_generations 10 $PY -c "
import json, sys
from pathlib import Path
def texts(folder):
    found = {}
    for path in sorted(Path(folder).rglob('*.json')):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        stack = [(path.name, data)]
        while stack:
            where, node = stack.pop()
            if isinstance(node, dict):
                if 'generated_text' in node:
                    found[where] = node['generated_text']
                stack += [(f'{where}/{k}', v) for k, v in node.items() if k != 'generated_text']
    return found
a, b = texts('$WORK/eval_1b'), texts('$WORK/eval_1b_static')
rows = [(x, y) for k in a.keys() & b.keys() for x, y in zip(a[k], b[k], strict=False)]
print(json.dumps({'compared': len(rows), 'differ': sum(x != y for x, y in rows)}))"
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
# The target is 150 s: the limit leaves room to see by how much a slower run misses it.
rm -rf $WORK/study $WORK/study_demo
step study_small ${STUDY_LIMIT:-160} $FB run --scale $SCALE --splits forget10 --out $WORK/study --no-progress --json --debug ${STUDY_WORKERS:+study.workers=$STUDY_WORKERS}
cp $WORK/study/results.json "$OUT/logs/study_results.json" 2>/dev/null
# Its own empty cache: on study_small's filled one it would only read what that one trained.
rm -rf $WORK/study_one $WORK/cache_one
FORGETBENCH_CACHE=$WORK/cache_one step study_small_one ${STUDY_LIMIT:-160} $FB run --scale $SCALE --splits forget10 --out $WORK/study_one --no-progress --json --debug study.workers=1
step study_demo 60 $FB run --scale tiny --splits forget10 eval.mia_shadows=2 --out $WORK/study_demo --no-progress --json --debug
step bench_eval 60 $FB bench eval --scale $SCALE --profile ${PROFILE:-auto} --out $WORK/bench --json --debug

$PY scripts/gpu_check_summary.py "$OUT" | tee "$OUT/table.md"
# At most 8 files come back: the logs travel as one archive.
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs steps.jsonl && rm -rf "$OUT/logs" "$OUT/steps.jsonl"
