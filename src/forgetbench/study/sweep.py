"""`forgetbench sweep`: a grid or seeded random search over each method's lr, epochs and options,
run on a validation split; the winner per method is picked by the study's matched-utility rule and
written as a preset `forgetbench run --config` loads.

The sweep file is a run config (its base settings: scale, unlearn.*, eval.*, ...) with one more
section, `sweep` (`SweepSpec`). A trial is one method at one point of its space: `study.
method_settings` for that method, run through the same `method_job` (cached unlearning, cached
evaluations) as `forgetbench run`, once per seed of `sweep.seeds`, on `sweep.select_split`. The
selection never sees `sweep.report_split`, which is the split the preset makes `run` report on."""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forgetbench.config import RunConfig, _read_yaml, validate_config
from forgetbench.config_names import FORGET_SPLITS, MethodName
from forgetbench.config_study import MethodSettings
from forgetbench.errors import ConfigError
from forgetbench.io import atomic_write_json, atomic_write_text
from forgetbench.rows import UTILITY_RATIO, choose, number, seed_means
from forgetbench.study.jobs import eval_job, logged_retain_row, method_job, study_row
from forgetbench.study.resolved import resolve
from forgetbench.study.tofu import load_retain_logs, with_setup_defaults
from forgetbench.validity import check_validity

SWEEP_FILE = "sweep.json"
PRESET_FILE = "selected.yaml"
REPORT_FILE = "sweep.html"
# The keys a trial may set; a method option is method.<option> (docs/methods.md).
LOOP_KEYS = ("unlearn.lr", "unlearn.epochs")


class Range(BaseModel):
    """A continuous range for random search: uniform, or log-uniform with `log: true`; integer
    bounds without `log` draw integers."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    low: float
    high: float
    log: bool = False


Values = list[Any] | Range


class SweepSpec(BaseModel):
    """The `sweep` section of a sweep file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    methods: dict[MethodName, dict[str, Values] | None] = Field(min_length=1)
    space: dict[str, Values] = Field(default_factory=dict)  # every method's keys
    search: Literal["grid", "random"] = "grid"
    trials: int | None = Field(None, ge=1)  # random search: trials per method
    seed: int = Field(0, ge=0)  # random search's draws
    seeds: list[int] = Field(default_factory=lambda: [0])  # unlearning seeds of every trial
    select_split: Literal[FORGET_SPLITS] = "forget05"  # type: ignore[valid-type]
    report_split: Literal[FORGET_SPLITS] = "forget10"  # type: ignore[valid-type]


@dataclass(frozen=True)
class Trial:
    method: str
    index: int  # per method, from 0, in expansion order
    settings: dict[str, Any]  # sweep key -> value

    def method_settings(self) -> MethodSettings:
        return MethodSettings(**self.settings_data())

    def settings_data(self) -> dict[str, Any]:
        """`method_settings()` before it is checked, for `trial_config` to check as a run would."""
        loop = {key.split(".")[1]: self.settings[key] for key in LOOP_KEYS if key in self.settings}
        options = {
            k.split(".", 1)[1]: v for k, v in self.settings.items() if k.startswith("method.")
        }
        return {**loop, "options": options}


def read_spec(path: str | Path) -> SweepSpec:
    """The `sweep` section of the sweep file at `path`, checked."""
    data = _read_yaml(Path(path)).get("sweep")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path} has no 'sweep' section", "add sweep: {methods: {...}} (docs/sweeps.md)"
        )
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # A value is a list or a Range: of the two branches' errors, the one past "not a list"
        # says what is wrong with the value as written.
        error = next((e for e in errors if e["type"] != "list_type"), errors[0])
        parts = [p for p in error["loc"] if p not in ("list[any]", "Range")]
        key = ".".join(str(p) for p in ("sweep", *parts))
        raise ConfigError(f"{path}: invalid {key}: {error['msg'].lower()}") from None
    check_spec(spec, str(path))
    return spec


def check_spec(spec: SweepSpec, source: str) -> None:
    if spec.select_split == spec.report_split:
        raise ConfigError(
            f"{source}: sweep.select_split and sweep.report_split are both {spec.select_split}",
            "select on one forget split and report on another (e.g. forget05 and forget10)",
        )
    if spec.search == "random" and spec.trials is None:
        raise ConfigError(f"{source}: random search needs sweep.trials", "e.g. trials: 8")
    if spec.search == "grid" and spec.trials is not None:
        raise ConfigError(
            f"{source}: sweep.trials is for random search; a grid runs every combination",
            "drop trials, or set search: random",
        )
    if len(set(spec.seeds)) != len(spec.seeds) or not spec.seeds:
        raise ConfigError(f"{source}: sweep.seeds must list distinct seeds", "e.g. seeds: [0, 1]")
    for method in spec.methods:
        for key, values in _space(spec, method).items():
            if key not in LOOP_KEYS and not (key.startswith("method.") and key.count(".") == 1):
                raise ConfigError(
                    f"{source}: sweep key '{key}' ({method}) is not one a trial can set",
                    f"use {', '.join(LOOP_KEYS)} or method.<option>",
                )
            if spec.search == "grid" and not isinstance(values, list):
                raise ConfigError(
                    f"{source}: grid search needs a list of values for {key} ({method})",
                    "give a list, or use search: random for a range",
                )
            if isinstance(values, list) and not values:
                raise ConfigError(f"{source}: sweep key {key} ({method}) has no values")
            if key in LOOP_KEYS:
                _check_loop_values(key, values, method, source)
            if isinstance(values, Range) and not (
                values.low <= values.high and (not values.log or values.low > 0)
            ):
                raise ConfigError(
                    f"{source}: sweep range of {key} ({method}) needs low <= high "
                    "(and low > 0 with log)"
                )


