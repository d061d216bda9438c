"""The TOFU-shaped study's jobs and rows (`run_jobs`): every evaluation of a split's reference
models (retain, finetuned, base) and shadow models and every method's run (per seed) as pool
jobs, then `study.attacks` on the final models; their outcomes gathered into rows in a fixed
order (split, then retain / finetuned / base, then each method's steps) whatever finishes first,
with the generations the report shows as examples."""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from forgetbench.config import RunConfig
from forgetbench.data.logs import EvalLog
from forgetbench.rows import chosen_steps
from forgetbench.study.attack import attack_job
from forgetbench.study.attack_rows import attack_rows
from forgetbench.study.evaluate import Evaluated, evaluate_cached
from forgetbench.study.inputs import Study
from forgetbench.study.jobs import (
    Job,
    Shadows,
    eval_job,
    logged_retain_row,
    method_job,
    mia_items,
    run_pool,
    study_row,
)
from forgetbench.study.shadows import shadow_masks
from forgetbench.study.unlearn import finetune_settings


def _examples(split: str, method: str, step: int, log: EvalLog | None, n: int) -> list[dict]:
    if log is None or n == 0 or "forget" not in log.sets:
        return []
    texts = log.sets["forget"].fields.get("generated_text", [])[:n]
    return [
        {
            "split": split,
            "method": method,
            "step": step,
            "question": prompt,
            "ground_truth": truth,
            "generation": generation,
        }
        for prompt, generation, truth in texts
    ]


def _shadow_job(model_dir: Path, study: Study, config: RunConfig, split: str, folder: Path) -> Any:
    """A shadow model's per-item MIA scores on the split's candidates: the MIA task only."""
    t = time.perf_counter()
    evaluated = evaluate_cached(
        model_dir, study, split=split, eval_config=config.eval, folder=folder, model=config.model,
        tasks=("mia",),
    )  # fmt: skip
    return evaluated, time.perf_counter() - t


