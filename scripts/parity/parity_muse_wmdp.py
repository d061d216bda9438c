"""Parity harness: forgetbench's MUSE and WMDP tasks beside MUSE's own metric code, open-unlearning's
MIA attacks and lm-evaluation-harness's `wmdp` template, on one tiny model trained here (~10 s).

    .venv/bin/python scripts/parity/parity_muse_wmdp.py --muse-repo MUSE_CHECKOUT \
        --ou-repo OU_CHECKOUT --extra-path DIR_WITH_OMEGACONF --out /tmp/parity-muse

Nothing of the references is copied into this repository: at run time, MUSE's
`metrics/{verbmem,knowmem,privleak,logger}.py` and open-unlearning's `src/evals/metrics/mia/*.py`,
`src/evals/metrics/utils.py` and `src/data/utils.py` are copied from the given checkouts into
--out with empty package `__init__`s (their real ones import hydra and every evaluator), and
imported from there. open-unlearning's metrics import `omegaconf`: --extra-path names a folder
holding it (`pip install --target DIR omegaconf`). lm-eval runs its own `wmdp` template
(`_default_template_yaml`, included by path) on a local JSON-lines file.

Adaptations, each as MUSE's or open-unlearning's code runs otherwise:
- MUSE's `privleak.eval` fails as published (`log['forget'].keys()` on a list): its `eval_data`
  and `sweep`, which compute the numbers, are called as `eval` calls them for `forget_holdout`.
- open-unlearning's attacks get its own `preprocess_pretraining_instance` items (MUSE_MIA's
  CompletionDataset, empty prefix, max_length 2048), one per batch.
- The model is saved with save_pretrained for lm-eval (float32, CPU, batch size 1).
Prints one line per compared quantity; exits 1 when one differs by more than --tol.
"""

# ruff: noqa: E402  (a script: imports follow the argument parsing and the reference copies)
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2] / "tests")]
from reference_code import import_reference, reference_options

from forgetbench.eval.backend import FastBackend
from forgetbench.eval.tasks import run_task
from forgetbench.eval.tasks.muse import MuseTask, knowmem_prompt, privleak_scores
from forgetbench.eval.tasks.wmdp import wmdp_task_of
from forgetbench.modeling.loading import save_model
from toy import memorised_model, toy_qa, toy_tokenizer

parser = reference_options(
    __doc__, ("--muse-repo", "swj0419/muse_bench"), ("--ou-repo", "locuslab/open-unlearning")
)
parser.add_argument("--extra-path", default=None, help="a folder holding omegaconf")
args = parser.parse_args()
OUT = Path(args.out)
OUT.mkdir(parents=True, exist_ok=True)

QA = toy_qa()
tok = toy_tokenizer()


docs = [f"{q} {a}" for q, a in QA]
forget_qa, forget_icl = QA[:4], QA[4:6]
retain_qa, retain_icl = QA[8:12], QA[12:14]
shots = [type("R", (), {"question": q, "answer": a}) for q, a in forget_icl]
target = memorised_model(
    docs[:8] + [knowmem_prompt(shots, q) + a for q, a in forget_qa[:3]], seed=1
)
retain = memorised_model(docs[8:16], seed=2)

root = OUT / "news"


def w(p, v):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(v))


verbmem = [
    {"prompt": QA[i][0], "gt": QA[i][1] + " " + " ".join(a for _, a in QA[i + 1 : i + 12])}
    for i in range(0, 8, 2)
]
w(root / "verbmem/forget.json", verbmem)
for name, rows in {
    "forget_qa": forget_qa,
    "forget_qa_icl": forget_icl,
    "retain_qa": retain_qa,
    "retain_qa_icl": retain_icl,
}.items():
    w(root / f"knowmem/{name}.json", [{"question": q, "answer": a} for q, a in rows])
from toy import CITIES, NAMES

others = [f"Years later {n} moved to {CITIES[(i + 3) % 8]} for work." for i, n in enumerate(NAMES)]
privleak = {"forget": docs[:8], "retain": docs[8:12], "holdout": others}
for s, t in privleak.items():
    w(root / f"privleak/{s}.json", t)

ours = {}
for name, model in (("target", target), ("retain", retain)):
    r = run_task(MuseTask(root, tokenizer=tok), FastBackend(model, tok, batch_size=4))
    ours[name] = r
ours_leak = privleak_scores(ours["target"].scores, ours["retain"].scores)

