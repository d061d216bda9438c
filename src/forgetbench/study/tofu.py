"""The TOFU-shaped study: `forgetbench run` on the built-in miniature or a TOFU-layout folder
(`--model`, `--data`). Data -> base model -> finetuned -> retain models -> every method on every
forget split (and seed), with a snapshot per epoch -> every metric -> rows, examples, the
validity gates and results.json. The study's jobs, and how their outcomes become rows, are
`study/tofu_jobs.py`; the cross-format matrix and the sequences run after them
(`study/transfer.py`, `study/sequence.py`). Checked here before any work: the eval preset under
the user's settings, the retain models' logs the user gives (`load_retain_logs`), the options
only another study reads. Splits that hold the same data are computed once and reported under
each name."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.config import RunConfig
from forgetbench.config_names import FORGET_SPLITS, retain_split_for
from forgetbench.data.logs import EvalLog, SetLog, match_questions, read_eval_log
from forgetbench.data.tofu import tofu_eval_sets
from forgetbench.errors import ConfigError, UnknownNameError
from forgetbench.eval.runner import tofu_root
from forgetbench.io import readable_alias
from forgetbench.methods.base import get_method, trains
from forgetbench.metrics import METRICS
from forgetbench.rows import leaderboard, leaderboard_record, seed_summary
from forgetbench.study.format_data import check_formats
from forgetbench.study.given import given_model, is_miniature, recorded_benchmark
from forgetbench.study.inputs import Study
from forgetbench.study.meta_eval import meta_evaluate
from forgetbench.study.miniature import miniature
from forgetbench.study.placement import Placement, miniature_placement, placed
from forgetbench.study.pool import make_pool, study_workers
from forgetbench.study.resolved import resolve
from forgetbench.study.sequence import sequence_rows
from forgetbench.study.splits import same_data_splits
from forgetbench.study.tofu_jobs import run_jobs
from forgetbench.study.transfer import cross_format_rows
from forgetbench.study.written import git_sha, write_results
from forgetbench.train.presets import eval_preset
from forgetbench.validity import check_validity


def with_setup_defaults(config: RunConfig) -> RunConfig:
    """The config with the miniature's eval preset (presets/mini.yaml) under the user's eval.*
    settings, for the built-in study; results.json records the values used."""
    return miniature_eval_defaults(config) if is_miniature(config) else config


def miniature_eval_defaults(config: RunConfig) -> RunConfig:
    """The miniature's eval preset under the user's eval.* settings, whatever model the config
    names (meta-eval's pools are the miniature's models)."""
    unset = {k: v for k, v in eval_preset("mini").items() if k not in config.eval.model_fields_set}
    return config.model_copy(update={"eval": config.eval.model_copy(update=unset)})


def load_retain_logs(config: RunConfig, study: Study) -> dict[str, EvalLog]:
    """`study.retain_logs` of the splits with no retain model of ours, read and checked before any
    work: every reference question must be one the evaluation will score (the forget and retain
    sets, cut to `eval.max_questions`), which would otherwise fail the study at its very end."""
    logs: dict[str, EvalLog] = {}
    for split, path in config.study.retain_logs.items():
        if split not in FORGET_SPLITS:
            raise UnknownNameError("split in study.retain_logs", split, FORGET_SPLITS)
        if split not in config.study.splits or split in study.retain:
            continue
        log = read_eval_log(path)
        sets = tofu_eval_sets(tofu_root(study.data), split, max_questions=config.eval.max_questions)
        # The questions the evaluation will log: the question text stands in for the prompt.
        expected = EvalLog(
            f"the {split} evaluation (eval.max_questions={config.eval.max_questions})",
            {
                name: SetLog(
                    name,
                    tuple(str(i) for i in range(len(sets[name]))),
                    {"generated_text": [[r.question, "", r.answer] for r in sets[name]]},
                )
                for name in ("forget", "retain")
            },
        )
        for name in ("forget", "retain"):
            match_questions(log, expected, name)
        logs[split] = log
    return logs


def run_tofu_study(
    config: RunConfig,
    *,
    out: Path,
    progress: bool = True,
) -> dict[str, Any]:
    """The TOFU-shaped study of the config's model and data (the built-in miniature's when it
    names none), written to `out` as results.json."""
    started = time.perf_counter()
    instructed = [m for m in config.study.methods if not trains(get_method(m))]
    if instructed:  # its run is the start model: only an evaluation that instructs measures it
        raise ConfigError(
            f"method {instructed[0]} unlearns by an instruction before each prompt, which only "
            "RWKU's evaluation puts there; this study would score the unchanged model",
            f"drop {instructed[0]} from --methods (docs/rwku.md, 'Settings')",
        )
    config = with_setup_defaults(config)
    model = given_model(config)
    if config.study.meta_eval and not is_miniature(config):
        raise ConfigError(
            "study.meta_eval trains pools of the built-in miniature's models",
            "drop study.meta_eval, or run the built-in study (no --model, --data or --benchmark)",
        )
    if "requests" in config.study.model_fields_set:
        raise ConfigError(
            "study.requests is an option of a document benchmark's study (MUSE's scalability "
            "and sustainability), which this study does not read",
            "drop study.requests (this study's requests one after another are study.sequence)",
        )
    placement = miniature_placement(config, model)
    workers = study_workers(config, model) if placement is None else placement.workers
    if placement is not None:
        print(placement.line(), file=sys.stderr)
    with placed(placement):
        return _run_placed(config, out, progress, started, model, workers, placement)


def _run_placed(
    config: RunConfig,
    out: Path,
    progress: bool,
    started: float,
    model: str | None,
    workers: int,
    placement: Placement | None,
) -> dict[str, Any]:
    both = placement is not None and placement.kind == "both"
    pool = make_pool(workers, placement.devices() if both else ())
    reported = config
    peak_gpu: dict[str, float] = {}  # each unlearning run's peak GPU memory, in MiB
    reused: list[str] = []  # the unlearning runs taken from an earlier run's folder
    try:
        same: dict[str, str] = {}
        mini = None
        if is_miniature(config):
            mini = miniature(config, out, progress=progress)
            same = same_data_splits(mini.data / "tofu", config.study.splits)
            computed = [s for s in config.study.splits if s not in same]
            config = config.model_copy(
                update={"study": config.study.model_copy(update={"splits": computed})}
            )
        sequence = config.study.sequence
        if sequence and not is_miniature(config):
            raise ConfigError(
                "study.sequence needs a retain model for each union of requests, which the "
                "built-in miniature trains",
                "drop study.sequence, or run the built-in study (no --model, --data or "
                "--benchmark)",
            )
        study, timings = resolve(
            config, out, progress=progress, forget_splits=config.study.splits, pool=pool,
            mini=mini, retain_only=sequence,
        )  # fmt: skip
        if mini is not None:
            peak_gpu.update(mini.peak_gpu_mib)
            # The names `forgetbench finetune` leaves, so the Python API's scripts read a study's
            # models as `runs/x/finetuned` rather than `runs/x/models/finetune-<key>/model`.
            readable_alias(out, "finetuned", study.finetuned)
            for split, retain in study.retain.items():
                readable_alias(out, retain_split_for(split), retain)
        if config.study.unlearn_formats != ["qa"]:
            check_formats(config.study.unlearn_formats, study.data, config.study.methods)
        retain_logs = load_retain_logs(config, study)
        rows, examples = run_jobs(
            study, config, out, pool, timings, retain_logs=retain_logs, progress=progress,
            peak_gpu=peak_gpu, reused=reused,
        )  # fmt: skip
        # The cross-format matrix and the sequences run after the study's own jobs: a run they
        # share with it (qa, one-shot) is then read from its cache, never trained twice at once.
        extra: dict[str, Any] = {}
        if config.study.unlearn_formats != ["qa"]:
            cross = cross_format_rows(
                study, config, out, pool, timings, rows, retain_logs=retain_logs,
                progress=progress,
            )  # fmt: skip
            extra["cross_format"] = _reported_under(reported.study.splits, same, cross, [])[0]
        if sequence:
            extra["sequence"] = sequence_rows(
                study, config, out, pool, timings, retain_logs=retain_logs, progress=progress
            )
        rows, examples = _reported_under(reported.study.splits, same, rows, examples)
        rows = _logs_under_own_names(out, same, rows)
        if config.study.meta_eval:
            # The largest forget split: the most questions per metric, the steadiest pools.
            split = max(config.study.splits, key=FORGET_SPLITS.index)
            t = time.perf_counter()
            meta_evaluate(config, out=out, forget_split=split, progress=progress, pool=pool)
            timings["meta_eval"] = time.perf_counter() - t
    finally:
        pool.shutdown(cancel_futures=True)
    timings["total"] = time.perf_counter() - started
    if config.study.seeds:
        extra["seed_intervals"] = seed_summary(rows, leaderboard(rows))
    # The leaderboard as the report shows it, with what each entry is flagged for: a results.json
    # is then publishable without rerunning the report's arithmetic.
    if rows:
        extra["leaderboard"] = leaderboard_record([r for r in rows if r["split"] not in same])
    results = {
        "forgetbench_version": __version__,
        "git_sha": git_sha(),
        "seed": config.seed,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "benchmark": recorded_benchmark(config),
        "scale": config.scale if model is None else None,
        "model": str(model or study.finetuned),
        "workers": workers,
        # On a GPU machine, where the workers ran and the measurement that chose it.
        **({"placement": placement.record()} if placement is not None else {}),
        "config": _dumped(reported),
        "metric_versions": {name: info.version for name, info in METRICS.items()},
        "timings": {k: round(v, 2) for k, v in timings.items()},
        # Which methods' unlearning this run reused rather than trained (run-specific, as timings).
        "reused": reused,
        # Peak GPU memory of each training stage, in MiB (on the CPU there is none to report).
        **({"peak_gpu_mib": peak_gpu} if peak_gpu else {}),
        # Before the rows: whether they can be ranked at all (forgetbench.validity).
        "validity": check_validity(rows),
        "rows": rows,
        "examples": examples,
        **({"same_data": same} if same else {}),
        **extra,
    }
    write_results(out, results)
    return results


def _dumped(config: RunConfig) -> dict[str, Any]:
    """The config as results.json records it. The cross-format and sequence options appear only
    when set: a study without them writes the results.json it wrote before they existed. A
    document benchmark's `study.requests` never appears: this study does not read it."""
    dumped = config.model_dump()
    study = dumped["study"]
    if study["unlearn_formats"] == ["qa"]:
        del study["unlearn_formats"]
    if not study["sequence"]:
        del study["sequence"]
    del study["requests"]  # a document benchmark's option (refused above when set)
    return dumped


