"""Parity harness: forgetbench's TOFU evaluation vs open-unlearning's own evaluator, same model.

Runs open-unlearning's `src/eval.py` (hydra, `experiment=eval/tofu/default`) from its own
checkout and virtual environment, runs `forgetbench eval` on the same model and miniature data,
then compares every per-question number both write and the summary scores both report. Prints the
max absolute difference per quantity and the questions differing by more than --tol; exits 1 if
anything differs. Nothing of open-unlearning is imported here: it runs in a subprocess.

    .venv/bin/python scripts/parity/parity_open_unlearning.py --model RUN/models/finetune-*/model \
        [--retain-model RUN/models/retain-retain90-*/model] --data RUN/data \
        --ou-root /work/ou/src --ou-python /work/ou/venv/bin/python --out /tmp/parity
    # existing outputs only:  ... --out /tmp/parity --skip-forgetbench --ou-log /tmp/parity/ou/TOFU_EVAL.json

How open-unlearning is made to see exactly our text and data (each adaptation, and why):
- Data: its dataset configs call `datasets.load_dataset("locuslab/TOFU", name=CONFIG,
  split="train")`; run from OUT/ou-work, that path is a local folder. We write there JSON-lines
  copies of the miniature's `{split}_perturbed`, `holdout{NN}`, `retain_perturbed`,
  `real_authors_perturbed`, `world_facts_perturbed` (question/answer/paraphrased_answer/
  perturbed_answer only) and a README.md whose YAML `configs:` maps each config name to its file,
  which is how `datasets` resolves `name=` for a local folder.
- Template: a model config with `apply_chat_template: False`, user_start_tag "Question: ",
  user_end_tag "\n", asst_start_tag "Answer:" makes its prompt `Question: {q}\nAnswer:`, ours.
  It tokenises prompt + answer as one text and masks len(tokenizer(prompt)) tokens, so every answer
  text (answer, paraphrase, each perturbed answer) gets a leading space: ` {a}`, our answer side.
  Its generation prompt is the same prompt; its ROUGE ground truth is decode(prompt + answer) with
  decode(prompt) removed and stripped, i.e. the answer without that space, as ours. Its MIA data
  (`{split}_perturbed` question/answer vs `holdout{NN}`) is the same QA pairs our MIA scores
  (`{split}` vs `holdout{NN}`; the miniature's two forget files hold the same pairs), and its
  zlib text is decode(answer tokens) = ` {a}`, our zlib text.
- Model: transformers 4.45 (its pin) cannot load the tokenizer class name transformers 5 writes
  (`TokenizersBackend`), so OUT/ou-work/model links the weights, config and tokenizer.json and
  rewrites tokenizer_config.json with `PreTrainedTokenizerFast`; the tokenizer itself is the same
  file. float32, sdpa attention, `device_map=cpu`, batch size 32 (also passed to forgetbench).
- Extra metrics: `+eval/tofu_metrics=[exact_memorization,mia_loss,mia_zlib,mia_min_k_plus_plus]`
  adds what its default TOFU suite leaves out (mia_min_k comes with privleak).
- Reference model: with --retain-model both tools first evaluate it, and its logs become
  open-unlearning's retain_logs_path and our --retain-log (forget quality, privleak). Without it,
  forget quality is None there and absent here, and its privleak uses a reference AUC of 0.5
  while ours is absent: neither is compared.

Orientation: its truth ratio `score` is perturbed/paraphrase, as our logs' `truth_ratio`; its MIA
scores are loss-like (higher = non-member), ours member-like, so ours are compared with minus its.
Per question memorisation is recomputed from our `gt_argmax_matches` by its definitions (final EOS
label dropped; extraction strength's k capped at n - 1 as its loop leaves it), so a difference
there means different argmaxes; the summary rows compare what each tool reports.

Its Min-K% and Min-K%++ drop the final EOS (`tokenwise_logprobs` keeps labelled positions `[:-1]`)
while its LOSS and zlib keep it; forgetbench follows that split (first measured here: with EOS in
all four attacks ours differed by up to 1.4 in Min-K% item scores, without it by 2e-6).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from reference_code import open_unlearning_options

OU_EXTRA_METRICS = "[exact_memorization,mia_loss,mia_zlib,mia_min_k_plus_plus]"
MODEL_CONFIG = """model_args:
  pretrained_model_name_or_path: {model}
  torch_dtype: float32
  attn_implementation: sdpa
tokenizer_args:
  pretrained_model_name_or_path: {model}
template_args:
  apply_chat_template: False
  user_start_tag: "Question: "
  user_end_tag: "\\n"
  asst_start_tag: "Answer:"
  asst_end_tag: "\\n\\n"
