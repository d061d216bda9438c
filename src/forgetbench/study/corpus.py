"""`forgetbench run --benchmark muse|wmdp`: the study of a document benchmark, built from its
description (`forgetbench.benchmarks.corpus`) without knowing which one it is.

Data (the benchmark's built-in miniature in its released layout, or the user's folder of it) ->
the miniature's pretrained base -> the finetuned model (the base trained on the benchmark's
finetune documents) and the retain model (trained without the forget documents) -> every method
on every forget set of the benchmark, unlearning on text chunks, and on each series of forget
requests it has (`study/requests.py`) -> the benchmark's evaluation of every model and snapshot
-> rows, the validity gates (the finetuned model must be measurably
above the retain model) and results.json. Each model is a cached stage and each evaluation a
cached one, as in the TOFU-shaped study."""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.benchmarks.corpus import CorpusBenchmark
from forgetbench.benchmarks.mini.scales import get_scale
from forgetbench.config import RunConfig
from forgetbench.errors import ConfigError
from forgetbench.methods.base import INPUT_FIELDS, build_method
from forgetbench.metrics import METRICS
from forgetbench.study.evaluate import Evaluated
from forgetbench.study.given import given_data, given_model
from forgetbench.study.inputs import Miniature, Study, miniature
from forgetbench.study.jobs import Job, eval_job, method_job, model_row, run_pool
from forgetbench.study.pool import make_pool, study_workers
from forgetbench.study.requests import present_series, request_jobs, request_rows, shared_runs
from forgetbench.study.written import git_sha, write_results
from forgetbench.train import mini as mini_training
from forgetbench.train.items import ALTERNATE_FIELDS
from forgetbench.train.presets import eval_preset
from forgetbench.validity import check_gaps

# What a method reads beyond the forget and retain texts that a document has no counterpart of:
# a refusal of its question (IdK, DPO) or alternate answers to it (AltPO).
ANSWER_FIELDS = frozenset(f for f in INPUT_FIELDS if "refusal" in f) | ALTERNATE_FIELDS


def answers_questions(name: str) -> frozenset[str]:
    """What method `name` reads that only a question has (empty for a method that unlearns text)."""
    return build_method(name, {}).required_inputs() & ANSWER_FIELDS


def document_methods(config: RunConfig) -> RunConfig:
    """The config with the default study's methods cut to those that unlearn documents, when the
    user named none (methods they name are checked by `refuse_document_methods`)."""
    if "methods" in config.study.model_fields_set:
        return config
    methods = [m for m in config.study.methods if not answers_questions(m)]
    return config.model_copy(update={"study": config.study.model_copy(update={"methods": methods})})


def refuse_document_methods(bench: CorpusBenchmark, methods: list[str]) -> None:
    """A method that trains toward another answer to a question (a refusal, an alternate) has
    nothing to train toward on a document: refused in one sentence, before any work."""
    for name in methods:
        needs = answers_questions(name)
        if needs:
            what = "alternate answers" if needs & ALTERNATE_FIELDS else "a refusal"
            raise ConfigError(
                f"method {name} trains toward {what} to a question, and {bench.title}'s forget "
                "set is documents with no question to answer",
                f"drop {name} from --methods (see docs/{bench.name}.md for the methods that "
                "unlearn documents)",
            )


def refuse_unread_options(config: RunConfig, bench: CorpusBenchmark) -> None:
    """Options of the TOFU-shaped study that a document study would not read, refused before any
    work, as every command refuses what it would not read."""
    where = f"forgetbench run --benchmark {bench.name}"
    if given_model(config) is not None:
        raise ConfigError(
            f"{where} trains the built-in tiny models on the benchmark's documents; a study of "
            "your own model is not part of it",
            "drop --model (give your own data folder with --data)",
        )
    study = config.study
    # Refused when set (the default study's robustness attacks are simply not run).
    unread = ("attacks", "seeds", "sequence", "meta_eval", "retain_logs", "mia_shadow_models")
    given = {f"study.{k}": getattr(study, k) for k in unread if k in study.model_fields_set}
    given["study.unlearn_formats"] = study.unlearn_formats != ["qa"]
    for key, value in given.items():
        if value:
            raise ConfigError(
                f"{key} is an option of the TOFU-shaped study, which {where} does not read",
                f"drop {key}",
            )
    refuse_document_methods(bench, study.methods)


def corpus_data(config: RunConfig, bench: CorpusBenchmark, mini: Miniature) -> Path:
    """The benchmark's folder: the user's (`--data`), checked whole before any work, or its
    built-in miniature for the scale and seed, which the miniature's data folder holds beside
    TOFU's files (what `forgetbench data generate` writes)."""
    given = given_data(config)
    folder = Path(given) if given is not None else mini.data / bench.miniature_folder
    bench.require(folder)
    return folder


