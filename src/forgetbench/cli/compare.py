"""`forgetbench compare`: TOFU scores of a candidate's eval log against a retain model's, or MUSE
or WMDP scores of several results files (ours and open-unlearning's) side by side."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forgetbench.cli.usage import UsageError

BENCHMARKS = ("tofu", "muse", "wmdp")


def compare(args: argparse.Namespace) -> dict[str, Any]:
    if args.benchmark != "tofu":
        return _compare_released(args)
    if args.results:
        raise UsageError(
            "--results compares MUSE or WMDP files", "add --benchmark muse or --benchmark wmdp"
        )
    missing = [f"--{name}" for name in ("reference", "candidate") if getattr(args, name) is None]
    if missing:
        raise UsageError(
            f"compare needs {' and '.join(missing)} for TOFU logs",
            "give the retain model's log as --reference and the evaluated model's as --candidate",
        )
    # Imported here: the log reader and the scores import the metrics (scipy, numpy), which
    # `forgetbench --help` never needs.
    from forgetbench.data.logs import read_eval_log
    from forgetbench.eval.summary import compare as compare_logs
    from forgetbench.report.console import print_comparison

    result = compare_logs(
        read_eval_log(args.reference),
        read_eval_log(args.candidate),
        form=args.truth_ratio_form,
        allow_question_mismatch=args.allow_question_mismatch,
    )
    result = {"reference": str(args.reference), "candidate": str(args.candidate), **result}
    if not args.json:
        print_comparison(result)
    return result


def _compare_released(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.eval.compare_released import compare_released
    from forgetbench.report.console import print_released_comparison

    given = [name for name in ("reference", "candidate") if getattr(args, name) is not None]
    if given or not args.results:
        raise UsageError(
            f"compare --benchmark {args.benchmark} reads --results files"
            + (f", not --{given[0]}" if given else ""),
            "give --results with forgetbench results.json files and open-unlearning's files",
        )
    result = compare_released([Path(p) for p in args.results], args.benchmark)
    if not args.json:
        print_released_comparison(result)
    return result
