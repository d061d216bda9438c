"""open-unlearning's MUSE and WMDP evaluation files, read as forgetbench's result keys.

- MUSE: its `MUSEEvaluator` writes `MUSE_EVAL.json`, one object keyed by metric name (sorted),
  each `{"agg_value": x, "value_by_index": {"0": {...}, ...}}` (the MIA metrics also hold
  `forget`, `holdout` and `auc`; a metric another one needed, such as `mia_min_k` under
  `privleak`, is stored too), and `MUSE_SUMMARY.json`, the same names with the `agg_value`s alone.
  Its default metrics (`configs/eval/muse.yaml`) are the three ROUGE ones, `privleak` and
  `extraction_strength`.
- WMDP: it runs lm-evaluation-harness (`LMEvalEvaluator`, tasks `wmdp_<subset>` and `mmlu`) and
  writes `LMEval_SUMMARY.json`: `{"<task>/<metric>": value}` (`wmdp_cyber/acc`, `mmlu/acc`, ...;
  lm-eval's `,none` filter suffix dropped).

The scales: open-unlearning's ROUGE is in [0, 1] where MUSE and forgetbench report x100; its MIA
AUCs read as forgetbench's (1 = the forget set looks seen) and its `privleak` is MUSE's
percentage with MUSE's sign, as forgetbench's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forgetbench.errors import DataError
from forgetbench.io import parse_json, read_text, shorten

# open-unlearning's MUSE metric -> (forgetbench's key, factor to forgetbench's scale).
MUSE_METRICS = {
    "forget_verbmem_ROUGE": ("muse/verbmem_f", 100.0),
    "forget_knowmem_ROUGE": ("muse/knowmem_f", 100.0),
    "retain_knowmem_ROUGE": ("muse/knowmem_r", 100.0),
    "privleak": ("muse/privleak", 1.0),
    "mia_loss": ("muse/mia/loss", 1.0),
    "mia_zlib": ("muse/mia/zlib", 1.0),
    "mia_min_k": ("muse/mia/min_k", 1.0),
    "mia_min_k_plus_plus": ("muse/mia/min_k_plus_plus", 1.0),
    "mia_gradnorm": ("muse/mia/gradnorm", 1.0),
}
# The metrics of MUSE's four headline criteria: every MUSE file must hold them.
MUSE_REQUIRED = ("forget_verbmem_ROUGE", "forget_knowmem_ROUGE", "retain_knowmem_ROUGE", "privleak")
# lm-eval's summary keys -> forgetbench's (the `wmdp` group's accuracy is `wmdp/all`).
LMEVAL_METRICS = {
    "wmdp_bio/acc": "wmdp/bio",
    "wmdp_cyber/acc": "wmdp/cyber",
    "wmdp_chem/acc": "wmdp/chem",
    "wmdp/acc": "wmdp/all",
    "mmlu/acc": "mmlu/all",
}
_HINT = (
    "give open-unlearning's MUSE_EVAL.json / MUSE_SUMMARY.json, or the LMEval_SUMMARY.json of its "
    "WMDP evaluation, as it wrote them"
)


def which_benchmark(data: Any) -> str | None:
    """`muse` or `wmdp` for an open-unlearning file of that benchmark, None otherwise."""
    if not isinstance(data, dict):
        return None
    if any(name in MUSE_METRICS or name.endswith("_ROUGE") for name in data):
        return "muse"
    if any(name in LMEVAL_METRICS for name in data):
        return "wmdp"
    return None


def _value(data: dict[str, Any], name: str, source: str) -> float:
    """A metric's aggregate: `agg_value` in an EVAL file, the number itself in a SUMMARY file."""
    entry = data[name]
    field = name
    if isinstance(entry, dict):
        if "agg_value" not in entry:
            raise DataError(f"{source}: metric '{name}' has no 'agg_value'", _HINT)
        entry, field = entry["agg_value"], f"{name}.agg_value"
    if isinstance(entry, bool) or not isinstance(entry, int | float):
        got = "null" if entry is None else type(entry).__name__
        raise DataError(f"{source}: '{field}' must be a number, got {got}", _HINT)
    return float(entry)


def read_open_unlearning_eval(path: str | Path) -> tuple[str, dict[str, float], dict[str, float]]:
    """(benchmark, {forgetbench key: value on forgetbench's scale}, {their metric without a
    forgetbench counterpart: value}) of one open-unlearning MUSE or WMDP evaluation file."""
    source = str(path)
    data = parse_json(read_text(Path(path)), source, hint=_HINT)
    benchmark = which_benchmark(data)
    if benchmark is None:
        found = ", ".join(shorten(str(k), 40) for k in list(data)[:5]) if isinstance(data, dict) else type(data).__name__  # fmt: skip
        raise DataError(
            f"{source} is not an open-unlearning MUSE or WMDP evaluation file (found {found or 'nothing'})",
            _HINT,
        )  # fmt: skip
    if benchmark == "muse":
        missing = [m for m in MUSE_REQUIRED if m not in data]
        if missing:
            raise DataError(f"{source} has no {', '.join(repr(m) for m in missing)} "
                            "(open-unlearning's default MUSE metrics)", _HINT)  # fmt: skip
        ours = {key: _value(data, name, source) * factor
                for name, (key, factor) in MUSE_METRICS.items() if name in data}  # fmt: skip
        theirs_only = {name: _value(data, name, source) for name in data
                       if name not in MUSE_METRICS and _aggregate(data[name])}  # fmt: skip
        return benchmark, ours, theirs_only
    ours = {key: _value(data, name, source) for name, key in LMEVAL_METRICS.items() if name in data}
    if not any(key.startswith("wmdp/") for key in ours):
        raise DataError(f"{source} has no WMDP accuracy ('wmdp_<subset>/acc' or 'wmdp/acc')", _HINT)
    theirs_only = {name: _value(data, name, source) for name in data
                   if name not in LMEVAL_METRICS and not name.endswith("_stderr")
                   and _aggregate(data[name])}  # fmt: skip
    return benchmark, ours, theirs_only


def _aggregate(entry: Any) -> bool:
    """Whether an entry has one number to show (an EVAL metric's `agg_value`, a SUMMARY value);
    metrics without an aggregate are left out."""
    value = entry.get("agg_value") if isinstance(entry, dict) else entry
    return isinstance(value, int | float) and not isinstance(value, bool)
