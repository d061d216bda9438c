"""results.json as a typed model: what `forgetbench run` writes and `forgetbench report` reads.

A row is one evaluated model: the fixed fields `split`, `method`, `step`, `epoch`, `log`, plus one
metric column per score under its result key (`forget_quality`, `forget/rougeL`,
`formats/mcqa/forget`, ...). Metric keys grow with every new metric, so they are the model's
extra fields, checked by the family their key belongs to rather than declared one by one.

Values are kept exactly as they were (an integer stays an integer, NaN stays NaN, unknown keys stay
where they were), so writing through the model and reading back changes nothing. Every field but
the rows is optional: a results file from an older version, or one cut down by hand, still reads.
"""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from forgetbench.errors import DataError
from forgetbench.io import read_json

RESULTS_FILE = "results.json"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_or_null(value: Any) -> int | float | None:
    # JSON numbers as they came: pydantic's float would turn 20 questions into 20.0, and its int
    # would take true for 1.
    if value is not None and not _is_number(value):
        raise PydanticCustomError("number", "expected a number or null")
    return value


NumberOrNull = Annotated[int | float | None, PlainValidator(_number_or_null)]
Name = Annotated[str, StringConstraints(min_length=1)]

# Metric families by key: the report reads every key of a number family as a number (or null).
_NUMBER_KEYS = frozenset(
    {"forget_quality", "model_utility", "privleak", "exact_memorisation", "extraction_strength"}
)
_NUMBER_PREFIXES = (
    "forget/",
    "retain/",
    "real_authors/",
    "world_facts/",
    "formats/",
    "probes/",
    "mia/",
    "lume/",
    "attack/",
    "muse/",
    "wmdp/",
    "mmlu/",
)
# The two LUME keys that are not numbers: which utility entered the final score, and the flag.
_TEXT_KEYS = frozenset({"lume/utility_source"})
_FLAG_KEYS = frozenset({"lume/mmlu_below_threshold"})


def _metric_problem(key: str, value: Any) -> str | None:
    """What `value` should have been under metric `key`, or None when it fits."""
    if value is None:
        return None
    if key in _TEXT_KEYS:
        return None if isinstance(value, str) else "expected a str or null"
    if key in _FLAG_KEYS:
        return None if isinstance(value, bool) else "expected a bool or null"
    if key in _NUMBER_KEYS or key.startswith(_NUMBER_PREFIXES):
        return None if _is_number(value) else "expected a number or null"
    # A key of no known family is a column of results.csv: one cell, so one plain value.
    plain = isinstance(value, str | int | float | bool)
    return None if plain else "expected a number, a string, true, false or null"


class Row(BaseModel):
    """One evaluated model at one step; the metric columns are the extra fields."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    split: Name
    method: Name
    step: int = 0  # reference models (finetuned, retain, base) sit at step 0
    epoch: NumberOrNull = None
    log: str | None = None  # the evaluation's log folder, relative to the results folder

    @model_validator(mode="after")
    def _metric_types(self) -> Row:
        for key, value in (self.model_extra or {}).items():
            if problem := _metric_problem(key, value):
                raise PydanticCustomError("metric_type", problem, {"key": key, "value": value})
        return self

    @model_serializer(mode="wrap")
    def _log_last(self, handler: Any) -> dict[str, Any]:
        # Declared fields come out before the extra ones; the row's log folder has always closed
        # the row (and results.csv), after the metrics of the step it describes.
        data = handler(self)
        if "log" in data:
            data["log"] = data.pop("log")
        return data


class Example(BaseModel):
    """One generation on a forget-set question, shown in the report beside the finetuned one."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    split: Name
    method: Name
    step: int = 0
    question: str | None = None
    ground_truth: str | None = None
    generation: str | None = None


