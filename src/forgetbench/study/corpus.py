"""`forgetbench run --benchmark muse|wmdp|rwku`: the study of a document benchmark, built from its
description (`forgetbench.benchmarks.corpus`) without knowing which one it is.

Data (the benchmark's built-in miniature in its released layout, or the user's folder of it) ->
the miniature's pretrained base -> the finetuned model (the base trained on the benchmark's
finetune documents) and the retain model (trained without the forget documents) -> every method
on every forget set of the benchmark, unlearning on text chunks, and on each series of forget
requests it has (`study/requests.py`) -> the benchmark's evaluation of every model and snapshot
-> rows, the validity gates (the finetuned model must be measurably
above the retain model) and results.json. Each model is a cached stage and each evaluation a
cached one, as in the TOFU-shaped study.

With the user's model (`--model`, with `--data`) nothing is trained before unlearning: the given
model is the finetuned model, and the retain model comes as the summary that `forgetbench eval`
wrote for it (`study.retain_logs`, run's `--retain-log`), or not at all: its row and the scores
relative to it (MUSE's PrivLeak) are then missing, and the gates say they cannot be checked."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.benchmarks.corpus import CorpusBenchmark
from forgetbench.config import RunConfig
from forgetbench.criteria import criteria_record
from forgetbench.errors import ConfigError, UnknownNameError
from forgetbench.eval.runner import EXTRA_NAME
from forgetbench.io import read_json
from forgetbench.methods.base import INPUT_FIELDS, build_method, get_method, trains
from forgetbench.metrics import METRICS
from forgetbench.study.corpus_models import corpus_models, given_study
from forgetbench.study.evaluate import Evaluated, log_folder, retain_summary
from forgetbench.study.given import given_data, given_model
from forgetbench.study.inputs import Study
from forgetbench.study.jobs import Job, eval_job, method_job, model_row, run_pool
from forgetbench.study.miniature import Miniature, miniature
from forgetbench.study.pool import make_pool, study_workers
from forgetbench.study.requests import present_series, request_jobs, request_rows, shared_runs
from forgetbench.study.unlearn import finetune_settings
from forgetbench.study.written import git_sha, write_results
from forgetbench.train.generated_corpus import generate_corpus, generation_of
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
        # Its run is the start model: only an evaluation that instructs measures it.
        if not trains(get_method(name)) and not bench.instructs:
            raise ConfigError(
                f"method {name} unlearns by an instruction before each prompt, which "
                f"{bench.title}'s evaluation does not put there; this study would score the "
                "unchanged model",
                f"drop {name} from --methods (docs/rwku.md, 'Settings')",
            )
        needs = answers_questions(name)
        # A benchmark with corpora of its own for such methods (RWKU's pairs and refusals)
        # gives them what they train toward; alternate answers none has.
        if bench.method_forget is not None and not needs & ALTERNATE_FIELDS:
            continue
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
    work, as every command refuses what it would not read; and a study of the user's model
    without the folder it was finetuned on."""
    where = f"forgetbench run --benchmark {bench.name}"
    study = config.study
    if given_model(config) is not None and given_data(config) is None:
        raise ConfigError(
            f"{where} --model needs --data, the folder of {bench.title}'s files in its released "
            "layout whose documents your model was finetuned on and is to forget",
            f"add --data DIR (docs/{bench.name}.md, 'Running it on your model')",
        )
    if given_model(config) is None and study.retain_logs:
        raise ConfigError(
            f"study.retain_logs (--retain-log) names a retain model's evaluation for a study of "
            f"your own model; {where} without --model trains its own retain model",
            "drop it, or give your finetuned model with --model and its data with --data",
        )
    forget_sets = bench.sets(Path(given_data(config))) if given_data(config) else bench.forget_sets
    for split in study.retain_logs:
        if split not in forget_sets:
            raise UnknownNameError(f"{bench.title} split in study.retain_logs", split, forget_sets)
    # Refused when set (the default study's robustness attacks are simply not run).
    unread = ("attacks", "seeds", "sequence", "meta_eval", "mia_shadow_models")
    given = {f"study.{k}": getattr(study, k) for k in unread if k in study.model_fields_set}
    given["study.unlearn_formats"] = study.unlearn_formats != ["qa"]
    for key, value in given.items():
        if value:
            raise ConfigError(
                f"{key} is an option of the TOFU-shaped study, which {where} does not read",
                f"drop {key}",
            )
    refuse_document_methods(bench, study.methods)


Logged = tuple[Path, dict[str, Any]]  # a retain model's evaluation folder and its summary


def logged_retain(config: RunConfig, bench: CorpusBenchmark) -> dict[str, Logged]:
    """Per forget split, the retain model's evaluation from `study.retain_logs`, read and checked
    before any work (`retain_summary`: this benchmark's scores, at this run's scored length)."""
    return {
        split: (
            log_folder(path),
            retain_summary(
                bench, path, what=f"study.retain_logs.{split} (--retain-log)", config=config
            ),
        )
        for split, path in config.study.retain_logs.items()
    }