def _check_loop_values(key: str, values: Values, method: str, source: str) -> None:
    """Each value (or range bound) of unlearn.lr / unlearn.epochs within its config range, read
    with the file rather than when the trials' configs are built."""
    field = key.split(".")[1]
    bounds = [values.low, values.high] if isinstance(values, Range) else values
    for value in bounds:
        try:
            MethodSettings.model_validate({field: value})
        except ValidationError as exc:
            message = exc.errors()[0]["msg"]
            raise ConfigError(
                f"{source}: sweep value {key}={value!r} ({method}): "
                f"{message[:1].lower()}{message[1:]}",
                f"give values within {key}'s range (docs/config.md)",
            ) from None


def _space(spec: SweepSpec, method: str) -> dict[str, Values]:
    return {**spec.space, **(spec.methods[method] or {})}


def expand(spec: SweepSpec) -> list[Trial]:
    """Every trial, method by method in the sweep's order. Grid: the product of the value lists
    in key order (the shared `space` keys first), the last key varying fastest. Random:
    `trials` draws per method from `random.Random(f"{seed}:{method}")`, keys in the same order, so
    adding a method does not change another method's draws."""
    trials: list[Trial] = []
    for method in spec.methods:
        space = _space(spec, method)
        keys = list(space)
        if spec.search == "grid":
            points = [dict(zip(keys, p, strict=True)) for p in itertools.product(*space.values())]
        else:
            rng = random.Random(f"{spec.seed}:{method}")
            points = [{k: _draw(rng, space[k]) for k in keys} for _ in range(spec.trials or 0)]
        trials += [Trial(method, i, point) for i, point in enumerate(points)]
    return trials


def _draw(rng: random.Random, values: Values) -> Any:
    if isinstance(values, list):
        return rng.choice(values)
    if values.log:
        return math.exp(rng.uniform(math.log(values.low), math.log(values.high)))
    if float(values.low).is_integer() and float(values.high).is_integer():
        return rng.randint(int(values.low), int(values.high))
    return rng.uniform(values.low, values.high)


def trial_config(
    config: RunConfig, trial: Trial, methods: Sequence[str] | None = None
) -> RunConfig:
    """The run config of `trial`: its method's `study.method_settings`, checked as a run would.
    A `method.X` of the sweep's config is for the sweep's `methods` (each that has X takes it, as
    in a study), so it is refused only when none of them has it."""
    data = config.model_dump()
    data["study"]["method_settings"] = {trial.method: trial.settings_data()}
    source = f"sweep trial {trial.method} {trial.settings}"
    if methods is not None:
        validate_config({**data, "study": {**data["study"], "methods": list(methods)}},
                        source=source, study=True)  # fmt: skip
    return validate_config(data, source=source, study=True)


# --- selection ----------------------------------------------------------------------------------


def select(
    trial_rows: dict[tuple[str, int], Sequence[dict[str, Any]]],
    finetuned_utility: float | None,
) -> dict[str, dict[str, Any]]:
    """Per method, the trial the leaderboard's matched-utility rule picks among every step of every
    trial (each step the mean over seeds): the highest forget quality among steps whose model
    utility is at least 0.9 x the finetuned model's; when none is, the highest utility (flagged).
    Ties go to the earlier step, then the earlier trial. `trial_rows`: (method, trial) -> that
    trial's rows (any seeds). Returns method -> {trial, step, forget_quality, model_utility,
    matched, note}."""
    pooled: dict[str, list[dict[str, Any]]] = {}
    for (method, index), rows in trial_rows.items():
        for row in seed_means([{k: v for k, v in r.items() if k != "trial"} for r in rows]):
            pooled.setdefault(method, []).append({**row, "trial": index})
    chosen = {}
    for method, rows in pooled.items():
        # Stable by trial then step, so the rule's "earlier step" tie-break sees trials in order.
        rows.sort(key=lambda r: (r["trial"], r["step"]))
        row, matched, note = choose(rows, finetuned_utility, UTILITY_RATIO)
        chosen[method] = {
            "trial": row["trial"],
            "step": row["step"],
            "forget_quality": number(row, "forget_quality"),
            "model_utility": number(row, "model_utility"),
            "matched": matched,
            "note": note,
        }
    return chosen


