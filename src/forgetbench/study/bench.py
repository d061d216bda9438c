"""`forgetbench bench train`: wall time and peak memory of the default study's training stages.
Speed figures live here, not in timed tests."""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

from forgetbench.data.tofu import load_tofu
from forgetbench.eval.outputs import greedy_generate
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.modeling import load_model
from forgetbench.study.resolve import Miniature
from forgetbench.train.mini import TEMPLATE


def bench_training(
    out: Path, *, scale: str, seed: int = 0, progress: bool = True
) -> dict[str, Any]:
    """Generate, pretrain, finetune (full) and train the retain90 model from scratch in `out`
    (reused stages would time nothing, so a folder with finished stages is refused)."""
    from forgetbench.errors import ConfigError

    if (out / "models").exists():
        raise ConfigError(
            f"{out} already holds trained stages",
            "bench needs an empty --out folder to time anything",
        )
    started = time.perf_counter()
    mini = Miniature(out, scale, seed, progress=progress)
    data, base = mini.data, mini.base
    finetuned, retain = mini.model("full"), mini.model("retain90")
    total = time.perf_counter() - started
    stages = [
        {
            "stage": "generate data",
            "seconds": round(mini.timings["data"], 1),
            "steps": 0,
            "final_loss": None,
        }
    ]
    for result in (base, finetuned, retain):
        stages.append(
            {
                "stage": result.name,
                "seconds": round(result.seconds, 1),
                "steps": len(result.losses),
                "final_loss": round(result.losses[-1], 4),
            }
        )
    # Quality check that the times are of a run that learned: the finetuned model should
    # reproduce its answers, the retain model should not know the forget authors.
    return {
        "scale": scale,
        "stages": stages,
        "total_seconds": round(total, 1),
        "peak_rss_mib": _peak_rss_mib(),
        "finetuned_full_rougeL": _rouge(finetuned.model_dir, data, "full", limit=200),
        "retain_forget10_rougeL": _rouge(retain.model_dir, data, "forget10", limit=200),
        "retain_retain90_rougeL": _rouge(retain.model_dir, data, "retain90", limit=200),
    }


def _rouge(model_dir: Path, data: Path, split: str, *, limit: int) -> float:
    model, tokenizer = load_model(model_dir)
    records = load_tofu(data / "tofu", split, limit=limit)
    generations = greedy_generate(
        model,
        tokenizer,
        [TEMPLATE.prompt(r.question) for r in records],
        max_new_tokens=64,
        batch_size=32,
    )
    return round(
        float(rouge_recall(generations, [r.answer for r in records])["rougeL_recall"].mean()), 4
    )


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return round(peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024, 1)
