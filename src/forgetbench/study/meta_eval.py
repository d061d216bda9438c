"""`forgetbench meta-eval`: which metrics can be trusted, measured on the miniature
(open-unlearning's meta-evaluation, Dorna et al. 2025, sec. 5).

Two pools of models on one forget split: **positive**, models finetuned on `full` (they learned the
forget set), and **negative**, retain models (they never saw it), each pool varied over seeds,
finetuning epochs and learning rates by the same plan, so the only systematic difference between
the pools is the forget set. Every model is a cached stage of `Miniature` and every evaluation a
cached `evaluate_cached`, so a second run only reads. A metric's faithfulness is the AUC with which
it separates the pools (`forgetbench.metrics.meta`); its robustness, how far relearning and
quantisation attacks on unlearned models move it, comes from `forgetbench.study.meta_robustness`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.config import RunConfig
from forgetbench.config_names import FORGET_SPLITS, retain_split_for
from forgetbench.errors import ConfigError
from forgetbench.io import atomic_write_json
from forgetbench.metrics.meta import faithfulness, knows_direction
from forgetbench.results import META_EVAL_FILE, MetaEval
from forgetbench.study.inputs import Study
from forgetbench.study.meta_robustness import (
    QUANTISATION,
    UTILITY_KEPT,
    attacked_job,
    attacked_summary,
    evaluated_scores,
    pool_values,
    robustness_methods,
    robustness_rows,
)
from forgetbench.study.miniature import Variant, miniature
from forgetbench.study.pool import make_pool, quiet_transformers, study_workers
from forgetbench.study.relearn import relearn_loop

# Metric families the miniature's pools cannot judge, with the reason (meta_eval.json and the
# report show it). A family has a declared direction (`knows_direction`) all the same, for pools
# that would be trained on its data.
NOT_JUDGED = {
    "lume/": "no miniature model is trained on LUME's documents (the finetuned and retain models "
    "alike never see them), so both pools are negative for LUME and its AUC would measure noise",
}


@dataclass(frozen=True)
class PoolModel:
    pool: str  # "positive" | "negative"
    label: str
    variant: Variant  # with seed, epochs and lr filled in


def pool_models(
    scale: str, *, forget_split: str, seed: int, epochs: int, lr: float
) -> list[PoolModel]:
    """Both pools' models for `forget_split` around a recipe of `epochs` at `lr`."""

    models = []
    for pool, split in (("positive", "full"), ("negative", retain_split_for(forget_split))):
        for offset, epoch_factor, lr_factor in get_scale(scale).meta_pools:
            variant = Variant(
                split,
                seed + offset,
                max(1, round(epochs * epoch_factor)),
                lr * lr_factor,
            )
            label = f"{pool}-seed{variant.seed}-e{variant.epochs}-lr{variant.lr:g}"
            models.append(PoolModel(pool, label, variant))
    return models


def faithfulness_table(
    scored: list[tuple[str, dict[str, Any]]], *, truth_ratio_form: str
) -> list[dict[str, Any]]:
    """One row per judged forget-set metric present in the scores: its declared direction, the AUC
    separating the pools, each pool's size and mean. `scored` is (pool, scores) per model; a model
    without a finite value for a metric is left out of that metric's pools. Best first."""
    keys: list[str] = []
    judged = _judged(truth_ratio_form)
    for _, scores in scored:
        keys += [k for k in scores if k not in keys and judged(k)]
    rows = []
    for key in keys:
        direction = knows_direction(key, truth_ratio_form=truth_ratio_form)
        assert direction is not None
        values = pool_values(scored, key)
        positive, negative = values["positive"], values["negative"]
        if not positive or not negative:
            continue
        rows.append(
            {
                "metric": key,
                "direction": direction,
                "faithfulness": round(faithfulness(positive, negative, direction), 6),
                "robustness": None,
                "positives": len(positive),
                "negatives": len(negative),
                "positive_mean": round(sum(positive) / len(positive), 6),
                "negative_mean": round(sum(negative) / len(negative), 6),
            }
        )
    return sorted(rows, key=lambda r: (-r["faithfulness"], r["metric"]))


def _judged(truth_ratio_form: str) -> Callable[[str], bool]:
    """Whether a result key is a metric the pools judge."""

    def judged(key: str) -> bool:
        return knows_direction(key, truth_ratio_form=truth_ratio_form) is not None and not any(
            key.startswith(prefix) for prefix in NOT_JUDGED
        )

    return judged


