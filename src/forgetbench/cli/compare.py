"""`forgetbench compare`: TOFU scores of a candidate's eval log against a retain model's."""

from __future__ import annotations

import argparse
from typing import Any


def compare(args: argparse.Namespace) -> dict[str, Any]:
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
