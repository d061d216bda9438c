"""`forgetbench data`: count a benchmark's records, write the built-in miniature benchmark."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forgetbench.cli.usage import UsageError
from forgetbench.config_names import BENCHMARKS
from forgetbench.errors import UnknownNameError

# Benchmarks whose released files `data stats` reads before any other command runs on them;
# RWKU's are read and counted, not yet studied.
STATS_BENCHMARKS = BENCHMARKS

# The loaders and the console table are imported where they are used: they import the metrics
# (scipy, numpy) and the miniature's generator, which `forgetbench --help` never needs.


def without_action(args: argparse.Namespace) -> dict[str, Any]:
    raise UsageError("forgetbench data: missing action", "try 'forgetbench data stats'")


def stats(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.console import print_rows

    if args.benchmark not in STATS_BENCHMARKS:
        raise UnknownNameError("benchmark", args.benchmark, STATS_BENCHMARKS)
    path = Path(args.path)
    if args.benchmark in ("muse", "wmdp", "rwku"):
        return _released_stats(args, path)
    if args.benchmark == "lume":
        from forgetbench.data.lume import lume_stats

        rows = lume_stats(path)
    elif args.benchmark == "tofu":
        from forgetbench.data.tofu import tofu_stats

        rows = tofu_stats(path)
    else:
        from forgetbench.benchmarks.mini import mini_stats

        rows = mini_stats(path)
    if not args.json:
        print_rows(rows, title=f"{args.benchmark} data in {path}")
    return {"benchmark": args.benchmark, "path": str(path), "rows": rows}


def _released_stats(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """MUSE's, WMDP's and RWKU's folders: the files found are counted even where others are
    missing or malformed (printed first), then one sentence names every problem and the exit is
    non-zero."""
    from forgetbench.data import muse, rwku, wmdp
    from forgetbench.data.released import problems_error
    from forgetbench.report.console import print_rows

    if args.benchmark == "muse":
        (rows, problems), name, hint = muse.muse_stats(path), "MUSE", muse.MUSE_HINT
    elif args.benchmark == "wmdp":
        (rows, problems), name, hint = wmdp.wmdp_stats(path), "WMDP", wmdp.WMDP_HINT
    else:
        (rows, problems), name, hint = rwku.rwku_stats(path), "RWKU", rwku.RWKU_HINT
    if not args.json and rows:
        print_rows(rows, title=f"{args.benchmark} data in {path}")
    if problems:
        raise problems_error(name, path, problems, hint)
    return {"benchmark": args.benchmark, "path": str(path), "rows": rows}


def generate(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.benchmarks.mini import RELEASED_FOLDERS, generate_mini, get_scale

    get_scale(args.scale)  # an unknown scale fails before anything is built
    out = Path(args.out)
    existed = (out / "manifest.json").is_file()
    manifest = generate_mini(out, scale=args.scale, seed=args.seed)
    counts = {path: entry["records"] for path, entry in manifest["files"].items()}
    status = "unchanged" if existed else "written"
    if not args.json:
        verb = "already up to date" if existed else "wrote"
        print(
            f"{verb}: miniature benchmark (scale {args.scale}, seed {args.seed}) in {out}: "
            f"{len(counts)} files, {counts['tofu/full.json']} TOFU questions, "
            f"{counts['tofu/forget10.json']} in forget10; MUSE's layout in "
            f"{out / RELEASED_FOLDERS['muse']}, WMDP's in {out / RELEASED_FOLDERS['wmdp']}, "
            f"RWKU's in {out / RELEASED_FOLDERS['rwku']}"
        )
    return {"out": str(out), "status": status, **manifest}