"""
# Our set -> (open-unlearning's metric prefix, our TOFU log file).
SETS = {
    "forget": ("forget", "eval_log_forget.json"),
    "retain": ("retain", "eval_log.json"),
    "real_authors": ("ra", "eval_real_author_wo_options.json"),
    "world_facts": ("wf", "eval_real_world_wo_options.json"),
}
# Our summary key -> its metric. Real Authors / World Facts probability is the normalised
# (multiple-choice) one in both; its forget truth ratio metric is named `forget_truth_ratio`.
SUMMARY = {
    **{
        f"{s}/probability": f"{p}_Q_A_Prob"
        for s, (p, _) in SETS.items()
        if p in ("forget", "retain")
    },
    "real_authors/probability": "ra_Q_A_Prob_normalised",
    "world_facts/probability": "wf_Q_A_Prob_normalised",
    **{f"{s}/rougeL": f"{p}_Q_A_ROUGE" for s, (p, _) in SETS.items()},
    "forget/truth_ratio": "forget_truth_ratio",
    **{f"{s}/truth_ratio": f"{p}_Truth_Ratio" for s, (p, _) in SETS.items() if p != "forget"},
    "model_utility": "model_utility",
    "exact_memorisation": "exact_memorization",
    "extraction_strength": "extraction_strength",
    **{f"mia/{a}": f"mia_{a}" for a in ("loss", "zlib", "min_k", "min_k_plus_plus")},
    "privleak": "privleak",
    "forget_quality": "forget_quality",
}


def read_rows(path: Path) -> list[dict]:
    text = path.read_text()
    if text.lstrip().startswith("["):
        return json.loads(text)
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build_ou_work(data: Path, model: Path, work: Path, split: str) -> None:
    """OUT/<run>-work: locuslab/TOFU (space-prefixed answers), the model folder, its config."""
    tofu = data / "tofu" if (data / "tofu").is_dir() else data
    folder = work / "locuslab" / "TOFU"
    folder.mkdir(parents=True)
    names = [f"{split}_perturbed", split.replace("forget", "holdout"), "retain_perturbed"]
    card = ["---", "configs:"]
    for name in [*names, "real_authors_perturbed", "world_facts_perturbed"]:
        with open(folder / f"{name}.json", "w") as f:
            for row in read_rows(tofu / f"{name}.json"):
                out = {"question": row["question"], "answer": " " + row["answer"]}
                if "paraphrased_answer" in row:
                    out["paraphrased_answer"] = " " + row["paraphrased_answer"]
                if "perturbed_answer" in row:
                    out["perturbed_answer"] = [" " + a for a in row["perturbed_answer"]]
                f.write(json.dumps(out) + "\n")
        card += [f"- config_name: {name}", f"  data_files: {name}.json"]
    (folder / "README.md").write_text("\n".join([*card, "---", ""]))
    link = work / "model"
    link.mkdir()
    for item in model.iterdir():
        if item.name != "tokenizer_config.json":
            (link / item.name).symlink_to(item.resolve())
    config = json.loads((model / "tokenizer_config.json").read_text())
    if config.get("tokenizer_class") == "TokenizersBackend":  # transformers 5's name
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (link / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (work / "configs" / "model").mkdir(parents=True)
    yaml = MODEL_CONFIG.format(model=json.dumps(str(link)))  # a JSON string is a YAML string
    (work / "configs" / "model" / "forgetbench_mini.yaml").write_text(yaml)


def run_ou(args: argparse.Namespace, model: Path, out: Path, retain_log: Path | None) -> Path:
    work = out.parent / f"{out.name}-work"
    build_ou_work(args.data, model, work, args.split)
    cmd = [
        str(args.ou_python), str(args.ou_root / "src" / "eval.py"),
        "--config-dir", str(work / "configs"),
        "experiment=eval/tofu/default", "model=forgetbench_mini",
        # The experiment sets the model path after the model config: override it here.
        f"model.model_args.pretrained_model_name_or_path={work / 'model'}",
        "model.model_args.device_map=cpu",  # eval.yaml asks for cuda
        f"forget_split={args.split}", f"holdout_split={args.split.replace('forget', 'holdout')}",
        "task_name=parity", f"paths.output_dir={out}", "eval.tofu.overwrite=true",
        "eval.tofu.batch_size=32", f"retain_logs_path={retain_log or 'null'}",
        f"+eval/tofu_metrics={OU_EXTRA_METRICS}",
    ]  # fmt: skip
    # Offline, with a fresh datasets cache so no other run's locuslab/TOFU is reused.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(work / "hf-datasets"), "OMP_NUM_THREADS": str(args.threads)}  # fmt: skip
    print("open-unlearning:", " ".join(cmd), flush=True)
    timed(out.name, lambda: subprocess.run(cmd, cwd=work, env=env, check=True))
    return out / "TOFU_EVAL.json"


def run_forgetbench(args: argparse.Namespace, model: Path, out: Path, retain: Path | None) -> None:
    cmd = [
        str(Path(sys.executable).parent / "forgetbench"), "eval", "--model", str(model),
        "--data", str(args.data), "--split", args.split, "--out", str(out),
        "eval.formats=false", "eval.lume=false", "eval.batch_size=32",
    ]  # fmt: skip
    if retain:
        cmd += ["--retain-log", str(retain)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads)}
    print("forgetbench:", " ".join(cmd), flush=True)
    timed(out.name, lambda: subprocess.run(cmd, env=env, check=True))


# Wall seconds of each tool's evaluation subprocess, end to end (interpreter start, imports, model
# and data loading, every metric, writing its logs): what a user waits for with either tool.
WALL: dict[str, float] = {}


def timed(label: str, run: Any) -> None:
    started = time.perf_counter()
    run()
    WALL[label] = round(time.perf_counter() - started, 2)


class Report:
    def __init__(self, tol: float):
        self.tol, self.rows, self.bad = tol, [], []

    def add(self, name: str, pairs: list[tuple[str, Any, Any]]) -> None:
        """pairs: (item label, ours, theirs); items missing on either side are skipped."""
        pairs = [(lab, a, b) for lab, a, b in pairs if a is not None and b is not None]
        if not pairs:
            return
        if isinstance(pairs[0][1], str):  # texts: count the differing ones
            over = [(lab, a, b, None) for lab, a, b in pairs if a.strip() != b.strip()]
            worst = float(len(over))
        else:
            diffs = [(lab, a, b, abs(a - b)) for lab, a, b in pairs]
            over = [x for x in diffs if not x[3] <= self.tol]  # NaN counts as differing
            worst = max(d for *_, d in diffs)
        self.rows.append((name, len(pairs), worst, len(over)))
        self.bad += [(name, *x) for x in over]

    def show(self) -> int:
        print(f"{'quantity':48s} {'n':>4s} {'max |diff|':>10s} {'> tol':>6s}")
        for name, n, worst, over in self.rows:
            print(f"{name:48s} {n:4d} {worst:10.3e} {over:6d}")
        if self.bad:
            print(f"\nitems differing by more than {self.tol:g} (ours, open-unlearning, diff):")
        for name, lab, a, b, d in self.bad[:200]:
            print(f"  {name} [{lab}] {a!r} {b!r}" + (f" {d:.3e}" if d is not None else ""))
        return 1 if self.bad else 0


def es_open_unlearning(matches: list[int]) -> float:
    """Its extraction strength from argmax matches without the EOS label: the smallest k whose
    suffix all matches, except that its loop leaves k = n - 1 when none does."""
    n = len(matches)
    return 1 - next((k for k in range(n) if all(matches[k:])), n - 1) / n


def compare(fb_dir: Path, ou_log: Path, tol: float) -> int:
    ou = json.loads(ou_log.read_text())
    fb = json.loads((fb_dir / "eval_log_aggregated.json").read_text())
    scores = json.loads((fb_dir / "summary.json").read_text())["scores"]
    extra_file = fb_dir / "extra_log.json"
    mia = json.loads(extra_file.read_text()).get("mia", []) if extra_file.is_file() else []
    rep = Report(tol)

    def theirs(metric: str, field: str) -> dict[str, Any]:
        """{question key: its `field`} of one metric's per-question values."""
        values = ou.get(metric, {}).get("value_by_index", {})
        return {k: v[field] for k, v in values.items() if v is not None}

    for s, (p, file) in SETS.items():
        log = fb[file]
        keys = sorted(log["avg_gt_loss"], key=int)

        def row(name: str, ours: dict, other: dict) -> None:
            rep.add(f"{s}/{name}", [(k, ours[k], other.get(k)) for k in keys])  # noqa: B023

        gt_loss = log["avg_gt_loss"]
        row("answer avg loss", gt_loss, theirs(f"{p}_Q_A_Prob", "avg_loss"))
        row("answer probability", {k: math.exp(-v) for k, v in gt_loss.items()},
            theirs(f"{p}_Q_A_Prob", "prob"))  # fmt: skip
        # Without a paraphrase (Real Authors, World Facts) both score the answer in its place.
        para = f"{p}_Q_A_PARA_Prob" if f"{p}_Q_A_PARA_Prob" in ou else f"{p}_Q_A_Prob"
        row("paraphrase avg loss", log["avg_paraphrased_loss"], theirs(para, "avg_loss"))
        pert = theirs(f"{p}_Q_A_PERT_Prob", "avg_loss")
        rep.add(f"{s}/perturbed avg loss", [
            (f"{k}.{j}", a, b) for k in keys if k in pert
            for j, (a, b) in enumerate(zip(log["average_perturb_loss"][k], pert[k], strict=True))
        ])  # fmt: skip
        tr_metric = "forget_truth_ratio" if s == "forget" else f"{p}_Truth_Ratio"
        row("truth ratio (perturbed/paraphrase)", log["truth_ratio"], theirs(tr_metric, "score"))
        for field in ("rougeL_recall", "rouge1_recall"):
            row(field, log[field], theirs(f"{p}_Q_A_ROUGE", field))
        generations = {k: v[1] for k, v in log["generated_text"].items()}
        row("generation (texts differ)", generations, theirs(f"{p}_Q_A_ROUGE", "generation"))
        if s in ("real_authors", "world_facts"):
            mc = {}
            for k in keys:
                true, false = math.exp(-gt_loss[k]), log["average_perturb_loss"][k]
                mc[k] = true / (true + sum(math.exp(-x) for x in false))
            row("normalised probability", mc, theirs(f"{p}_Q_A_Prob_normalised", "prob"))
    matches = {
        k: m[:-1] for k, m in fb["eval_log_forget.json"].get("gt_argmax_matches", {}).items()
    }
    rep.add("forget/exact memorisation", [
        (k, float(np.mean(m)), theirs("exact_memorization", "score").get(k)) for k, m in matches.items()
    ])  # fmt: skip
    rep.add("forget/extraction strength", [
        (k, es_open_unlearning(m), theirs("extraction_strength", "score").get(k)) for k, m in matches.items()
    ])  # fmt: skip
    for attack in ("loss", "zlib", "min_k", "min_k_plus_plus"):
        pairs = []
        for side, member in (("forget", True), ("holdout", False)):
            other = ou.get(f"mia_{attack}", {}).get(side, {}).get("value_by_index", {})
            ours = [x[attack] for x in mia if x["member"] == member]
            pairs += [
                (f"{side}.{i}", v, -other[str(i)]["score"])
                for i, v in enumerate(ours)
                if str(i) in other
            ]
        rep.add(f"mia/{attack} item score (ours vs -its)", pairs)
    for ours, its in SUMMARY.items():  # what each tool reports
        rep.add(f"summary {ours}", [("", scores.get(ours), ou.get(its, {}).get("agg_value"))])
    return rep.show()