def _evaluate_job(
    model_dir: Path, study: Study, config: RunConfig, split: str, folder: Path
) -> tuple[dict[str, Any], float]:
    # Module level: process pools pickle it by name. Only the scores travel back.
    started = time.perf_counter()
    scores = evaluated_scores(model_dir, study, config, split, folder)
    return scores, time.perf_counter() - started


def meta_evaluate(
    config: RunConfig,
    *,
    out: Path,
    forget_split: str,
    progress: bool = True,
    pool: Any = None,
) -> dict[str, Any]:
    """Train (or reuse) both pools in `out`, evaluate every model on `forget_split`, write
    `out/meta_eval.json` and return its content. `config` already carries the miniature's eval
    preset (`with_setup_defaults`). `pool`, when given, is the study's own."""
    if forget_split not in FORGET_SPLITS:
        raise ConfigError(
            f"meta-eval needs a forget split, got '{forget_split}'",
            f"use --split {' | '.join(FORGET_SPLITS)}",
        )
    started = time.perf_counter()
    quiet_transformers()
    own_pool = pool is None
    pool = make_pool(study_workers(config, None)) if own_pool else pool
    try:
        mini = miniature(config, out, progress=progress)
        epochs, lr = mini.recipe()
        models = pool_models(
            config.scale, forget_split=forget_split, seed=config.seed, epochs=epochs, lr=lr
        )
        trained = mini.models({m.label: m.variant for m in models}, pool)
        # The study the evaluations run on: its data and template matter, and its models are
        # each pool's first (the study's own finetuned and retain models).
        first = {m.pool: trained[m.label].model_dir for m in reversed(models)}
        study = mini.study(first["positive"], {forget_split: first["negative"]})
        logs = out / "meta_eval" / forget_split
        jobs = {
            m.label: pool.submit(
                _evaluate_job,
                trained[m.label].model_dir,
                study,
                config,
                forget_split,
                logs / m.label,
            )  # fmt: skip
            for m in models
        }
        # The attacked models: each method's unlearned model, and the retain model (None).
        attack_jobs = {
            method: pool.submit(attacked_job, study, config, out, forget_split, method)
            for method in (*robustness_methods(config), None)
        }
        evaluated = {label: job.result() for label, job in jobs.items()}
        attacked = {method: job.result() for method, job in attack_jobs.items()}
    finally:
        if own_pool:
            pool.shutdown(cancel_futures=True)
    judged = _judged(config.eval.truth_ratio_form)
    scored = [(m.pool, evaluated[m.label][0]) for m in models]
    table = faithfulness_table(scored, truth_ratio_form=config.eval.truth_ratio_form)
    retain = attacked.pop(None)
    finetuned = evaluated[models[0].label][0]  # the positive pool's first: the study's own
    table = robustness_rows(
        table, scored, list(attacked.values()), retain,
        finetuned_utility=finetuned.get("model_utility"),
    )  # fmt: skip
    timings = {f"train_{m.label}": mini.timings.get(m.label, 0.0) for m in models}
    timings |= {f"eval_{m.label}": evaluated[m.label][1] for m in models}
    timings |= {f"attack_{a['method']}": a["seconds"] for a in (*attacked.values(), retain)}
    timings["total"] = time.perf_counter() - started
    result = {
        "forgetbench_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "scale": config.scale,
        "seed": config.seed,
        "split": forget_split,
        "truth_ratio_form": config.eval.truth_ratio_form,
        "models": [
            {
                "pool": m.pool,
                "label": m.label,
                "split": m.variant.split,
                "seed": m.variant.seed,
                "epochs": m.variant.epochs,
                "lr": m.variant.lr,
                "log": str((logs / m.label).relative_to(out)),
                "scores": {k: v for k, v in evaluated[m.label][0].items() if judged(k)},
            }
            for m in models
        ],
        "metrics": table,
        "robustness": {
            "methods": [m for m in attacked if m is not None],
            "quantisation": QUANTISATION,
            "utility_kept": UTILITY_KEPT,
            "finetuned_utility": finetuned.get("model_utility"),
            "relearning": {
                "epochs": config.attack.relearn_epochs,
                "batch_size": config.attack.relearn_batch_size,
                "lr": relearn_loop(study, config, epochs=config.attack.relearn_epochs).lr,
                "on": f"every question of {forget_split}",
            },
            "attacked": attacked_summary([*attacked.values(), retain], judged),
        },
        "not_judged": NOT_JUDGED,
        "timings": {k: round(v, 2) for k, v in timings.items()},
    }
    result = MetaEval.model_validate(result).dump()
    atomic_write_json(out / META_EVAL_FILE, result)
    return result