def _reported_under(
    splits: list[str],
    same: dict[str, str],
    rows: list[dict[str, Any]],
    examples: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows and examples in the study's split order, each split in `same` given its computed
    split's under its own name (the log folders stay the computed split's)."""

    def under(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {**item, "split": split}
            for split in splits
            for item in items
            if item["split"] == same.get(split, split)
        ]

    return under(rows), under(examples)


def _logs_under_own_names(
    out: Path, same: dict[str, str], rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Rows of a split in `same` point at `logs/{split}/...` as every other split's do: the
    folder is a relative link to the computed split's logs, made here. Where a real folder
    already sits at that name (left by an older study) or the file system refuses links, the
    rows keep pointing at the computed split's folder, which exists."""
    linked = set()
    for split, computed in same.items():
        link = out / "logs" / split
        try:
            if link.is_symlink():
                link.unlink()
            if not link.exists():
                link.symlink_to(computed, target_is_directory=True)
                linked.add(split)
        except OSError:
            continue

    def own(row: dict[str, Any]) -> dict[str, Any]:
        split, log = row["split"], row.get("log")
        prefix = f"logs/{same.get(split)}/"
        if split not in linked or not isinstance(log, str) or not log.startswith(prefix):
            return row
        return {**row, "log": f"logs/{split}/{log[len(prefix) :]}"}

    return [own(row) for row in rows]