def run_jobs(
    study: Study,
    config: RunConfig,
    out: Path,
    pool: Any,
    timings: dict[str, float],
    *,
    retain_logs: dict[str, EvalLog],
    progress: bool,
    peak_gpu: dict[str, float] | None = None,
    reused: list[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every evaluation and method run of the study as pool jobs, then the attacks on the final
    models; rows in a fixed order (split, then retain / finetuned / base, then each method's
    steps) whatever finishes first."""
    splits, methods = config.study.splits, config.study.methods
    # Checked before any job runs: a bad shadow file fails the study now, not at its end.
    masks = {split: shadow_masks(study, split) if config.eval.mia else [] for split in splits}
    seeds: list[int | None] = list(config.study.seeds) or [None]
    jobs: list[Job] = []
    for split in splits:
        models = {"retain": study.retain.get(split), "finetuned": study.finetuned}
        models["base"] = study.base
        for role, model_dir in models.items():
            if model_dir is not None:
                folder = out / "logs" / split / role / "step-0"
                # The base model never saw the authors: it is a point on the forget-quality /
                # utility plane, and its formats and LUME scores would only cost time.
                args = (model_dir, study, config, split, folder, role != "base")
                jobs.append(((split, role), f"{split}: {role}", eval_job, args))
        for i, (model_dir, _) in enumerate(masks[split]):
            folder = out / "logs" / split / "shadows" / f"shadow-{i}"
            args = (model_dir, study, config, split, folder)
            jobs.append(((split, f"shadow-{i}"), f"{split}: shadow {i}", _shadow_job, args))
        for name in methods:
            for seed in seeds:
                args = (study, config, out, split, name, seed)
                label = f"{split}: {name}" + ("" if seed is None else f" (seed {seed})")
                jobs.append(((split, name, seed), label, method_job, args))
    futures = run_pool(pool, jobs, title="study", progress=progress)
    references = {
        key: futures[key] for key, _, function, _ in jobs if function in (eval_job, _shadow_job)
    }
    trajectories = {key: futures[key] for key, _, function, _ in jobs if function is method_job}
    attacks = _run_attacks(study, config, out, pool, references, trajectories, progress=progress)

    rows: list[dict[str, Any]] = []
    examples: list[dict[str, Any]] = []
    # (split, method, step) -> (whether it is the final step, its generations)
    snapshot_examples: dict[tuple[str, str, int], tuple[bool, list[dict[str, Any]]]] = {}
    # Process-seconds every evaluation spent scoring and generating (0 for cached ones).
    phases = {"scoring": 0.0, "generation": 0.0}

    def count(result: Evaluated) -> None:
        for phase, seconds in result.phases.items():
            phases[phase] += seconds

    for split in splits:
        evaluated = {}
        for role in ("retain", "finetuned", "base"):
            if (split, role) in references:
                evaluated[role], seconds = references[split, role].result()
                timings[f"eval_{split}_{role}"] = seconds
                count(evaluated[role])
        retain_eval = evaluated.get("retain")
        shadows = None
        if masks[split]:
            shadow_evals = []
            for i in range(len(masks[split])):
                shadow_eval, seconds = references[split, f"shadow-{i}"].result()
                timings[f"eval_{split}_shadow-{i}"] = seconds
                count(shadow_eval)
                shadow_evals.append(mia_items(shadow_eval))
            if all(log is not None for log in shadow_evals):
                shadows = Shadows(shadow_evals, [mask for _, mask in masks[split]])  # type: ignore[arg-type]
        attacked = _attack_rows(split, attacks, evaluated, config, timings)
        if retain_eval is None and split in retain_logs:
            # The retain model the user evaluated: its row, point and MIA lines in the report.
            rows.append(logged_retain_row(split, retain_logs[split], config, out))
        for role, reference in evaluated.items():
            row = study_row(
                split, role, 0, 0.0, reference, retain_eval, config, out, retain_logs,
                shadows=shadows,
            )  # fmt: skip
            trained = finetune_settings(study) if role != "base" else {}
            rows.append({**row, **attacked.get(role, {}), **trained})
        examples += _examples(
            split, "finetuned", 0, evaluated["finetuned"].log, config.study.examples
        )
        for name in methods:
            for seed in seeds:
                trajectory = trajectories[split, name, seed].result()
                tag = "" if seed is None else f"_seed{seed}"
                timings[f"unlearn_{split}_{name}{tag}"] = trajectory.unlearn_seconds
                if peak_gpu is not None and trajectory.unlearn_peak_gpu_mib is not None:
                    peak_gpu[f"unlearn_{split}_{name}{tag}"] = trajectory.unlearn_peak_gpu_mib
                timings[f"eval_{split}_{name}{tag}"] = trajectory.eval_seconds
                if reused is not None and trajectory.cached:
                    reused.append(f"{name} ({split}{'' if seed is None else f', seed {seed}'})")
                for step, epoch, final, result in trajectory.snapshots:
                    count(result)
                    row = study_row(
                        split, name, step, epoch, result, retain_eval, config, out, retain_logs,
                        shadows=shadows, seed=seed,
                    )  # fmt: skip
                    # The attacks run on the first seed's final model only.
                    first = seed == seeds[0]
                    attack = attacked.get(name, {}) if final and first else {}
                    rows.append({**row, **attack, **trajectory.settings})
                    # Generations of the first seed only: the report shows a few per method,
                    # at the step the leaderboard chose and at the last step.
                    if first:
                        found = _examples(split, name, step, result.log, config.study.examples)
                        snapshot_examples[split, name, step] = (final, found)
    chosen = chosen_steps(rows)
    for (split, name, step), (final, found) in snapshot_examples.items():
        if final or (split, name, step) in chosen:
            examples += found
    timings.update({f"{phase}_seconds": seconds for phase, seconds in phases.items()})
    return rows, examples


def _run_attacks(
    study: Study,
    config: RunConfig,
    out: Path,
    pool: Any,
    references: dict[Any, Future],
    trajectories: dict[Any, Future],
    *,
    progress: bool,
) -> dict[tuple[str, str], Future]:
    """`study.attacks` on the retain and finetuned models and each method's final model (of the
    first of `study.seeds`), as pool jobs; the plain relearning variant aims at the finetuned
    model's forget ROUGE-L."""
    if not config.study.attacks:
        return {}
    jobs: list[Job] = []
    for split in config.study.splits:
        finetuned, _ = references[split, "finetuned"].result()
        target = finetuned.scores.get("forget/rougeL")
        models = {"finetuned": study.finetuned}
        if split in study.retain:
            models["retain"] = study.retain[split]
        first = (list(config.study.seeds) or [None])[0]
        for name in config.study.methods:
            models[name] = trajectories[split, name, first].result().final_model
        for name, model_dir in models.items():
            folder = out / "attacks" / split / name
            args = (model_dir, study, config, split, folder, target)
            jobs.append(((split, name), f"{split}: attack {name}", attack_job, args))
    return run_pool(pool, jobs, title="attacks", progress=progress)


def _attack_rows(
    split: str,
    attacks: dict[tuple[str, str], Future],
    evaluated: dict[str, Evaluated],
    config: RunConfig,
    timings: dict[str, float],
) -> dict[str, dict[str, Any]]:
    """Each attacked model's `attack/...` keys, by model name, for one split."""
    outcomes = {}
    for (where, name), job in attacks.items():
        if where == split:
            outcomes[name], timings[f"attack_{split}_{name}"] = job.result()
    if not outcomes:
        return {}
    target = evaluated["finetuned"].scores.get("forget/rougeL")
    return attack_rows(outcomes, config=config, finetuned_rouge=target)
