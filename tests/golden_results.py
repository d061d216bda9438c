"""The tiny study's results.json, frozen: refactors that should not move a number are checked
against it (tests/test_pipeline.py). Regenerate after a deliberate change with
`FORGETBENCH_UPDATE_GOLDEN=1 pytest tests/test_pipeline.py -k golden` and say why in the commit;
that writes this build's file only, so delete the other builds' files then (their numbers moved
too, and cannot be recomputed here).

Training amplifies float rounding, and the rounding depends on the kernels torch picks for the CPU
(its vector extension, and MKL's path for the vendor): the same code and packages trained a
different tiny finetuned model on an AMD EPYC with AVX-512 than on the machine the first golden
file came from (forget truth ratio 0.2868 against 0.3032). So there is one golden file per build,
and a run is compared with the most specific file whose build it matches."""

from __future__ import annotations

import json
import math
import os
import platform
import re
from pathlib import Path
from typing import Any

# One file per build; the first, tiny_study_results.json, recorded only torch and the machine type.
GOLDEN_DIR = Path(__file__).parent / "golden"
TOLERANCE = 1e-6
# Run-specific, not results: when and where it ran, how long it took.
VOLATILE = (
    "created", "git_sha", "timings", "model", "workers", "placement", "forgetbench_version",
    "reused",
)  # fmt: skip
# Keys added after the golden files were written (the generalisation probes' scores and their
# option; each row's settings, held-out forget quality and degenerate share; the leaderboard;
# the validity block's LUME final verdict; RWKU's utility metrics' versions; the kernel,
# padding-free and generation-cache options, which change how the work runs, not its numbers;
# the config's rwku section and unlearn.layers):
# a run may have them where a file does not; every number a file holds is still compared.
ADDED = re.compile(
    r"(probes|settings|forget_quality)/|probes$|(forget/)?degenerate$"
    r"|forget_quality_held_out$|leaderboard$|lume_final$|rwku/|^rwku$|^rwku_utility$|^layers$"
    r"|^(compile|liger_kernel|padding_free|cache_implementation|compile_generation)$"
)


def frozen(results: dict[str, Any]) -> dict[str, Any]:
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
    kept["build"] = build()
    return kept


def build() -> dict[str, str]:
    """What float rounding depends on: torch's version, the machine type, the vector extension
    torch dispatches to and the CPU vendor (MKL takes other paths on other vendors' CPUs)."""
    import torch

    return {
        "torch": torch.__version__,
        "machine": platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_vendor": _cpu_vendor(),
    }


def _cpu_vendor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def golden_files() -> list[Path]:
    return sorted(GOLDEN_DIR.glob("tiny_study_results*.json"))


def golden_for(current: dict[str, str]) -> tuple[Path, dict[str, Any]] | None:
    """(file, contents) of the golden file of the most specific build `current` matches (every
    field that file's build records is equal), None when none does."""
    matching = []
    for path in golden_files():
        golden = json.loads(path.read_text())
        if all(current.get(key) == value for key, value in golden["build"].items()):
            matching.append((len(golden["build"]), path.name, path, golden))
    if not matching:
        return None
    *_, path, golden = max(matching)
    return path, golden


def golden_name(current: dict[str, str]) -> str:
    parts = [current["torch"], current["machine"], current["cpu_capability"], current["cpu_vendor"]]
    return "tiny_study_results." + "-".join(re.sub(r"[^A-Za-z0-9.]+", "_", p) for p in parts)


def differences(got: Any, want: Any, where: str = "") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        changed = {k for k in set(got) ^ set(want) if k in want or not ADDED.match(k)}
        found = [f"{where}: keys {sorted(changed)}"] if changed else []
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
    """(comparable, differences): not comparable on a build no golden file is for."""
    current = frozen(results)
    if os.environ.get("FORGETBENCH_UPDATE_GOLDEN"):
        GOLDEN_DIR.mkdir(exist_ok=True)
        path = GOLDEN_DIR / f"{golden_name(current['build'])}.json"
        path.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    found = golden_for(current["build"])
    if found is None:
        names = [p.name for p in golden_files()]
        return False, [f"no golden file among {names} is for this build, {current['build']}"]
    path, golden = found
    # The build fields the file does not record are not compared.
    current["build"] = {k: v for k, v in current["build"].items() if k in golden["build"]}
    return True, [f"({path.name}) {d}" for d in differences(current, golden)]
