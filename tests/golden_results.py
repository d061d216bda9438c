"""The tiny study's results.json, frozen: refactors that should not move a number are checked
against it (tests/test_pipeline.py). Regenerate after a deliberate change with
`FORGETBENCH_UPDATE_GOLDEN=1 pytest tests/test_pipeline.py -k golden` and say why in the commit."""

from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden" / "tiny_study_results.json"
TOLERANCE = 1e-6
# Run-specific, not results: when and where it ran, how long it took.
VOLATILE = ("created", "git_sha", "timings", "model", "workers", "forgetbench_version")


def frozen(results: dict[str, Any]) -> dict[str, Any]:
    import torch

    kept = {k: v for k, v in results.items() if k not in VOLATILE}
    kept["config"] = {k: v for k, v in results["config"].items() if k != "out"}
    # Numbers, not layout: rows and examples keyed by what they are, whatever order they come in
    # (the default method order follows the registry).
    kept["config"]["study"] = {
        **kept["config"]["study"],
        "methods": sorted(kept["config"]["study"]["methods"]),
    }
    kept["rows"] = {f"{r['split']}/{r['method']}/{r['step']}": r for r in results["rows"]}
    kept["examples"] = {
        f"{e['split']}/{e['method']}/{e['step']}/{e['question']}": e for e in results["examples"]
    }
    # Floating point is reproducible on one build of torch on one kind of machine, not across.
    kept["build"] = {"torch": torch.__version__, "machine": platform.machine()}
    return kept


def differences(got: Any, want: Any, where: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        found = [f"{where}: keys {sorted(set(got) ^ set(want))}"] if set(got) != set(want) else []
        for key in want.keys() & got.keys():
            found += differences(got[key], want[key], f"{where}.{key}")
        return found
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items, golden {len(want)}"]
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in differences(g, w, f"{where}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(want, numbers) and isinstance(got, numbers) and not isinstance(want, bool):
        both_nan = isinstance(want, float) and math.isnan(want) and math.isnan(got)
        return [] if both_nan or abs(got - want) <= TOLERANCE else [f"{where}: {got!r} != {want!r}"]
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]


def check_against_golden(results: dict[str, Any]) -> tuple[bool, list[str]]:
    """(comparable, differences): not comparable on another torch build or machine type."""
    current = frozen(results)
    if os.environ.get("FORGETBENCH_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    if golden["build"] != current["build"]:
        return False, [f"golden from {golden['build']}, this is {current['build']}"]
    return True, differences(current, golden)
