"""`forgetbench bench train` and `bench study`: wall time and peak memory of the default study's
training stages, and of a whole study. Speed figures live here, not in timed tests."""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.config import RunConfig
from forgetbench.data.tofu import load_tofu, tofu_eval_sets
from forgetbench.eval.bench import bench_evaluation
from forgetbench.eval.outputs import greedy_generate
from forgetbench.eval.runner import scored_length, tofu_root
from forgetbench.io import atomic_write_json
from forgetbench.metrics.rouge import rouge_recall
from forgetbench.modeling.loading import load_model
from forgetbench.modeling.templates import resolve_template
from forgetbench.study.given import given_data, given_model
from forgetbench.study.miniature import Miniature, miniature
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


def bench_study(out: Path, config: Any, *, progress: bool = True) -> dict[str, Any]:
    """`forgetbench run` in an empty `out` with the shared cache off, so every stage runs: wall
    time per stage and per job, and how the work splits (`study_profile`)."""
    import os

    from forgetbench.cache import CACHE_ENV
    from forgetbench.errors import ConfigError
    from forgetbench.study.run import run_study

    if out.exists() and any(out.iterdir()):
        raise ConfigError(
            f"{out} is not empty", "bench study needs an empty --out folder to time every stage"
        )
    previous = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = "off"  # worker processes inherit it
    try:
        results = run_study(config, out=out, progress=progress)
    finally:
        if previous is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = previous
    return {
        "scale": config.scale,
        "splits": config.study.splits,
        "methods": config.study.methods,
        "workers": results["workers"],
        **study_profile(results["timings"]),
        "peak_rss_mib_main_process": _peak_rss_mib(),  # workers are other processes
    }


BENCH_EVAL_FILE = "bench_eval.json"


def bench_eval(
    config: RunConfig, out: Path, *, progress: bool = True, profile: bool | None = None
) -> dict[str, Any]:
    """Time the fast evaluation backend against the naive one on one model: the config's (its
    model and data), or the built-in study's finetuned model at its scale, trained in `out` or
    reused. Writes and returns the report (`identical`: whether both paths agree)."""
    given = given_model(config)
    if given is not None:
        model_dir, data = given, str(given_data(config))
    else:
        mini = miniature(config, out, progress=progress)
        model_dir, data = str(mini.model("full").model_dir), str(mini.data)
    sets = tofu_eval_sets(data, config.benchmark.split)
    model, tokenizer = load_model(
        model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
    )
    template = resolve_template(config.model.template, tokenizer, model_dir)
    report = bench_evaluation(
        model, tokenizer, template, sets,
        max_new_tokens=config.eval.max_new_tokens, batch_size=config.eval.batch_size,
        max_length=scored_length(model, config.eval, config.train.max_length), profile=profile,
    )  # fmt: skip
    report = {
        "model": model_dir,
        "data": data,
        "split": config.benchmark.split,
        "scale": None if given is not None else config.scale,
        "forgetbench": __version__,
        **report,
    }
    atomic_write_json(out / BENCH_EVAL_FILE, report)
    return report


# Stages the main process waits for before any job: the miniature's models (shadow models are
# retain models with half of a candidate pool added).
_MODEL_STAGES = ("data", "pretrain", "finetune")
_MODEL_PREFIXES = ("retain_", "shadow_")


