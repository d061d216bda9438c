"""Parity harness: forgetbench's `muse` task beside MUSE's own evaluation code on the MUSE-shaped
miniature and the tiny models of a MUSE study.

    forgetbench run --benchmark muse --scale tiny --methods npo --attacks none --out RUN
    .venv/bin/python scripts/parity/parity_muse_miniature.py --run RUN --muse-repo MUSE_CHECKOUT \
        --out /tmp/parity-muse-mini

Models: the study's pretrained base, its finetuned (MUSE's target) and retain models
(`RUN/models/*/model`) and each method's last model on the forget set (`RUN/unlearn/*-forget-*`).
Data: the study's own folder, `RUN/data/muse/news`. forgetbench scores each model as the study
does (`MuseTask`, the evaluation backend at `eval.batch_size`); MUSE's `metrics/verbmem.py`,
`knowmem.py`, `privleak.py` and `logger.py`, copied at run time from the checkout into --out with
an empty package `__init__` (nothing of MUSE's is in this repository), score it as its
`eval_model` does, each text whole. Its `privleak.eval` fails as published (`log['forget'].keys()`
on a list): its `eval_data` and `sweep` are called as `eval` calls them for `forget_holdout`, and
PrivLeak is its formula against the retain model's AUC in place of `AUC_RETRAIN` (Llama-2's).

Prints per model and metric ours, MUSE's and the difference, how many generations are the same
string, and how many of the texts are longer than the model's positions (forgetbench cuts those,
MUSE's code does not); exits 1 when a number differs by more than --tol or a generation differs.
"""

# ruff: noqa: E402  (a script: imports follow the argument parsing and the reference copies)
import json
import re
import sys
from pathlib import Path

import numpy as np
from reference_code import import_reference, reference_options

from forgetbench.config_sections import EvalConfig
from forgetbench.data.muse import load_knowmem
from forgetbench.eval.backend import evaluation_backend
from forgetbench.eval.tasks import run_task
from forgetbench.eval.tasks.muse import KNOWMEM, MuseTask, knowmem_prompt, privleak_scores
from forgetbench.modeling.loading import load_model

parser = reference_options(__doc__, ("--muse-repo", "swj0419/muse_bench"))
parser.add_argument("--run", required=True, help="a `forgetbench run --benchmark muse` folder")
args = parser.parse_args()
RUN, OUT = Path(args.run), Path(args.out)
NEWS = RUN / "data" / "muse" / "news"

import_reference(
    OUT,
    {
        f"metrics/{name}.py": Path(args.muse_repo) / "metrics" / f"{name}.py"
        for name in ("verbmem", "knowmem", "privleak", "logger")
    },
)
from metrics import knowmem as m_knowmem
from metrics import privleak as m_privleak
from metrics import verbmem as m_verbmem


def read(path: str):
    return json.loads((NEWS / path).read_text())


verbmem = read("verbmem/forget.json")
knowmem = {key: (read(f"knowmem/{qa}.json"), read(f"knowmem/{icl}.json"))
           for key, (qa, icl) in KNOWMEM.items()}  # fmt: skip
privleak = {s: read(f"privleak/{s}.json") for s in ("forget", "holdout")}

models = {f.parent.name.rsplit("-", 1)[0]: f for f in sorted(RUN.glob("models/*/model"))}
for f in sorted(RUN.glob("unlearn/*-forget-*/model")):
    if re.fullmatch(r"[a-z0-9_]+-forget-[0-9a-f]+", f.parent.name):  # not a request's run
        models[f.parent.name.rsplit("-", 1)[0]] = f


def over_positions(tokenizer, positions: int) -> dict[str, int]:
    """Texts that do not fit the model's positions with what is generated after them."""
    n = lambda text: len(tokenizer(text)["input_ids"])  # noqa: E731
    shots = {key: load_knowmem(NEWS, icl) for key, (_, icl) in KNOWMEM.items()}
    return {
        "verbmem prompts (+128)": sum(n(r["prompt"]) + 128 > positions for r in verbmem),
        "knowmem prompts (+32)": sum(
            n(knowmem_prompt(shots[key], d["question"])) + 32 > positions
            for key, (qa, _) in knowmem.items()
            for d in qa
        ),  # fmt: skip
        "privleak documents": sum(n(t) > positions for ts in privleak.values() for t in ts),
    }


rows, same, failed = [], {}, False
ours_auc, theirs_auc = {}, {}
for name, folder in models.items():
    model, tok = load_model(folder, device="cpu")
    model.eval()
    ours = run_task(MuseTask(NEWS, tokenizer=tok), evaluation_backend(model, tok, EvalConfig()))
    theirs = {}
    agg, log = m_verbmem.eval(model, tok, [d["prompt"] for d in verbmem], [d["gt"] for d in verbmem], max_new_tokens=128)  # fmt: skip
    theirs["verbmem_f"], logs = agg["mean_rougeL"] * 100, {"verbmem_f": log}
    for key, (qa, icl) in knowmem.items():
        agg, log = m_knowmem.eval(
            model, tok, [d["question"] for d in qa], [d["answer"] for d in qa],
            [d["question"] for d in icl], [d["answer"] for d in icl], max_new_tokens=32,
        )  # fmt: skip
        theirs[key], logs[key] = agg["mean_rougeL"] * 100, log
    plog = {s: m_privleak.eval_data(privleak[s], model, tok) for s in ("forget", "holdout")}
    ppl = np.array([d["Min-40%"] for s in ("forget", "holdout") for d in plog[s]])
    y = np.array([0] * len(plog["forget"]) + [1] * len(plog["holdout"]))
    theirs_auc[name] = m_privleak.sweep(ppl, y)[2]
    ours_auc[name] = ours.scores
    for key in ("verbmem_f", "knowmem_f", "knowmem_r"):
        rows.append((name, key, ours.scores[f"muse/{key}"], theirs[key]))
        mine = [x["generation"] for x in ours.items[key]]
        same[name, key] = (sum(a == b["response"] for a, b in zip(mine, logs[key], strict=True)), len(mine))  # fmt: skip
    rows.append((name, "Min-40% AUC (MUSE's: 1 - ours)", 1 - ours.scores["muse/mia/min_k"], theirs_auc[name]))  # fmt: skip
    mine = np.array([-x["min_k"] for x in ours.items["privleak"]])
    rows.append((name, "max |Min-40%| per document", float(np.max(np.abs(mine - ppl))), 0.0))
    print(f"{name}: texts over the model's {model.config.max_position_embeddings} positions:",
          over_positions(tok, model.config.max_position_embeddings))  # fmt: skip

retain = next(n for n in models if n.startswith("muse-retain"))
for name in models:
    ours_leak = privleak_scores(ours_auc[name], ours_auc[retain])["muse/privleak"]
    theirs_leak = (theirs_auc[name] - theirs_auc[retain]) / theirs_auc[retain] * 100
    rows.append((name, "PrivLeak (against the retain model)", ours_leak, theirs_leak))

for name, key, mine, theirs in rows:
    diff = abs(mine - theirs)
    bad = diff > args.tol
    failed |= bad
    print(f"{name:28s} {key:38s} ours {mine:14.8f}  MUSE {theirs:14.8f}  diff {diff:.1e}"
          + ("  DIFFERS" if bad else ""))  # fmt: skip
for (name, key), (n, total) in same.items():
    failed |= n != total
    print(f"{name:28s} {key:38s} same generation {n}/{total}")
sys.exit(1 if failed else 0)
