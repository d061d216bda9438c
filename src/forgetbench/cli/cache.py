"""`forgetbench cache`: list and clear the stages every output folder shares."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from forgetbench.cache import CACHE_ENV, cache_root, clear, entries, require_usable_root, survey
from forgetbench.cli.usage import UsageError

# The console table is imported where it is printed: the report package imports the metrics
# (scipy, numpy), which `forgetbench --help` never needs.


def without_action(args: argparse.Namespace) -> dict[str, Any]:
    raise UsageError("forgetbench cache: missing action", "try 'forgetbench cache list'")


def _cache_folder() -> Path:
    root = cache_root()
    if root is None:
        raise UsageError(
            f"the shared cache is off ({CACHE_ENV}={os.environ.get(CACHE_ENV)!r})",
            f"unset {CACHE_ENV} or point it at a folder",
        )
    return root


def list_entries(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.console import print_rows

    root = require_usable_root(_cache_folder())
    found = entries(root)
    foreign = [str(p) for p in survey(root)[1]]
    total = sum(int(e["bytes"]) for e in found)  # type: ignore[call-overload]
    if not args.json:
        rows = [
            {"kind": e["kind"], "name": e["name"], "MiB": f"{int(e['bytes']) / 2**20:.1f}",  # type: ignore[call-overload]
             "in use": "yes" if e["in_use"] else ""}
            for e in found
        ]  # fmt: skip
        print_rows(rows, title=f"forgetbench cache: {root}")
        print(f"{len(found)} entries, {total / 2**20:.1f} MiB")
        if foreign:
            print(
                f"{len(foreign)} item(s) here are not forgetbench entries and are left alone: "
                + ", ".join(foreign[:3])
                + (" ..." if len(foreign) > 3 else ""),
                file=sys.stderr,
            )
    return {"cache": str(root), "entries": found, "bytes": total, "foreign": foreign}


def clear_entries(args: argparse.Namespace) -> dict[str, Any]:
    root = require_usable_root(_cache_folder())
    removed, freed, kept = clear(root) if root.is_dir() else ([], 0, [])
    if not args.json:
        for name in removed:
            print(f"removed {name}")
        print(f"removed {len(removed)} entries ({freed / 2**20:.1f} MiB) from {root}")
        for name in kept:
            print(f"kept {name}: a run is using it", file=sys.stderr)
    return {"cache": str(root), "removed": len(removed), "removed_entries": removed,
            "bytes": freed, "kept": kept}  # fmt: skip