def corpus_data(config: RunConfig, bench: CorpusBenchmark, mini: Miniature) -> Path:
    """The benchmark's folder: the user's (`--data`, which `run_corpus_study` checked whole
    before any work), or its built-in miniature for the scale and seed, which the miniature's
    data folder holds beside TOFU's files (what `forgetbench data generate` writes)."""
    given = given_data(config)
    if given is not None:
        return Path(given)
    folder = mini.data / bench.miniature_folder
    bench.require(folder)
    bench.chosen_sets(folder, config)  # what the run chooses of it, refused before any training
    return folder


def corpus_row(
    bench: CorpusBenchmark,
    split: str,
    method: str,
    step: int,
    epoch: float,
    evaluated: Evaluated,
    retain: dict[str, Any] | None,
    out: Path,
) -> dict[str, Any]:
    """One model's row: its scores and what the benchmark computes from them and the retain
    model's scores `retain` (`relative`, e.g. PrivLeak; None without a retain model)."""
    scores = dict(evaluated.scores)
    scores.update(bench.relative_scores(scores, retain))
    return model_row(split, method, step, epoch, scores, evaluated, out)


def document_examples(
    split: str, method: str, step: int, evaluated: Evaluated, n: int
) -> list[dict[str, Any]]:
    """The first `n` of a model's MUSE KnowMem answers on the forget set, or of its RWKU forget
    probes (question, reference answer, generation) as results.json examples; none for a
    benchmark without generated answers (WMDP scores multiple choice)."""
    extra = evaluated.folder / EXTRA_NAME
    if n == 0 or not extra.is_file():
        return []
    extra_log = read_json(extra, what="evaluation log")
    logged = extra_log.get("muse") or {}
    items = logged.get("knowmem_f") or []
    # RWKU's forget probes: the query, the answer and the answer generated.
    items += [{**item, "question": item.get("query")}
              for item in (extra_log.get("rwku") or {}).get("forget") or []]  # fmt: skip
    return [
        {"split": split, "method": method, "step": step, "question": item.get("question"),
         "ground_truth": item.get("answer"), "generation": item.get("generation")}
        for item in items[:n]
    ]  # fmt: skip


def logged_retain_row(
    bench: CorpusBenchmark, split: str, logged: Logged, out: Path
) -> dict[str, Any]:
    """The retain model's row from its evaluation (`study.retain_logs`): its summary's scores,
    and the relative ones against itself (PrivLeak 0, as a retain model of ours gets). Its log
    is the evaluation's folder, relative to the results folder as every row's."""
    folder, summary = logged
    scores = dict(summary["scores"])
    scores.update(bench.relative_scores(scores, scores))
    log = os.path.relpath(folder, out)
    return {"split": split, "method": "retain", "step": 0, "epoch": 0.0, **scores, "log": log}


def corpus_study(
    config: RunConfig, bench: CorpusBenchmark, out: Path, *, progress: bool
) -> tuple[Study, dict[str, float]]:
    """The study's data and models, and the wall time of each stage this run: the user's model
    on their folder, or the built-in tiny models trained on the benchmark's miniature (or on the
    user's folder)."""
    if given_model(config) is not None:
        return given_study(config, bench, Path(given_data(config))), {}  # type: ignore[arg-type]
    mini = miniature(config, out, progress=progress)
    data = corpus_data(config, bench, mini)
    study = corpus_models(config, bench, data, mini, progress=progress)
    return study, dict(mini.timings)


