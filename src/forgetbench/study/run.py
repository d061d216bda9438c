"""`forgetbench run`: the whole study in one command. Data -> base model -> finetuned -> retain
models -> every method on every split, with a snapshot per epoch -> every metric -> results
folder and report. Each stage is cached by its inputs, so an interrupted run resumes where it
stopped and a finished one reruns in seconds."""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from forgetbench import __version__
from forgetbench.benchmarks.corpus import corpus_benchmark
from forgetbench.config import RunConfig
from forgetbench.config_names import FORGET_SPLITS, retain_split_for
from forgetbench.data.logs import EvalLog, SetLog, match_questions, read_eval_log
from forgetbench.data.tofu import tofu_eval_sets
from forgetbench.errors import ConfigError, DataError, UnknownNameError
from forgetbench.eval.runner import tofu_root
from forgetbench.io import readable_alias
from forgetbench.methods.base import get_method, trains
from forgetbench.metrics import METRICS
from forgetbench.rows import chosen_steps, leaderboard, leaderboard_record, seed_summary
from forgetbench.study.attack import attack_job
from forgetbench.study.attack_rows import attack_rows
from forgetbench.study.corpus import run_corpus_study
from forgetbench.study.evaluate import Evaluated, evaluate_cached
from forgetbench.study.format_data import check_formats
from forgetbench.study.given import given_model, is_miniature, recorded_benchmark
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
from forgetbench.study.meta_eval import meta_evaluate
from forgetbench.study.miniature import miniature
from forgetbench.study.pool import make_pool, quiet_transformers, study_workers
from forgetbench.study.resolved import resolve
from forgetbench.study.sequence import sequence_rows
from forgetbench.study.shadows import read_shadow, shadow_candidates
from forgetbench.study.splits import same_data_splits
from forgetbench.study.transfer import cross_format_rows
from forgetbench.study.unlearn import finetune_settings
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


def shadow_masks(study: Study, split: str) -> list[tuple[Path, list[bool]]]:
    """(model folder, membership mask over the split's candidates) of each of `split`'s shadow
    models, checked: every member a candidate, every candidate in and out of some shadow."""
    files = study.shadows.get(split, [])
    if not files:
        return []
    candidates = shadow_candidates(tofu_root(study.data), split)
    if candidates is None:
        holdout = split.replace("forget", "holdout")
        raise DataError(
            f"shadow models are given for {split} but the data has no {holdout} split to tell "
            "members from non-members",
            f"add {holdout}.json to the data, or drop {split} from study.mia_shadow_models",
        )
    if len(files) < 2:
        raise DataError(
            f"one shadow model for {split} ({files[0]}): LiRA and RMIA compare shadows that "
            "trained on a candidate with shadows that did not",
            "give at least 2 shadow models per split",
        )
    questions = [r.question for r in candidates]
    shadows = []
    for path in files:
        model, members = read_shadow(path)
        unknown = members.difference(questions)
        if unknown:
            raise DataError(
                f"shadow model file {path} lists {len(unknown)} member(s) that are not "
                f"{split} or holdout questions, e.g. {sorted(unknown)[0]!r}",
                "list the forget/holdout questions the shadow was trained on, as written in "
                "the data",
            )
        shadows.append((model, [q in members for q in questions]))
    for j, question in enumerate(questions):
        inside = sum(mask[j] for _, mask in shadows)
        if inside in (0, len(shadows)):
            side = "no" if inside == 0 else "every"
            raise DataError(
                f"{side} shadow model of {split} trained on {question!r}: online LiRA and RMIA "
                "need every candidate in some shadows' training data and out of others'",
                "train each shadow on a random half of the forget and holdout questions",
            )
    return shadows


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


def run_study(
    config: RunConfig,
    *,
    out: Path,
    progress: bool = True,
) -> dict[str, Any]:
    """`forgetbench run`: the study of the config's model and data (the built-in miniature's
    when it names none), written to `out` as results.json."""
    quiet_transformers()
    documents = corpus_benchmark(config.benchmark.name)
    if documents is not None:  # MUSE, WMDP: the study its description makes
        return run_corpus_study(config, documents, out=out, progress=progress)
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
    workers = study_workers(config, model)
    pool = make_pool(workers)
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
        rows, examples = _run_jobs(
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


def _run_jobs(
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
