"""`forgetbench run`: the whole study in one command. Data -> base model -> finetuned -> retain
models -> every method on every split, with a snapshot per epoch -> every metric -> results
folder and report. Each stage is cached by its inputs, so an interrupted run resumes where it
stopped and a finished one reruns in seconds."""

from __future__ import annotations

import csv
import io
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.config import RunConfig
from forgetbench.data.logs import EvalLog
from forgetbench.errors import ConfigError
from forgetbench.io import atomic_write_json, atomic_write_text
from forgetbench.metrics import METRICS

RESULTS_NAME = "results.json"
CSV_NAME = "results.csv"


@dataclass(frozen=True)
class Study:
    """The models and data a study runs on, resolved once."""

    data: Path  # the benchmark folder (the miniature's root, or a TOFU-layout folder)
    finetuned: Path
    base: Path | None
    retain: dict[str, Path]  # split -> retain model
    template: Any
    max_length: int
    unlearn_defaults: Any  # name, layers -> (LoopConfig, options)


@dataclass
class Evaluated:
    log: EvalLog | None
    scores: dict[str, Any]
    folder: Path


def _git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def prepare_study(
    config: RunConfig, out: Path, *, model: str | None, data: str | None, progress: bool
) -> tuple[Study, dict[str, float]]:
    from forgetbench.train.study import retain_split_for

    timings: dict[str, float] = {}
    splits = config.study.splits
    if model is None and config.benchmark.name == "mini":
        from forgetbench.benchmarks.mini import generate_mini
        from forgetbench.modeling import TINY_SIZES
        from forgetbench.train.mini import (
            TEMPLATE,
            finetune_mini,
            mini_unlearn_defaults,
            pretrain_base,
        )

        data_dir = out / "data"
        t = time.perf_counter()
        generate_mini(data_dir, scale=config.scale, seed=config.seed)
        timings["data"] = time.perf_counter() - t
        common = {"scale": config.scale, "seed": config.seed, "progress": progress}
        # Wall time of this run: a cached stage costs ~0 here, whatever it took to train.
        t = time.perf_counter()
        base = pretrain_base(out, data_dir, **common)
        timings["pretrain"] = time.perf_counter() - t
        t = time.perf_counter()
        finetuned = finetune_mini(out, data_dir, base.model_dir, split="full", **common)
        timings["finetune"] = time.perf_counter() - t
        retain = {}
        for split in splits:
            t = time.perf_counter()
            stage = finetune_mini(
                out, data_dir, base.model_dir, split=retain_split_for(split), **common
            )
            retain[split] = stage.model_dir
            timings[f"retain_{split}"] = time.perf_counter() - t
        layers = TINY_SIZES[config.scale].layers
        return Study(
            data_dir,
            finetuned.model_dir,
            base.model_dir,
            retain,
            TEMPLATE,
            TINY_SIZES[config.scale].max_positions,
            lambda name: mini_unlearn_defaults(name, layers=layers),
        ), timings
    if model is None or data is None:
        raise ConfigError(
            "forgetbench run with --model also needs --data (a TOFU-layout folder or hub id)",
            "or neither, for the built-in miniature study (--benchmark mini)",
        )
    if config.benchmark.name == "lume":
        raise ConfigError(
            "forgetbench run --benchmark lume is not supported yet",
            "evaluate LUME models with 'forgetbench eval --benchmark lume'",
        )
    from transformers import AutoTokenizer

    from forgetbench.modeling import resolve_template
    from forgetbench.train.study import external_unlearn_defaults

    tokenizer = AutoTokenizer.from_pretrained(model)
    return Study(
        Path(data),
        Path(model),
        None,
        {},
        resolve_template(config.model.template, tokenizer, model),
        config.train.max_length,
        lambda name: external_unlearn_defaults(),
    ), timings


def evaluate_cached(
    model_dir: Path,
    study: Study,
    config: RunConfig,
    *,
    split: str,
    folder: Path,
    full: bool,
) -> Evaluated:
    """Every metric of one model on one split, from the cache when it is there."""
    from forgetbench.eval.runner import (
        cached_evaluation,
        evaluate_model,
        evaluation_key,
        write_evaluation,
    )
    from forgetbench.modeling import load_model

    options = config.eval
    if not full:
        options = options.model_copy(update={"formats": False, "lume": False})
    benchmark = "mini" if config.benchmark.name == "mini" else "tofu"
    key = evaluation_key(model_dir, study.data, split, options, benchmark)
    cached = cached_evaluation(folder, key)
    if cached is not None:
        return Evaluated(cached[0], cached[1], folder)
    model, tokenizer = load_model(
        model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
    )
    log, scores, extra = evaluate_model(
        model, tokenizer, study.template, data=study.data, split=split, benchmark=benchmark,
        options=options, max_length=study.max_length,
    )  # fmt: skip
    write_evaluation(folder, key, log, scores, extra, {"model": str(model_dir), "split": split})
    return Evaluated(log, scores, folder)


