"""`forgetbench eval` and `forgetbench sanity`: every metric of one model, and the KS test's sanity
checks on the miniature study."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from forgetbench.cli.config import resolve_config
from forgetbench.cli.usage import UsageError, progress
from forgetbench.io import require_writable_dir
from forgetbench.study.given import given_data, given_model

# The study layer and the report are imported inside the commands: they import torch,
# transformers and the metrics (scipy), which `forgetbench --help` never needs.


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.tables import lume_mmlu_notes
    from forgetbench.study.eval_command import eval_command
    from forgetbench.study.pool import quiet_transformers

    quiet_transformers()
    config = resolve_config(args)
    model = given_model(config)
    given = {"model": model, "data": given_data(config), "out": args.out}
    for option, value in given.items():
        if not value:
            raise UsageError(
                f"forgetbench eval: --{option} is required", "see 'forgetbench eval --help'"
            )
    out = Path(args.out)
    summary = eval_command(
        config, out=out, retain_log=args.retain_log, progress=progress(args), quiet=args.json
    )
    scores = summary["scores"]
    if not args.json and "splits" in summary:
        _print_sets(model, scores)
        print(f"per-item logs and summary of each: {out}/<name>; all of them: {out}")
    elif not args.json:
        _print_scores(model, args.retain_log, scores)
        print(f"per-question logs and summary: {out}")
    for note in [] if "splits" in summary else lume_mmlu_notes([scores]):
        print(f"warning: {note}", file=sys.stderr)
    return summary


def _print_scores(model: str, retain_log: str | None, scores: dict[str, Any]) -> None:
    """Tables for a terminal (`--json` gives the numbers): with a retain log, TOFU's sub-scores,
    model utility and forget quality; then every other score, one row each."""
    from forgetbench.data.logs import SET_FILES
    from forgetbench.eval.summary import SUBSCORE_METRICS
    from forgetbench.report.console import print_comparison, print_rows

    shown: set[str] = set()
    if "forget_quality" in scores:
        print_comparison({"candidate": model, "reference": retain_log, **scores})
        shown = {f"{name}/{m}" for name in SET_FILES for m in SUBSCORE_METRICS}
        shown |= {"model_utility", "forget_quality", "retain_ks_pvalue"}
    rows = [
        {"score": key, "value": _cell(value)}
        for key, value in scores.items()
        if key not in shown and (value is None or isinstance(value, int | float | str))
    ]
    if not shown:
        print(f"candidate: {model}")
    if rows:
        print_rows(rows, title="other scores" if shown else "scores")


def _print_sets(model: str, scores: dict[str, dict[str, Any]]) -> None:
    """Each set's scores as the study's tables lay out its rows (RWKU's, per target: the main
    scores, then the adversarial probes per attack), the model's row named "model"."""
    from forgetbench.report.console import print_rows
    from forgetbench.report.rwku import print_rwku

    print(f"model: {model}")
    print_rwku([{"split": name, "method": "model", "step": 0, **s} for name, s in scores.items()])
    # Utility through lm-eval (eval.rwku_utility=lm_eval) is the model's, the same for every set.
    utility = {k: v for s in scores.values() for k, v in s.items() if k.startswith("lm_eval/")}
    if utility:
        rows = [
            {"score": k, "value": _cell(v)} for k, v in sorted(utility.items()) if k.count("/") == 2
        ]
        print_rows(rows, title="utility through lm-eval (every set)")


def _cell(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def sanity(args: argparse.Namespace) -> dict[str, Any]:
    config = resolve_config(args)  # a bad option answers before torch is imported
    from forgetbench.study.pool import quiet_transformers
    from forgetbench.study.sanity import sanity_study

    quiet_transformers()
    out = Path(args.out) if args.out else Path("runs") / f"sanity-{config.scale}"
    if not args.out:
        require_writable_dir(out, option="the default --out")
    result = sanity_study(
        out,
        scale=config.scale,
        seed=config.seed,
        eval_config=config.eval,
        progress=progress(args),
    )
    if not args.json:
        from forgetbench.report.console import print_rows

        print_rows(
            [
                {
                    "check": c["name"],
                    "holds": "yes" if c["holds"] else "NO",
                    "p_value": "" if c["p_value"] is None else f"{c['p_value']:.3g}",
                    "value": "" if c["value"] is None else f"{c['value']:.3f}",
                    "expected": c["expected"],
                }
                for c in result["checks"]
            ],
            title=f"sanity checks, scale {config.scale} ({result['seconds']:.0f} s)",
        )
        print("all checks hold" if result["all_hold"] else "some checks FAIL")
    return {**result, "exit_code": 0 if result["all_hold"] else 1}