class Results(BaseModel):
    """A whole results.json. Unknown top-level keys are kept as they are."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    forgetbench_version: str | None = None
    git_sha: str | None = None
    seed: int | None = None
    created: str | None = None
    benchmark: str | None = None
    scale: str | None = None
    model: str | None = None
    workers: int | None = None
    config: dict[str, Any] | None = None  # as resolved then; older keys must still read
    # The validity gates (forgetbench.validity); absent in files written before they existed.
    validity: dict[str, Any] | None = None
    metric_versions: dict[str, int] = {}
    timings: dict[str, NumberOrNull] = {}  # seconds per stage, and the run's wall time `total`
    rows: list[Row] = Field(min_length=1)
    examples: list[Example] = []
    # Split -> the split with the same data whose computation its rows report (the tiny scale).
    same_data: dict[str, str] = {}
    # study.unlearn_formats: each method's final model per unlearning format (`unlearn_format`);
    # study.sequence: each request's model, the one-shot runs and the references (`mode`,
    # `request`). Kept apart from `rows`, which hold one run per method and split.
    cross_format: list[Row] = []
    sequence: list[Row] = []

    def dump(self) -> dict[str, Any]:
        """The JSON object to write: only the keys that were given, in their order."""
        return self.model_dump(exclude_unset=True)


def load_results(results_dir: Path) -> Results:
    """`results_dir/results.json`, checked against `Results`. Raises `DataError` naming the file
    and the field (`rows[3]['forget/rougeL']`) in one sentence."""
    results_dir = Path(results_dir)
    path = results_dir / RESULTS_FILE
    if not path.is_file():
        where = "folder does not exist" if not results_dir.is_dir() else "file does not exist"
        raise DataError(
            f"no results to report: {path} ({where})",
            "run `forgetbench run --out DIR` first, or pass the folder that holds results.json",
        )
    data = read_json(path, what="results file")
    try:
        return Results.model_validate(data)
    except ValidationError as exc:
        raise _one_line(exc, path) from None


_REWRITE_HINT = "fix that value, or rerun `forgetbench run` to rewrite results.json"
# pydantic's error types, as the end of "<field> is <value>, expected ...".
_EXPECTED = {
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "dict_type": "a JSON object",
    "list_type": "a list",
    "too_short": "a non-empty list of evaluated models",
    "string_type": "a string",
    "string_too_short": "a non-empty name",
    "int_type": "an integer",
}


# A value in a message is cut short: a hand-edited file may hold a whole table where a number goes.
_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 40
_SHOWN.maxlist = _SHOWN.maxdict = 3


def _one_line(exc: ValidationError, path: Path) -> DataError:
    error = exc.errors(include_url=False)[0]
    loc = tuple(error["loc"])
    ctx = error.get("ctx") or {}
    value = error["input"]
    if "key" in ctx:  # a metric column, checked by its row (see Row._metric_types)
        loc, value = (*loc, ctx["key"]), ctx["value"]
    if error["type"] == "missing":
        where = f"{path}: {_field(loc[:-1])}" if loc[:-1] else str(path)
        return DataError(f"{where} has no '{loc[-1]}'", _REWRITE_HINT)
    expected = _EXPECTED.get(error["type"])
    expected = f"expected {expected}" if expected else error["msg"][:1].lower() + error["msg"][1:]
    shown = _SHOWN.repr(value)
    return DataError(f"{path}: {_field(loc)} is {shown}, {expected}", _REWRITE_HINT)


def _field(loc: tuple[Any, ...]) -> str:
    """A pydantic location as the reader would find it: ('rows', 3, 'split') -> rows[3]['split']."""
    if not loc:
        return "the top level"
    head, *rest = loc
    if not rest:
        return f"'{head}'"
    return str(head) + "".join(f"[{p}]" if isinstance(p, int) else f"['{p}']" for p in rest)


# --- meta_eval.json ------------------------------------------------------------------------------

META_EVAL_FILE = "meta_eval.json"


class MetaModel(BaseModel):
    """One model of a meta-evaluation pool and its judged forget-set scores."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    pool: Literal["positive", "negative"]
    label: Name
    split: Name
    seed: int
    epochs: int
    lr: float
    log: str | None = None
    scores: dict[str, NumberOrNull] = {}


class MetaMetric(BaseModel):
    """One metric's line of the meta-evaluation table."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    metric: Name
    direction: Literal["higher", "lower"]  # in which the metric says "knows the forget set"
    faithfulness: NumberOrNull
    robustness: NumberOrNull = None  # harmonic mean of relearning and quantisation
    robustness_note: str | None = None  # why robustness is missing
    relearning: NumberOrNull = None  # mean R over the attacked models
    quantisation: NumberOrNull = None  # mean Q over the attacked models
    forgot_threshold: NumberOrNull = None  # the pools' best cut: past it a model "forgot"
    attacked: list[str] = []  # the attacked models (methods) this metric reads as forgotten
    utility_dropped: int | None = None  # attacked models left out for their broken utility
    positives: int
    negatives: int
    positive_mean: NumberOrNull = None
    negative_mean: NumberOrNull = None


class MetaEval(BaseModel):
    """A whole meta_eval.json (`forgetbench meta-eval`, or `forgetbench run` with
    study.meta_eval), read by the report beside results.json."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    forgetbench_version: str | None = None
    created: str | None = None
    scale: str | None = None
    seed: int | None = None
    split: Name
    truth_ratio_form: str | None = None
    models: list[MetaModel] = []
    metrics: list[MetaMetric] = Field(min_length=1)
    not_judged: dict[str, str] = {}  # metric family (key prefix) -> why the pools cannot judge it
    # How robustness was measured: methods attacked, quantisation, relearning budget, filters,
    # and each attacked model's judged scores before and after each attack.
    robustness: dict[str, Any] | None = None
    timings: dict[str, NumberOrNull] = {}

    def dump(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)

    def pool_sizes(self) -> dict[str, int]:
        return {p: sum(m.pool == p for m in self.models) for p in ("positive", "negative")}


def load_meta_eval(folder: Path) -> MetaEval | None:
    """`folder/meta_eval.json`, checked against `MetaEval`; None when there is none. Raises
    `DataError` naming the file and the field in one sentence."""
    path = Path(folder) / META_EVAL_FILE
    if not path.is_file():
        return None
    data = read_json(path, what="meta-evaluation file")
    try:
        return MetaEval.model_validate(data)
    except ValidationError as exc:
        error = _one_line(exc, path)
        hint = "fix that value, or rerun `forgetbench meta-eval` to rewrite it"
        raise DataError(error.what, hint) from None