def fresh(path: Path) -> Path:
    """Each run writes into new folders: open-unlearning would otherwise reuse cached metrics."""
    for p in (path, path.parent / f"{path.name}-work"):
        if p.exists():
            shutil.rmtree(p)
    return path


def main() -> int:
    ap = open_unlearning_options(
        __doc__, model="save_pretrained folder", tol="per-question difference that passes"
    )
    ap.add_argument("--retain-model", type=Path, help="for forget quality and privleak")
    ap.add_argument("--ou-log", type=Path, help="compare this TOFU_EVAL.json, do not run it")
    ap.add_argument("--skip-forgetbench", action="store_true", help="reuse OUT/forgetbench")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ou_retain = args.out / "ou-retain" / "TOFU_EVAL.json"
    fb_retain = args.out / "forgetbench-retain"
    if args.retain_model and not args.ou_log:
        run_ou(args, args.retain_model, fresh(ou_retain.parent), None)
    if args.retain_model and not args.skip_forgetbench:
        run_forgetbench(args, args.retain_model, fresh(fb_retain), None)
    have_retain = ou_retain.is_file() and (fb_retain / "summary.json").is_file()
    ou_log = args.ou_log or run_ou(
        args, args.model, fresh(args.out / "ou"), ou_retain if have_retain else None
    )
    fb_dir = args.out / "forgetbench"
    if not args.skip_forgetbench:
        run_forgetbench(args, args.model, fresh(fb_dir), fb_retain if have_retain else None)
    status = 0
    # The retain model is compared too: it has not memorised the forget set, so its generations,
    # argmax matches and truth ratios there are not the trivial ones of a finetuned model.
    if args.retain_model and have_retain:
        print(f"\n== retain model {args.retain_model}")
        status = compare(fb_retain, ou_retain, args.tol)
    print(f"\n== model {args.model}")
    status = max(status, compare(fb_dir, ou_log, args.tol))
    if WALL:
        print(
            "\n== wall seconds, end to end (same model, data, batch 32, OMP_NUM_THREADS="
            f"{args.threads})"
        )
        for label, seconds in WALL.items():
            print(f"  {label:<40} {seconds:8.2f}")
        (args.out / "wall_seconds.json").write_text(json.dumps(WALL, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
