"""`forgetbench eval`: every metric of one given model on its data, through the one cached
evaluation (`evaluate.evaluate_cached`). A benchmark whose evaluation scores one forget set at a
time (RWKU: one target's probes, MIA passages and utility sets) gets each chosen set as its own
evaluation, in a folder of its own under --out named by the set (`OUT/1_Stephen_King/`, with its
logs and summary.json, as a study's evaluation of that split), the model loaded once for all of
them; `OUT/summary.json`, written last, holds every set's scores, and an interrupted evaluation
run again reads back the sets that finished."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.benchmarks.corpus import corpus_benchmark
from forgetbench.config import RunConfig
from forgetbench.errors import ConfigError
from forgetbench.eval.runner import SUMMARY_NAME
from forgetbench.io import atomic_write_json
from forgetbench.metrics import METRICS
from forgetbench.modeling.loading import load_tokenizer
from forgetbench.modeling.templates import resolve_template
from forgetbench.study.evaluate import (
    Extension,
    document_extension,
    eval_extension,
    evaluate_cached,
    lm_eval_scores,
    read_reference,
    require_eval_files,
)
from forgetbench.study.given import given_data, given_model, recorded_benchmark
from forgetbench.study.inputs import Study


def eval_command(
    config: RunConfig, *, out: Path, retain_log: str | None, progress: bool, quiet: bool
) -> dict[str, Any]:
    """`forgetbench eval`: every metric of the config's model on its data and split, written to
    `out` (never over a finished evaluation), with forget quality against `retain_log`, the
    lm-eval tasks and LUME's final score. `progress`: a line per task on stderr, on a terminal;
    `quiet`: no notes either. Returns the summary: the scores and what they were measured on."""
    model, data = given_model(config), given_data(config)
    assert model is not None and data is not None  # the command requires --model and --data
    if (out / SUMMARY_NAME).exists():
        raise ConfigError(
            f"{out / SUMMARY_NAME} already exists",
            "pass another --out; finished evaluations are never overwritten",
        )
    # eval always scores given data, so the default benchmark name (mini) means a TOFU-layout
    # folder (every task reads "mini" and "tofu" alike), and the summary records it as tofu.
    benchmark = recorded_benchmark(config)
    documents = corpus_benchmark(benchmark)
    # Read before the work, so a bad path fails at once.
    reference = read_reference(retain_log) if documents is None else (None, None)
    chosen: list[str] = []
    info = {
        "model": model,
        "data": data,
        "benchmark": benchmark,
        "split": config.benchmark.split,
        "retain_log": retain_log,
        "forgetbench": __version__,
        "metric_versions": {name: m.version for name, m in METRICS.items()},
        "config": config.model_dump(),
    }
    if documents is not None:
        extend = document_extension(documents, retain_log, config)
        documents.require(Path(data))
        # The sets scored one by one (RWKU's targets), named before any model loads.
        chosen = documents.eval_sets(Path(data), config) if documents.eval_sets else []
        if "rwku_utility" in documents.eval_options and config.eval.rwku_utility == "lm_eval":
            extend = with_lm_eval_utility(extend, model, config)
        if config.eval.lm_eval_tasks:
            # Measured once, before any set is scored (the model's, the same for every set).
            extend = _with_scores(extend, lm_eval_scores(model, config))
        # What the scores were measured on, wherever the folder lies: a study given this
        # evaluation as its retain log checks it is of the study's data (`retain_summary`).
        info["data_digest"] = documents.digest(Path(data))
        for note in [] if quiet else documents.notes(Path(data)):
            print(f"note: {note}", file=sys.stderr)
        benchmark = documents.eval_layout
    else:
        extend = eval_extension(config, model, reference)
        if benchmark != "lume":
            require_eval_files(config, Path(data), quiet=quiet)
    tokenizer = load_tokenizer(model, trust_remote_code=config.model.trust_remote_code)
    study = Study(
        data=Path(data),
        finetuned=Path(model),
        base=None,
        retain={},
        template=resolve_template(config.model.template, tokenizer, model),
        max_length=config.train.max_length,
        unlearn_defaults=_no_unlearning,
        benchmark=benchmark,
    )
    started = time.perf_counter()
    if documents is not None and documents.eval_sets is not None:
        return eval_each_set(chosen, config, study, out=out, info=info, extend=extend,
                             progress=progress)  # fmt: skip

    scores = evaluate_cached(
        model, study, split=config.benchmark.split, eval_config=config.eval, folder=out,
        model=config.model, info=info, extend=extend, shared=False,
        on_task=_task_lines(config.benchmark.split, started, progress),
    ).scores  # fmt: skip
    return {"scores": scores, "out": str(out), **info}


def _task_lines(label: str, started: float, progress: bool) -> Callable[[str, int, int], None]:
    """The evaluation's `on_task`: on a terminal, like the training bars, a line per task
    ("eval LABEL: task k/n NAME (S s so far)"); a log or a pipe gets the result lines only."""

    def on_task(name: str, k: int, n: int) -> None:
        if progress and sys.stderr.isatty():
            print(
                f"eval {label}: task {k}/{n} {name} ({time.perf_counter() - started:.0f} s so far)",
                file=sys.stderr, flush=True,
            )  # fmt: skip

    return on_task


def _no_unlearning(name: str) -> tuple[Any, dict[str, object]]:
    # `forgetbench eval` scores a model and unlearns nothing: there are no unlearning defaults.
    return None, {}


def with_lm_eval_utility(extend: Extension, model: str, config: RunConfig) -> Extension:
    """`extend`, adding RWKU's utility through lm-eval (`eval.rwku_utility=lm_eval`), measured
    here, before any set is scored: lm-eval missing, or its data offline, stops the command
    before any work, and one run serves every set (utility does not depend on the target)."""
    from forgetbench.eval.rwku_utility import lm_eval_rwku_utility

    return _with_scores(extend, lm_eval_rwku_utility(model, config))


def _with_scores(extend: Extension, added: dict[str, Any]) -> Extension:
    """`extend`, adding the scores `added` (the model's, measured once) to each set's."""

    def extended(log: Any, scores: dict[str, Any]) -> dict[str, Any]:
        return {**extend(log, scores), **added}

    return extended


def eval_each_set(
    sets: Sequence[str],
    config: RunConfig,
    study: Study,
    *,
    out: Path,
    info: dict[str, Any],
    extend: Extension,
    progress: bool,
) -> dict[str, Any]:
    """Scores `study.finetuned` (the given model) on each of `sets`. Returns the summary: the
    sets in order (`splits`) and `scores`, each set's scores by its name."""
    from forgetbench.modeling.loading import load_model

    model_dir = study.finetuned
    assert model_dir is not None
    started = time.perf_counter()

    @cache
    def load() -> tuple[Any, Any]:
        return load_model(
            model_dir, dtype=config.model.dtype, trust_remote_code=config.model.trust_remote_code
        )

    scores: dict[str, dict[str, Any]] = {}
    for k, name in enumerate(sets, 1):
        scores[name] = evaluate_cached(
            model_dir, study, split=name, eval_config=config.eval, folder=out / name,
            model=config.model, info={**info, "split": name}, extend=extend, shared=False,
            on_task=_task_lines(f"{name} ({k}/{len(sets)})", started, progress), load=load,
        ).scores  # fmt: skip
    summary = {**info, "split": None, "splits": list(sets), "scores": scores}
    atomic_write_json(out / SUMMARY_NAME, summary)
    return {**summary, "out": str(out)}
