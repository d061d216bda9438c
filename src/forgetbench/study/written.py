"""What a study writes: results.json (through the model `report` reads with) and results.csv, one
line per row. Every study (`run`'s TOFU-shaped one and the document benchmarks') writes here."""

from __future__ import annotations

import csv
import io
import subprocess
from pathlib import Path
from typing import Any

from forgetbench.io import atomic_write_json, atomic_write_text
from forgetbench.results import RESULTS_FILE, Results
from forgetbench.rows import REFERENCE_METHODS, chosen_steps

CSV_NAME = "results.csv"


def git_sha() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json (everything) and results.csv (one row per model and step), atomically."""

    # Written through the model `report` reads with, so a study never writes a file the report
    # would refuse; a ValidationError here is a bug in the study, not in anyone's file.
    results = Results.model_validate(results).dump()
    atomic_write_json(out / RESULTS_FILE, results)
    atomic_write_text(out / CSV_NAME, results_csv(results["rows"]))


def results_csv(rows: list[dict[str, Any]]) -> str:
    """results.csv: one line per row of results.json, every key a column, plus `leaderboard`:
    True on the row the leaderboard chose for its split and method (every seed's, with seeds),
    False on the method's other steps, empty for the reference models. The leaderboard is then
    the rows with leaderboard == True, sorted by forget quality."""
    chosen = chosen_steps(rows)
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    # Before `log`, which has always closed the row.
    at = columns.index("log") if "log" in columns else len(columns)
    columns.insert(at, "leaderboard")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        cells = {k: "" if row.get(k) is None else row.get(k) for k in columns}
        if row["method"] in REFERENCE_METHODS:
            cells["leaderboard"] = ""
        else:
            key = (row["split"], row["method"], int(row.get("step") or 0))
            cells["leaderboard"] = key in chosen
        writer.writerow(cells)
    return buffer.getvalue()
