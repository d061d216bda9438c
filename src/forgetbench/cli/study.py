"""`forgetbench run`, `attack`, `sweep`, `meta-eval` and `report`: the studies, each one call into
the study layer, and the report drawn from their results."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from forgetbench.cli.config import resolve_config
from forgetbench.cli.usage import UsageError, progress
from forgetbench.errors import ConfigError
from forgetbench.io import atomic_write_text, require_writable_dir
from forgetbench.study.given import given_data, given_model

# The study layer, the report and the results records are imported inside the commands: they
# import torch, transformers and the metrics (scipy), or take a tenth of `forgetbench --help`'s
# start-up (the records' pydantic models), which it never needs.


def run(args: argparse.Namespace) -> dict[str, Any]:
    # The config first: a bad option is one sentence in a moment, before the study imports
    # torch and transformers (seconds).
    config = resolve_config(args)
    from forgetbench.criteria import is_muse, is_wmdp
    from forgetbench.report.html import build_report
    from forgetbench.report.muse_wmdp import print_muse_wmdp
    from forgetbench.report.rwku import is_rwku, print_rwku
    from forgetbench.report.tables import lume_mmlu_notes, print_leaderboard, without_noise
    from forgetbench.report.validity import print_validity
    from forgetbench.rows import leaderboard, reference_entries
    from forgetbench.study.pool import quiet_transformers
    from forgetbench.study.run import run_study
    from forgetbench.validity import ranks

    quiet_transformers()
    if config.eval.lume_mmlu is not None:
        raise UsageError(
            "eval.lume_mmlu is one model's MMLU accuracy; a study evaluates many models",
            "give it to 'forgetbench eval' for the model it was measured on",
        )
    out = Path(config.out)
    if args.out is None:  # from the config file, an `out=` override or the default
        require_writable_dir(out, option="out")
    results = run_study(
        config,
        out=out,
        progress=progress(args),
    )
    report = build_report(out)
    validity = results.get("validity")
    if not args.json:
        # Identical splits once, as in the report: their rows are the computed split's.
        same = results.get("same_data", {})
        if is_rwku(results["rows"]):
            if validity:
                print_validity(validity)
            print_rwku(results["rows"])
        elif is_muse(results["rows"]) or is_wmdp(results["rows"]):
            # MUSE's criteria and WMDP's accuracy have their own tables, as in the report, after
            # the study's gates when it has any.
            if validity:
                print_validity(validity)
            print_muse_wmdp(results["rows"], results.get("sequence", []))
        else:
            # The gates first: a leaderboard is only printed when its rows can be ranked.
            print_validity(validity)
            if ranks(validity):
                shown = [r for r in results["rows"] if r["split"] not in same]
                print_leaderboard(
                    without_noise(leaderboard(shown), validity),
                    references=without_noise(reference_entries(shown), validity),
                )
            else:
                print(
                    "leaderboard withheld: the report shows the rows greyed, under the same banner"
                )
        for split, computed in same.items():
            print(
                f"{split} = {computed} here (the same questions): computed once, shown as {computed}"
            )
        if results.get("reused"):
            reused = ", ".join(results["reused"])
            print(f"reused from this folder's earlier run (not retrained): {reused}")
        print(f"results: {out / 'results.json'}, {out / 'results.csv'}")
        print(f"report:  {report}")
    for note in lume_mmlu_notes(results["rows"]):
        print(f"warning: {note}", file=sys.stderr)
    failed = args.strict and not ranks(validity)
    return {
        "validity": validity,
        "rows": results["rows"],
        "report": str(report),
        **({"exit_code": 1} if failed else {}),
    }


def attack(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.robustness import print_attack_table
    from forgetbench.study.attack import run_attacks
    from forgetbench.study.pool import quiet_transformers

    quiet_transformers()
    config = resolve_config(args)
    split = config.benchmark.split  # a forget split: _refuse_split checked it
    if not config.study.attacks:
        raise ConfigError("forgetbench attack got an empty --attacks", "name at least one attack")
    if given_data(config) is None and (args.finetuned or args.retain):
        raise ConfigError(
            "--finetuned and --retain are for a model of your own (with --data)",
            "on the built-in miniature its finetuned and retain models are the references",
        )
    result = run_attacks(
        config, out=Path(args.out), split=split, finetuned=args.finetuned,
        retain=args.retain, progress=progress(args),
    )  # fmt: skip
    if not args.json:
        print_attack_table(result["models"], config.study.attacks)
        print(f"attacks: {Path(args.out) / 'attacks.json'}")
    return result


def sweep(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.sweep import render_sweep
    from forgetbench.report.validity import print_validity
    from forgetbench.study.pool import make_pool, quiet_transformers, study_workers
    from forgetbench.study.sweep import PRESET_FILE, REPORT_FILE, SWEEP_FILE, read_spec, run_sweep
    from forgetbench.validity import ranks

    quiet_transformers()
    if args.config is None:
        raise UsageError(
            "forgetbench sweep needs --config: a run config with a sweep section",
            "see docs/sweeps.md",
        )
    if args.out is None:
        raise UsageError("forgetbench sweep: --out is required", "see 'forgetbench sweep --help'")
    _check_executor_options(args)
    # The config first: its plugins register the methods the sweep section may name.
    config = resolve_config(args)
    spec = read_spec(args.config)
    workers = study_workers(config, given_model(config))
    if args.executor == "ray":
        from forgetbench.study.ray_executor import RayPool

        pool = RayPool(
            address=args.address,
            workers=workers,
            cpus=1.0 if args.cpus_per_trial is None else args.cpus_per_trial,
            gpus=args.gpus_per_trial or 0.0,
        )
    else:
        pool = make_pool(workers)
    out = Path(args.out)
    try:
        result = run_sweep(
            config, spec, out=out, pool=pool,
            executor=args.executor, progress=progress(args),
        )  # fmt: skip
    finally:
        pool.shutdown(cancel_futures=True)
    atomic_write_text(out / REPORT_FILE, render_sweep(result))
    validity = result.get("validity")
    if not args.json:
        print_validity(validity)
        for method, pick in result["selected"].items():
            flag = "" if pick["matched"] else " * (utility not matched)"
            print(
                f"{method}: trial {pick['trial']} {pick['settings']} step {pick['step']}: "
                f"forget quality {pick['forget_quality']:.3g}, utility "
                f"{pick['model_utility']:.4f}{flag}"
            )
        print(f"{len(result['trials'])} trials in {result['timings']['total']:.0f} s")
        print(f"preset:  {out / PRESET_FILE} (forgetbench run --config {out / PRESET_FILE})")
        print(f"results: {out / SWEEP_FILE}; report: {out / REPORT_FILE}")
    failed = args.strict and not ranks(validity)
    return {
        "validity": validity,
        "selected": result["selected"],
        "preset": str(out / PRESET_FILE),
        **({"exit_code": 1} if failed else {}),
    }


def _check_executor_options(args: argparse.Namespace) -> None:
    """The Ray options only with --executor ray, and resources a Ray task can declare."""
    ray_options = {
        "--address": args.address,
        "--cpus-per-trial": args.cpus_per_trial,
        "--gpus-per-trial": args.gpus_per_trial,
    }
    given = [option for option, value in ray_options.items() if value is not None]
    if args.executor != "ray" and given:
        raise UsageError(
            f"forgetbench sweep --executor {args.executor} does not use {given[0]}: it is for "
            "--executor ray",
            f"add --executor ray, or drop {given[0]}",
        )
    if args.cpus_per_trial is not None and not (
        math.isfinite(args.cpus_per_trial) and args.cpus_per_trial > 0
    ):
        raise UsageError(
            f"--cpus-per-trial {args.cpus_per_trial:g}: a trial needs a positive number of CPUs",
            "e.g. --cpus-per-trial 1 (or 0.5 to pack two trials on a core)",
        )
    if args.gpus_per_trial is not None and not (
        math.isfinite(args.gpus_per_trial) and args.gpus_per_trial >= 0
    ):
        raise UsageError(
            f"--gpus-per-trial {args.gpus_per_trial:g}: a trial declares 0 or more GPUs",
            "e.g. --gpus-per-trial 1, or 0.5 to share a GPU between two trials",
        )


def meta_eval(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.results import RESULTS_FILE
    from forgetbench.study.meta_eval import meta_evaluate
    from forgetbench.study.pool import quiet_transformers
    from forgetbench.study.tofu import miniature_eval_defaults

    quiet_transformers()
    config = miniature_eval_defaults(resolve_config(args))
    if not args.out:
        raise UsageError(
            "forgetbench meta-eval: --out is required", "pass a folder for the pools' models"
        )
    out = Path(args.out)
    result = meta_evaluate(
        config,
        out=out,
        forget_split=config.benchmark.split,
        progress=progress(args),
    )
    report = None
    if (out / RESULTS_FILE).is_file():  # a run folder: its report gains the meta-evaluation
        from forgetbench.report.html import build_report

        report = str(build_report(out))
    if not args.json:
        from forgetbench.report.console import print_rows
        from forgetbench.report.tables import format_cell

        sizes = {p: sum(m["pool"] == p for m in result["models"]) for p in ("positive", "negative")}
        print_rows(
            [
                {
                    "metric": row["metric"],
                    "knows if": row["direction"],
                    "faithfulness (AUC)": format_cell(row["faithfulness"]),
                    "robustness": format_cell(row["robustness"])
                    if row["robustness"] is not None
                    else "—",
                    "R / Q": f"{format_cell(row.get('relearning'))} / "
                    f"{format_cell(row.get('quantisation'))}",
                    "attacked": len(row.get("attacked", [])),
                    "pools (+/-)": f"{row['positives']}/{row['negatives']}",
                    "positive mean": format_cell(row["positive_mean"]),
                    "negative mean": format_cell(row["negative_mean"]),
                }
                for row in result["metrics"]
            ],
            title=f"meta-evaluation on {result['split']}, scale {result['scale']}: "
            f"{sizes['positive']} positive, {sizes['negative']} negative models",
        )
        for family, reason in result.get("not_judged", {}).items():
            print(f"not judged: {family}* — {reason}")
        print(f"meta-evaluation: {out / 'meta_eval.json'} ({result['timings']['total']:.0f} s)")
        if report:
            print(f"report:  {report}")
    return {**result, "report": report}


def report(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.html import build_report

    path = build_report(Path(args.results))
    if not args.json:
        print(f"report: {path}")
    return {"report": str(path)}