def preset(
    config: RunConfig, spec: SweepSpec, trials: Sequence[Trial], chosen: dict[str, Any]
) -> str:
    """selected.yaml: the sweep's run config (what it sets; not its output folder) with the
    selected settings per method, on the report split, at the sweep's seeds."""
    data = {k: v for k, v in config.model_dump(exclude_defaults=True).items() if k != "out"}
    study = dict(data.get("study") or {})
    study["splits"] = [spec.report_split]
    study["methods"] = list(spec.methods)
    # The run repeats the seeds the selection saw (one seed other than `seed` included).
    if spec.seeds != [config.seed]:
        study["seeds"] = list(spec.seeds)
    by_key = {(t.method, t.index): t for t in trials}
    study["method_settings"] = {
        method: by_key[method, pick["trial"]].method_settings().model_dump(exclude_defaults=True)
        for method, pick in chosen.items()
    }
    data["study"] = study
    lines = [
        f"# Written by `forgetbench sweep`: each method's settings selected on {spec.select_split}",
        "# (matched-utility rule), to report on "
        f"{spec.report_split}: forgetbench run --config {PRESET_FILE} --out DIR",
    ]
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False)


# --- the run ------------------------------------------------------------------------------------


def run_sweep(
    config: RunConfig,
    spec: SweepSpec,
    *,
    out: Path,
    pool: Any,
    executor: str = "process",
    progress: bool = True,
) -> dict[str, Any]:
    """Every trial on `spec.select_split` in `pool`, then sweep.json and selected.yaml in `out`
    (the command draws sweep.html from the result: the study layer never imports the report).
    `config` is the sweep's run config (its file without `sweep`, the flags, KEY=VALUE)."""
    started = time.perf_counter()
    split = spec.select_split
    trials = expand(spec)
    user = config  # the preset holds what the user set, not the miniature's eval defaults
    config = with_setup_defaults(config)
    # Every trial's config checked before any work.
    configs = {(t.method, t.index): trial_config(config, t, list(spec.methods)) for t in trials}
    study, timings = resolve(config, out, progress=progress, forget_splits=[split], pool=pool)
    retain_logs = load_retain_logs(config, study)  # a given model's retain log, from study.*
    references = {}
    for role, model_dir in (("retain", study.retain.get(split)), ("finetuned", study.finetuned)):
        if model_dir is not None:
            folder = out / "logs" / split / role / "step-0"
            references[role] = pool.submit(eval_job, model_dir, study, config, split, folder, True)
    jobs = {}
    for trial in trials:
        for seed in spec.seeds:
            logs = out / "logs" / split / trial.method / f"trial-{trial.index}" / f"seed-{seed}"
            jobs[trial.method, trial.index, seed] = pool.submit(
                method_job, study, configs[trial.method, trial.index], out, split,
                trial.method, seed, logs,
            )  # fmt: skip
    evaluated = {role: job.result()[0] for role, job in references.items()}
    retain = evaluated.get("retain")
    reference_rows = {
        role: study_row(split, role, 0, 0.0, e, retain, config, out, retain_logs)
        for role, e in evaluated.items()
    }
    trial_rows: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for (method, index, seed), job in jobs.items():
        trajectory = job.result()
        for step, epoch, _, result in trajectory.snapshots:
            row = study_row(
                split, method, step, epoch, result, retain, config, out, retain_logs, seed=seed
            )
            trial_rows.setdefault((method, index), []).append({**row, "trial": index})
    if "retain" not in reference_rows and split in retain_logs:
        reference_rows["retain"] = logged_retain_row(split, retain_logs[split], config, out)
    # The sweep selects on the same rule the leaderboard ranks by: the same gates apply.
    validity = check_validity(list(reference_rows.values()))
    finetuned = reference_rows.get("finetuned")
    utility = number(finetuned, "model_utility") if finetuned else None
    chosen = select(trial_rows, utility)
    atomic_write_text(out / PRESET_FILE, preset(user, spec, trials, chosen))
    timings["total"] = time.perf_counter() - started
    result = {
        "select_split": split,
        "report_split": spec.report_split,
        "search": spec.search,
        "seed": spec.seed,
        "seeds": list(spec.seeds),
        "executor": executor,
        "validity": validity,
        "references": reference_rows,
        "trials": [
            {
                "method": t.method,
                "trial": t.index,
                "settings": t.settings,
                # The trial alone under the same rule: its point on the sweep plot.
                "chosen": select({key: trial_rows[key]}, utility)[t.method],
                "rows": trial_rows[key],
            }
            for t in trials
            if (key := (t.method, t.index))
        ],
        "selected": {
            method: {**pick, "settings": configs[method, pick["trial"]].study.method_settings[
                method
            ].model_dump(exclude_defaults=True)}
            for method, pick in chosen.items()
        },
        "timings": {k: round(v, 2) for k, v in timings.items()},
    }  # fmt: skip
    atomic_write_json(out / SWEEP_FILE, result)
    return result