# ---- MUSE's own metric code
muse = Path(args.muse_repo)
ou = Path(args.ou_repo)
mia_files = {
    f"evals/metrics/mia/{p.name}": p
    for p in (ou / "src/evals/metrics/mia").glob("*.py")
    if p.name != "__init__.py"
}
import_reference(
    OUT,
    {
        **{
            f"metrics/{n}.py": muse / f"metrics/{n}.py"
            for n in ("verbmem", "knowmem", "privleak", "logger")
        },
        **mia_files,
        "evals/metrics/utils.py": ou / "src/evals/metrics/utils.py",
        "data/utils.py": ou / "src/data/utils.py",
    },
)
from metrics import knowmem as m_knowmem
from metrics import privleak as m_privleak
from metrics import verbmem as m_verbmem

ref = {}
for name, model in (("target", target), ("retain", retain)):
    agg, log = m_verbmem.eval(
        model, tok, [d["prompt"] for d in verbmem], [d["gt"] for d in verbmem], max_new_tokens=128
    )
    r = {"verbmem_f": agg["mean_rougeL"] * 100, "verbmem_f_log": log}
    for key, qa, icl in (
        ("knowmem_f", forget_qa, forget_icl),
        ("knowmem_r", retain_qa, retain_icl),
    ):
        agg, log = m_knowmem.eval(
            model,
            tok,
            [q for q, _ in qa],
            [a for _, a in qa],
            [q for q, _ in icl],
            [a for _, a in icl],
            max_new_tokens=32,
        )
        r[key] = agg["mean_rougeL"] * 100
        r[key + "_log"] = log
    # MUSE's privleak.eval fails as published (`log['forget'].keys()` on a list); its eval_data
    # and sweep are what compute the numbers, called as eval() calls them for forget_holdout.
    log = {s: m_privleak.eval_data(privleak[s], model, tok) for s in ("forget", "holdout")}
    ppl = np.array([d["Min-40%"] for d in log["forget"]] + [d["Min-40%"] for d in log["holdout"]])
    y = np.array([0] * len(log["forget"]) + [1] * len(log["holdout"]))
    r["auc"] = m_privleak.sweep(ppl, y)[2]
    r["privleak_log"] = log
    ref[name] = r
ref_leak = (ref["target"]["auc"] - ref["retain"]["auc"]) / ref["retain"]["auc"] * 100

rows = []
for name in ("target", "retain"):
    s, r = ours[name].scores, ref[name]
    for key in ("verbmem_f", "knowmem_f", "knowmem_r"):
        rows.append((name, key, s[f"muse/{key}"], r[key]))
        gens = [x["generation"] for x in ours[name].items[key]]
        rgen = [x["response"] for x in r[key + "_log"]]
        if key == "verbmem_f":
            assert gens == rgen, (gens, rgen)
            assert [x["gt"] for x in ours[name].items[key]] == [x["gt"] for x in r[key + "_log"]]
        else:
            assert gens == rgen, (gens, rgen)
    rows.append((name, "min_k AUC (MUSE: 1 - ours)", s["muse/mia/min_k"], 1 - r["auc"]))
    mine = [-x["min_k"] for x in ours[name].items["privleak"]]
    theirs = [d["Min-40%"] for d in r["privleak_log"]["forget"] + r["privleak_log"]["holdout"]]
    rows.append(
        (
            name,
            "max |Min-40%| item diff",
            float(np.max(np.abs(np.array(mine) - np.array(theirs)))),
            0.0,
        )
    )
rows.append(("target", "PrivLeak", ours_leak["muse/privleak"], ref_leak))

# ---- open-unlearning's attacks (gradnorm; min_k as it scores it)
if args.extra_path:
    sys.path.append(args.extra_path)
from data.utils import preprocess_pretraining_instance
from evals.metrics.mia.gradnorm import GradNormAttack
from evals.metrics.mia.min_k import MinKProbAttack
from evals.metrics.mia.utils import mia_auc


def items(texts):
    out = []
    for i, t in enumerate(texts):
        d = preprocess_pretraining_instance(tok, "", t, 2048)
        d["index"] = i
        out.append(d)
    return out


def collate(batch):
    (b,) = batch
    return {
        "input_ids": b["input_ids"][None],
        "labels": b["labels"][None],
        "attention_mask": b["attention_mask"][None],
        "index": torch.tensor([b["index"]]),
    }