def study_profile(timings: dict[str, float]) -> dict[str, Any]:
    """A study's `timings` (results.json) as wall time, its stages and jobs, and how the work
    (process-seconds summed over the workers) splits into training (every model stage and
    unlearning run), scoring and generation (the backend's meters inside the evaluations),
    attacks (relearning, quantisation and in-context attacks with their evaluations, not split
    further) and other (evaluation time outside the backend: loading, tokenising, metrics)."""
    stages = [
        {"stage": name, "seconds": seconds}
        for name, seconds in timings.items()
        if name in _MODEL_STAGES or name.startswith(_MODEL_PREFIXES)
    ]
    jobs = [
        {"stage": name, "seconds": seconds}
        for name, seconds in timings.items()
        if name.startswith(("unlearn_", "eval_", "attack_"))
    ]

    def total(prefix: str) -> float:
        return sum(row["seconds"] for row in jobs if row["stage"].startswith(prefix))

    training = sum(row["seconds"] for row in stages if row["stage"] != "data")
    training += total("unlearn_")
    evaluation, attacks = total("eval_"), total("attack_")
    scoring, generation = timings["scoring_seconds"], timings["generation_seconds"]
    work = training + evaluation + attacks
    return {
        "wall_seconds": timings["total"],
        "stages": stages,
        "jobs": jobs,
        "process_seconds": {
            "training": round(training, 1),
            "evaluation": round(evaluation, 1),
            "scoring": round(scoring, 1),
            "generation": round(generation, 1),
            "attacks": round(attacks, 1),
        },
        "shares": {
            "training": round(training / work, 3),
            "scoring": round(scoring / work, 3),
            "generation": round(generation / work, 3),
            "attacks": round(attacks / work, 3),
            "other": round((evaluation - scoring - generation) / work, 3),
        },
    }


BENCH_TRAIN_FILE = "bench_train.json"


def bench_train_throughput(
    config: RunConfig,
    out: Path,
    *,
    steps: int = 0,
    progress: bool = True,
    profile: bool | None = None,
) -> dict[str, Any]:
    """One epoch of finetuning on the `full` split, `steps` optimizer steps of it (0: all of it),
    by forgetbench's loop and by HF's Trainer from the same weights (`train_throughput`). The
    model: `--model` (with `--data`, a TOFU-layout folder), or random weights in `model.size`'s
    shape with the scale's miniature data and tokenizer. Writes and returns the report."""
    import torch
    from transformers import AutoTokenizer

    from forgetbench.device import DTYPES, default_device, place_model, precision
    from forgetbench.errors import ConfigError
    from forgetbench.modeling.builtin import build_tiny_model
    from forgetbench.modeling.loading import load_tokenizer
    from forgetbench.train.stages import encode_qa, loop_config
    from forgetbench.train.throughput import train_throughput

    given, data = given_model(config), given_data(config)
    if given is not None:
        if data is None:
            raise ConfigError(
                "bench train --model needs --data", "pass a TOFU-layout folder with full.json"
            )
        tokenizer = load_tokenizer(given, trust_remote_code=config.model.trust_remote_code)
        template = resolve_template(config.model.template, tokenizer, given)
        records = load_tofu(tofu_root(data), "full")  # the miniature's root as eval takes it

        def build() -> Any:
            return load_model(
                given, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
            )[0]

    else:
        mini = miniature(config, out, progress=progress)
        tokenizer = AutoTokenizer.from_pretrained(mini.tokenizer_dir())
        template, records = TEMPLATE, load_tofu(mini.data / "tofu", "full")
        device = default_device()

        def build() -> Any:
            # Built on the device in the weights' dtype: a 8B model never passes through the CPU.
            default = torch.get_default_dtype()
            torch.set_default_dtype(DTYPES[precision().dtype])
            try:
                with device:
                    model = build_tiny_model(
                        tokenizer, scale=config.scale, seed=config.seed, size=config.model.size
                    )
            finally:
                torch.set_default_dtype(default)
            return place_model(model)

    loop = loop_config(config)
    if steps:
        if steps * loop.batch_size > len(records):
            raise ConfigError(
                f"--steps {steps} x train.batch_size {loop.batch_size} needs "
                f"{steps * loop.batch_size} questions; the full split has {len(records)}",
                "pass fewer --steps (0 = the whole split)",
            )
        records = records[: steps * loop.batch_size]
    examples = encode_qa(records, tokenizer, template, max_length=config.train.max_length)
    report = train_throughput(
        build, examples, config=loop, pad_id=tokenizer.pad_token_id, out=out, progress=progress,
        profile=profile,
    )  # fmt: skip
    report = {
        "model": given or f"random weights, model.size={config.model.size}",
        "data": str(data) if given is not None else str(mini.data),
        "scale": None if given is not None else config.scale,
        "torch_threads": torch.get_num_threads(),
        "forgetbench_version": __version__,
        **report,
    }
    atomic_write_json(out / BENCH_TRAIN_FILE, report)
    return report