def run_corpus_study(
    config: RunConfig, bench: CorpusBenchmark, *, out: Path, progress: bool = True
) -> dict[str, Any]:
    """The whole study of document benchmark `bench`, written to `out` as results.json."""
    started = time.perf_counter()
    config = document_methods(config)
    refuse_unread_options(config, bench)
    if given_data(config) is not None:
        bench.require(Path(given_data(config)))  # type: ignore[arg-type]  # before any output
        bench.chosen_sets(Path(given_data(config)), config)  # type: ignore[arg-type]
        for note in bench.notes(Path(given_data(config))):  # type: ignore[arg-type]
            print(f"note: {note}", file=sys.stderr)
    model = given_model(config)
    if model is None:
        # The built-in tiny models' evaluation settings (batch size), under the user's eval.*.
        preset = eval_preset("mini").items()
        unset = {k: v for k, v in preset if k not in config.eval.model_fields_set}
        config = config.model_copy(update={"eval": config.eval.model_copy(update=unset)})
    logged = logged_retain(config, bench)
    study, timings = corpus_study(config, bench, out, progress=progress)
    to_write = bench.corpus_to_write(config, study) if bench.corpus_to_write else None
    if to_write is not None:  # the forget corpora the original model writes (RWKU's)
        started_corpus = time.perf_counter()
        generation = generation_of(to_write.pop("generation"))
        written = generate_corpus(out, model_dir=study.finetuned, generation=generation, **to_write)
        study = dataclasses.replace(study, corpus=written)
        timings[f"{bench.name}_corpus"] = time.perf_counter() - started_corpus
    workers = study_workers(config, model)
    # The split the benchmark's evaluation is asked for (its test sets do not depend on the
    # forget set unlearnt): every request is scored as the study's own forget set is.
    forget_sets = bench.chosen_sets(study.data, config)
    eval_split = next(iter(forget_sets))
    pool = make_pool(workers)
    try:
        jobs: list[Job] = []
        for split in forget_sets:
            models = {"retain": study.retain.get(split), "finetuned": study.finetuned}
            for role, model_dir in models.items():
                if model_dir is not None:
                    folder = out / "logs" / split / role / "step-0"
                    args = (model_dir, study, config, split, folder, True)
                    jobs.append(((split, role), f"{split}: {role}", eval_job, args))
            for name in config.study.methods:
                args = (study, config, out, split, name, None)
                jobs.append(((split, name), f"{split}: {name}", method_job, args))
        # After the study's own runs, so a request with the study's forget set finds it made.
        series = present_series(bench, study.data, config)
        runs = shared_runs(bench, study.data, series)
        jobs += request_jobs(study, config, out, series, runs, eval_split)
        futures = run_pool(pool, jobs, title=f"{bench.name} study", progress=progress)
    finally:
        pool.shutdown(cancel_futures=True)
    rows: list[dict[str, Any]] = []
    reused: list[str] = []  # the unlearning runs taken from an earlier run's folder
    examples: list[dict[str, Any]] = []  # generations: the finetuned model's, each final model's
    retains: dict[str, dict[str, Any] | None] = {}
    for split in forget_sets:
        retain: dict[str, Any] | None = None
        if (split, "retain") in futures:
            evaluated, timings[f"eval_{split}_retain"] = futures[split, "retain"].result()
            retain = evaluated.scores
            row = corpus_row(bench, split, "retain", 0, 0.0, evaluated, retain, out)
            rows.append({**row, **finetune_settings(study)})
        elif split in logged:
            rows.append(logged_retain_row(bench, split, logged[split], out))
            retain = logged[split][1]["scores"]
        finetuned, timings[f"eval_{split}_finetuned"] = futures[split, "finetuned"].result()
        examples += document_examples(split, "finetuned", 0, finetuned, config.study.examples)
        row = corpus_row(bench, split, "finetuned", 0, 0.0, finetuned, retain, out)
        rows.append({**row, **finetune_settings(study)})
        for name in config.study.methods:
            trajectory = futures[split, name].result()
            if trajectory.cached:
                reused.append(f"{name} ({split})")
            timings[f"unlearn_{split}_{name}"] = trajectory.unlearn_seconds
            timings[f"eval_{split}_{name}"] = trajectory.eval_seconds
            for step, epoch, final, evaluated in trajectory.snapshots:
                row = corpus_row(bench, split, name, step, epoch, evaluated, retain, out)
                rows.append({**row, **trajectory.settings})
                if final:
                    examples += document_examples(
                        split, name, step, evaluated, config.study.examples
                    )
        retains[split] = retain

    def make_row(
        split: str, method: str, step: int, epoch: float, evaluated: Evaluated
    ) -> dict[str, Any]:
        return corpus_row(bench, split, method, step, epoch, evaluated, retains[eval_split], out)

    references = [r for r in rows if r["split"] == eval_split and r["step"] == 0]
    sequence = request_rows(series, config.study.methods, futures, references, make_row, timings)
    if bench.split_rows is not None:  # an RWKU batch's rows per target, beside its means
        rows = bench.split_rows(rows)
    timings["total"] = time.perf_counter() - started
    results = {
        "forgetbench_version": __version__,
        "git_sha": git_sha(),
        "seed": config.seed,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "benchmark": bench.name,
        "scale": config.scale if model is None else None,
        "model": model or str(study.finetuned),
        "workers": workers,
        # What this study read: none of the TOFU-shaped study's options (splits, formats, ...).
        "config": bench.read_config(config.model_dump()),
        "metric_versions": {name: info.version for name, info in METRICS.items()},
        "timings": {k: round(v, 2) for k, v in timings.items()},
        "reused": reused,
        # The folder of forget corpora the original model wrote for this run, when it did.
        **({"forget_corpus": os.path.relpath(study.corpus, out)} if study.corpus else {}),
        "validity": check_gaps(
            rows,
            [(g.key, g.margin, g.what, *([g.fix] if g.fix else [])) for g in bench.gaps],
            [(f.key, f.floor, f.what) for f in (bench.utility_floor,) if f is not None],
        ),
        "rows": rows,
        "examples": examples,
        **({"sequence": sequence} if sequence else {}),
        # MUSE's criteria (over-unlearning flagged) or WMDP's accuracy against utility, per model.
        "criteria": criteria_record(rows, sequence),
    }
    write_results(out, results)
    return results