def _row(
    split: str,
    method: str,
    step: int,
    epoch: float,
    evaluated: Evaluated,
    reference: Evaluated | None,
    config: RunConfig,
    out: Path,
) -> dict[str, Any]:
    from forgetbench.eval.runner import relative_scores

    scores = dict(evaluated.scores)
    reference_log = reference.log if reference else None
    if reference is None and split in config.study.retain_logs:
        from forgetbench.data.logs import read_eval_log

        reference_log = read_eval_log(config.study.retain_logs[split])
    scores.update(
        relative_scores(
            evaluated.log,
            scores,
            reference_log,
            reference.scores if reference else None,
            form=config.eval.truth_ratio_form,
        )
    )
    scores.setdefault("forget_quality", None)
    return {
        "split": split,
        "method": method,
        "step": step,
        "epoch": round(epoch, 4),
        **scores,
        "log": str(evaluated.folder.relative_to(out)),
    }


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


def run_study(
    config: RunConfig,
    *,
    out: Path,
    model: str | None = None,
    data: str | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from forgetbench.data.tofu import load_tofu
    from forgetbench.methods.refusals import load_refusals
    from forgetbench.train.study import resolve_method, retain_split_for
    from forgetbench.train.unlearn import run_unlearning

    started = time.perf_counter()
    study, timings = prepare_study(config, out, model=model, data=data, progress=progress)
    from forgetbench.eval.runner import tofu_root

    tofu = tofu_root(study.data)
    rows: list[dict[str, Any]] = []
    examples: list[dict[str, Any]] = []
    splits, methods = config.study.splits, config.study.methods
    columns = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    ]
    with Progress(*columns, disable=not progress, transient=False) as bar:
        task = bar.add_task("study", total=len(splits) * (len(methods) + 3))
        for split in splits:
            logs = out / "logs" / split
            t = time.perf_counter()
            bar.update(task, description=f"{split}: reference models")
            retain_eval = None
            if split in study.retain:
                retain_eval = evaluate_cached(
                    study.retain[split],
                    study,
                    config,
                    split=split,
                    folder=logs / "retain" / "step-0",
                    full=True,
                )
                rows.append(_row(split, "retain", 0, 0.0, retain_eval, retain_eval, config, out))
            bar.advance(task)
            finetuned_eval = evaluate_cached(
                study.finetuned,
                study,
                config,
                split=split,
                folder=logs / "finetuned" / "step-0",
                full=True,
            )
            rows.append(_row(split, "finetuned", 0, 0.0, finetuned_eval, retain_eval, config, out))
            examples += _examples(split, "finetuned", 0, finetuned_eval.log, config.study.examples)
            bar.advance(task)
            if study.base is not None:
                base_eval = evaluate_cached(
                    study.base,
                    study,
                    config,
                    split=split,
                    folder=logs / "base" / "step-0",
                    full=True,
                )
                rows.append(_row(split, "base", 0, 0.0, base_eval, retain_eval, config, out))
            bar.advance(task)
            timings[f"eval_references_{split}"] = time.perf_counter() - t
            forget = load_tofu(tofu, split)
            retain_records = load_tofu(tofu, retain_split_for(split))
            for name in methods:
                bar.update(task, description=f"{split}: {name}")
                t = time.perf_counter()
                loop, options = study.unlearn_defaults(name)
                loop, method = resolve_method(config, name, loop, options)
                result = run_unlearning(
                    out, model_dir=study.finetuned, forget=forget, retain=retain_records,
                    method=method, config=loop, template=study.template,
                    refusals=load_refusals(config.unlearn.refusals_file), split=split,
                    max_length=study.max_length, snapshot_every=config.unlearn.snapshot_every,
                    progress=False,
                )  # fmt: skip
                timings[f"unlearn_{split}_{name}"] = time.perf_counter() - t
                t = time.perf_counter()
                total_steps = result.snapshots[-1][0]
                for step, path in result.snapshots:
                    if step == 0:
                        continue  # the finetuned model, evaluated above
                    final = step == total_steps
                    evaluated = evaluate_cached(
                        path, study, config, split=split, folder=logs / name / f"step-{step}",
                        full=final or config.study.trajectory_formats,
                    )  # fmt: skip
                    epoch = loop.epochs * step / total_steps if total_steps else 0.0
                    rows.append(_row(split, name, step, epoch, evaluated, retain_eval, config, out))
                    if final:
                        examples += _examples(
                            split, name, step, evaluated.log, config.study.examples
                        )
                timings[f"eval_{split}_{name}"] = time.perf_counter() - t
                bar.advance(task)
    timings["total"] = time.perf_counter() - started
    results = {
        "forgetbench_version": __version__,
        "git_sha": _git_sha(),
        "seed": config.seed,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "benchmark": config.benchmark.name,
        "scale": config.scale if model is None else None,
        "model": str(model or study.finetuned),
        "config": config.model_dump(),
        "metric_versions": {name: info.version for name, info in METRICS.items()},
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "rows": rows,
        "examples": examples,
    }
    write_results(out, results)
    return results


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json (everything) and results.csv (one row per model and step), atomically."""
    atomic_write_json(out / RESULTS_NAME, results)
    columns: list[str] = []
    for row in results["rows"]:
        columns += [k for k in row if k not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in results["rows"]:
        writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in columns})
    atomic_write_text(out / CSV_NAME, buffer.getvalue())