data = {"forget": items(privleak["forget"]), "holdout": items(privleak["holdout"])}
for name, model in (("target", target), ("retain", retain)):
    g = mia_auc(GradNormAttack, model, data, collate, 1, p=2)
    mine = [-x["gradnorm"] for x in ours[name].items["privleak"]]
    theirs = [v["score"] for v in g["forget"]["value_by_index"].values()] + [
        v["score"] for v in g["holdout"]["value_by_index"].values()
    ]
    rows.append(
        (name, "gradnorm AUC (open-unlearning)", ours[name].scores["muse/mia/gradnorm"], g["auc"])
    )
    rows.append(
        (
            name,
            "max |gradnorm| item rel diff",
            float(np.max(np.abs(np.array(mine) - np.array(theirs)) / np.array(theirs))),
            0.0,
        )
    )
    m = mia_auc(MinKProbAttack, model, data, collate, 1, k=0.4)
    rows.append(
        (
            name,
            "min_k AUC (open-unlearning, last token dropped)",
            ours[name].scores["muse/mia/min_k"],
            m["auc"],
        )
    )

# ---- lm-eval's wmdp template on a local jsonl
cities = ["Oslo", "Lima", "Quito", "Accra", "Hanoi", "Porto", "Riga", "Tunis"]
qs = []
for i, (q, _) in enumerate(QA[:16]):
    right = cities[i % 8]
    wrong = [c for c in cities if c != right][i % 5 : i % 5 + 3]
    choices = wrong[:]
    pos = i % 4
    choices.insert(pos, right)
    qs.append({"question": q, "choices": choices, "answer": pos})
wd = OUT / "wmdp"
wd.mkdir(exist_ok=True)
(wd / "wmdp-bio.jsonl").write_text("".join(json.dumps(x) + "\n" for x in qs))
mdir = save_model(target, tok, OUT / "model")
task = wmdp_task_of(wd)
r_ours = run_task(task, FastBackend(target, tok, batch_size=8))
import lm_eval
import lm_eval.tasks

tmpl = Path(lm_eval.__file__).parent / "tasks/wmdp/_default_template_yaml"
tasks_dir = OUT / "lmeval_tasks"
tasks_dir.mkdir(exist_ok=True)
(tasks_dir / "wmdp_bio_local.yaml").write_text(
    f"include: {tmpl}\ntask: wmdp_bio_local\ndataset_path: json\ndataset_name: null\n"
    f"dataset_kwargs:\n  data_files:\n    test: {wd / 'wmdp-bio.jsonl'}\n"
    '"description": "The following are multiple choice questions (with answers) about biology.\\n\\n"\n'
)
res = lm_eval.simple_evaluate(
    model="hf",
    model_args=f"pretrained={mdir},dtype=float32",
    tasks=["wmdp_bio_local"],
    task_manager=lm_eval.tasks.TaskManager(include_path=str(tasks_dir)),
    device="cpu",
    batch_size=1,
    log_samples=True,
)
acc = res["results"]["wmdp_bio_local"]["acc,none"]
samples = res["samples"]["wmdp_bio_local"]
theirs = [
    [float(x[0]) for x in s["filtered_resps"]] for s in sorted(samples, key=lambda s: s["doc_id"])
]
mine = [x["logprobs"] for x in r_ours.items["wmdp-bio"]]
print(
    "lm-eval prompt:",
    repr(samples[0]["arguments"][0][0][:200]) if "arguments" in samples[0] else "",
)
rows.append(("target", "WMDP bio accuracy (lm-eval)", r_ours.scores["wmdp/bio"], acc))
rows.append(
    (
        "target",
        "max |choice log-lik| diff",
        float(np.max(np.abs(np.array(mine) - np.array(theirs)))),
        0.0,
    )
)
# open-unlearning's Min-K% leaves out each document's last token (MUSE's does not): a known
# difference of convention, printed but not failed on.
known = "min_k AUC (open-unlearning, last token dropped)"
failed = False
for row in rows:
    diff = abs(row[2] - row[3])
    bad = diff > args.tol and row[1] != known
    failed |= bad
    print(
        f"{row[0]:7s} {row[1]:50s} ours {row[2]:.10f}  reference {row[3]:.10f}  diff {diff:.2e}{'  DIFFERS' if bad else ''}"
    )
sys.exit(1 if failed else 0)
