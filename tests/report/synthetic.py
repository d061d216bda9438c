"""A synthetic results.json with every key the study runner writes: 2 splits x 3 methods x 3 steps
plus the finetuned, retain and base reference rows, and hostile strings in the examples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from forgetbench.config_names import FORMATS
from forgetbench.report.plots import MIA_ATTACKS, SETS, SUBSCORES

SPLITS = ("forget01", "forget10")
METHODS = ("grad_ascent", "npo", "idk")
STEPS = (5, 10, 15)
HOSTILE_QUESTION = "Who wrote <script>alert(1)</script> & what else?"


def _scores(shift: float) -> dict[str, Any]:
    """Every metric key, each a smooth function of `shift` so trajectories move."""
    row: dict[str, Any] = {}
    for i, (set_name, _) in enumerate(SETS):
        for j, (metric, _) in enumerate(SUBSCORES):
            drop = shift if set_name == "forget" else shift / 4
            row[f"{set_name}/{metric}"] = round(max(0.05, 0.9 - 0.05 * i - 0.1 * j - drop), 4)
    for k, name in enumerate(FORMATS):
        row[f"formats/{name}/forget"] = round(max(0.0, 0.8 - 0.03 * k - shift), 4)
        row[f"formats/{name}/retain"] = round(0.75 - 0.02 * k - shift / 5, 4)
    # Generalisation probes: the entailed ones fall more slowly than the forget set, shared barely.
    for k, kind in enumerate(("paraphrase", "reverse", "two_hop", "shared")):
        fall = shift / 8 if kind == "shared" else shift * (0.8 - 0.2 * k)
        for metric in ("probability", "rougeL", "truth_ratio"):
            row[f"probes/{kind}/{metric}"] = round(max(0.0, 0.8 - 0.05 * k - fall), 4)
    row["mia/members"], row["mia/nonmembers"] = 20, 150
    for k, attack in enumerate(MIA_ATTACKS):
        row[f"mia/{attack}"] = round(0.9 - 0.01 * k - shift / 2, 4)
        # 150 non-members: 1% FPR is resolvable, 0.1% is not (null).
        row[f"mia/{attack}/tpr@1%fpr"] = round(0.5 - shift / 2, 4)
        row[f"mia/{attack}/tpr@0.1%fpr"] = None
    row["privleak"] = round(80.0 - 100 * shift, 3)
    row["exact_memorisation"] = round(0.7 - shift, 4)
    row["extraction_strength"] = round(0.5 - shift / 2, 4)
    for task in ("Task1", "Task2", "Task3"):
        row[f"lume/regurgitation/{task}/forget"] = round(0.6 - shift / 2, 4)
        row[f"lume/regurgitation/{task}/retain"] = round(0.6 - shift / 8, 4)
    row["lume/knowledge/Task1/forget"] = round(0.5 - shift / 3, 4)
    row["lume/task_aggregate"] = round(0.5 - shift / 5, 4)
    row["lume/mia_score"] = round(0.4 + shift / 4, 4)
    row["lume/final"] = round(0.45 - shift / 6, 4)
    # What a study on the miniature writes: its background accuracy as utility, so no MMLU flag.
    row["lume/utility"] = round(0.45 - shift / 2, 4)
    row["lume/utility_source"] = "mini_background_mc"
    row["lume/mmlu_below_threshold"] = None
    return row


def _attacked(unlearned: float, recovered: float | None) -> dict[str, Any]:
    """The attack/* keys of an attacked model whose B-half ROUGE-L is `unlearned` and whose
    attacks each recover `recovered` of it (None: nothing was forgotten)."""
    row: dict[str, Any] = {"attack/none/rougeL": unlearned, "attack/none/probability": unlearned}
    for i, variant in enumerate(("relearn", "int8", "int4", "nf4", "incontext")):
        value = None if recovered is None else round(recovered - 0.1 * i, 4)
        row[f"attack/{variant}/rougeL"] = unlearned
        row[f"attack/{variant}/recovered_rougeL"] = value
        row[f"attack/{variant}/recovered_probability"] = value
    row["attack/relearn_full/steps"] = None if recovered is None else 10
    row["attack/relearn_full/budget_steps"] = 25
    return row


def synthetic_results() -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    examples: list[dict[str, Any]] = []
    for s, split in enumerate(SPLITS):
        for method, quality, utility, shift in (
            ("finetuned", 1e-8, 0.60, 0.0),
            ("retain", 1.0, 0.59, 0.3),
            ("base", 1e-3, 0.40, 0.5),
        ):
            rows.append(
                {
                    "split": split,
                    "method": method,
                    "step": 0,
                    "epoch": 0.0,
                    **_scores(shift),
                    "forget_quality": quality / (s + 1),
                    "model_utility": utility,
                    "log": f"logs/{split}/{method}",
                    **(_attacked(0.4, 0.05) if method == "retain" else {}),
                    **(_attacked(1.0, None) if method == "finetuned" else {}),
                }
            )
        for m, method in enumerate(METHODS):
            for k, step in enumerate(STEPS):
                rows.append(
                    {
                        "split": split,
                        "method": method,
                        "step": step,
                        "epoch": (k + 1) / 3,
                        **_scores(0.1 * (k + 1) + 0.02 * m),
                        "forget_quality": 10.0 ** (-6 + 2 * k - m),
                        "model_utility": round(0.60 - 0.06 * (k + 1) * (m + 1), 4),
                        "log": f"logs/{split}/{method}/step-{step}",
                        **(_attacked(0.2, 0.3 + 0.2 * m) if step == STEPS[-1] else {}),
                    }
                )
        for q in range(4):
            question = HOSTILE_QUESTION if q == 0 else f"Question {q} on {split}?"
            examples.append(
                {
                    "split": split,
                    "method": "finetuned",
                    "step": 0,
                    "question": question,
                    "ground_truth": f"Answer {q} & more",
                    "generation": f"Answer {q} <b>bold</b>",
                }
            )
            for method in METHODS:
                examples.append(
                    {
                        "split": split,
                        "method": method,
                        "step": STEPS[-1],
                        "question": question,
                        "ground_truth": f"Answer {q} & more",
                        "generation": f"I don't know ({method})",
                    }
                )
    return {
        "forgetbench_version": "0.1.0",
        "git_sha": "abc123",
        "seed": 0,
        "created": "2025-01-01T00:00:00+00:00",
        "benchmark": "mini",
        "scale": "tiny",
        "model": "tiny-llama <test>",
        "config": {"method": {"beta": 0.1}, "note": "</pre><script>x</script>"},
        "metric_versions": {"probability": 1, "rougeL": 1, "truth_ratio": 2},
        "timings": {"finetune": 12.5, "unlearn": 75.25, "eval": 3.0},
        "rows": rows,
        "examples": examples,
        "extra_key_from_the_future": {"ignored": True},
    }


def write_results(folder: Path, results: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
    return folder


def figure_ids() -> list[str]:
    return [
        f"{kind}-{split}"
        for kind in (
            "fq-plane",
            "subscores",
            "mia",
            "robustness",
            "generalisation",
            "formats",
        )  # the page's order
        for split in SPLITS
    ]