def corpus_models(
    config: RunConfig, bench: CorpusBenchmark, data: Path, mini: Miniature, *, progress: bool
) -> Study:
    """The finetuned and retain models (cached stages over the miniature's base) and the study
    on them; every forget set of the benchmark shares the one retain model."""
    base = mini.base.model_dir
    stages = {}
    for role, texts in (("finetune", bench.finetune_texts), ("retain", bench.retain_model_texts)):
        started = time.perf_counter()
        stages[role] = mini_training.finetune_corpus(
            mini.out, base, texts(data), name=f"{bench.name}-{role}", scale=mini.scale,
            seed=mini.seed, progress=progress, train=mini.train,
        )  # fmt: skip
        mini.timings[f"{bench.name}_{role}"] = time.perf_counter() - started
    layers = get_scale(mini.scale).model.layers
    return Study(
        data,
        stages["finetune"].model_dir,
        base,
        {split: stages["retain"].model_dir for split in bench.forget_sets},
        mini.template,
        mini.max_length,
        partial(mini_training.mini_unlearn_defaults, layers=layers, preset=bench.unlearn_preset),
        benchmark=bench.eval_layout,
        finetune_lr=mini.finetune_loop().lr,
        documents=bench.name,
    )


def corpus_row(
    bench: CorpusBenchmark,
    split: str,
    method: str,
    step: int,
    epoch: float,
    evaluated: Evaluated,
    retain: Evaluated | None,
    out: Path,
) -> dict[str, Any]:
    """One model's row: its scores and what the benchmark computes from them and the retain
    model's (`relative`, e.g. PrivLeak)."""
    scores = dict(evaluated.scores)
    scores.update(bench.relative(scores, retain.scores if retain else None))
    return model_row(split, method, step, epoch, scores, evaluated, out)


def run_corpus_study(
    config: RunConfig, bench: CorpusBenchmark, *, out: Path, progress: bool = True
) -> dict[str, Any]:
    """The whole study of document benchmark `bench`, written to `out` as results.json."""
    started = time.perf_counter()
    config = document_methods(config)
    refuse_unread_options(config, bench)
    if given_data(config) is not None:
        bench.require(Path(given_data(config)))  # type: ignore[arg-type]  # before any output
    # The built-in tiny models' evaluation settings (batch size), under the user's eval.*.
    unset = {k: v for k, v in eval_preset("mini").items() if k not in config.eval.model_fields_set}
    config = config.model_copy(update={"eval": config.eval.model_copy(update=unset)})
    mini = miniature(config, out, progress=progress)
    data = corpus_data(config, bench, mini)
    study = corpus_models(config, bench, data, mini, progress=progress)
    timings: dict[str, float] = dict(mini.timings)
    workers = study_workers(config, None)
    # The split the benchmark's evaluation is asked for (its test sets do not depend on the
    # forget set unlearnt): every request is scored as the study's own forget set is.
    eval_split = next(iter(bench.forget_sets))
    pool = make_pool(workers)
    try:
        jobs: list[Job] = []
        for split in bench.forget_sets:
            for role, model_dir in (
                ("retain", study.retain[split]),
                ("finetuned", study.finetuned),
            ):
                folder = out / "logs" / split / role / "step-0"
                args = (model_dir, study, config, split, folder, True)
                jobs.append(((split, role), f"{split}: {role}", eval_job, args))
            for name in config.study.methods:
                args = (study, config, out, split, name, None)
                jobs.append(((split, name), f"{split}: {name}", method_job, args))
        # After the study's own runs, so a request with the study's forget set finds it made.
        series = present_series(bench, data, config)
        runs = shared_runs(bench, data, series)
        jobs += request_jobs(study, config, out, series, runs, eval_split)
        futures = run_pool(pool, jobs, title=f"{bench.name} study", progress=progress)
    finally:
        pool.shutdown(cancel_futures=True)
    rows: list[dict[str, Any]] = []
    for split in bench.forget_sets:
        references: dict[str, Evaluated] = {}
        for role in ("retain", "finetuned"):
            references[role], timings[f"eval_{split}_{role}"] = futures[split, role].result()
        for role, evaluated in references.items():
            rows.append(
                corpus_row(bench, split, role, 0, 0.0, evaluated, references["retain"], out)
            )
        for name in config.study.methods:
            trajectory = futures[split, name].result()
            timings[f"unlearn_{split}_{name}"] = trajectory.unlearn_seconds
            timings[f"eval_{split}_{name}"] = trajectory.eval_seconds
            for step, epoch, _, evaluated in trajectory.snapshots:
                rows.append(
                    corpus_row(
                        bench, split, name, step, epoch, evaluated, references["retain"], out
                    )
                )
    scored = {role: futures[eval_split, role].result()[0] for role in ("retain", "finetuned")}

    def make_row(
        split: str, method: str, step: int, epoch: float, evaluated: Evaluated
    ) -> dict[str, Any]:
        return corpus_row(bench, split, method, step, epoch, evaluated, scored["retain"], out)

    sequence = request_rows(series, config.study.methods, futures, scored, make_row, timings)
    timings["total"] = time.perf_counter() - started
    results = {
        "forgetbench_version": __version__,
        "git_sha": git_sha(),
        "seed": config.seed,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "benchmark": bench.name,
        "scale": config.scale,
        "model": str(study.finetuned),
        "workers": workers,
        "config": config.model_dump(),
        "metric_versions": {name: info.version for name, info in METRICS.items()},
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "validity": check_gaps(
            rows,
            [(g.key, g.margin, g.what) for g in bench.gaps],
            [(f.key, f.floor, f.what) for f in (bench.utility_floor,) if f is not None],
        ),
        "rows": rows,
        **({"sequence": sequence} if sequence else {}),
    }
    write_results(out, results)
    return results
