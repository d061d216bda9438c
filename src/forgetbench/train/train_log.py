"""What a training run reports as it goes: `train_log.jsonl` (one JSON line per optimizer step,
kept up to the checkpoint a resumed run restarts from) and the progress bar."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)

from forgetbench.train.integrity import note

TRAIN_LOG = "train_log.jsonl"


def log_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(line, row) of every complete log line. A line that is not a JSON object with a step and a
    loss — the torn last line of a run killed mid-write, or bytes damaged since — is dropped with
    one line on stderr: the log is a record of the run, the checkpoint is what resume trusts."""
    if not path.is_file():
        return []
    rows, dropped = [], 0
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row["step"], int):
                raise ValueError(line)
            float(row["loss"])
        except (ValueError, KeyError, TypeError):
            dropped += 1
            continue
        rows.append((line, row))
    if dropped:
        note(f"{path}: dropped {dropped} torn or unreadable line(s); the rest is kept")
    return rows


def resume_log(path: Path, *, upto: int) -> list[float]:
    """Keep the log lines up to the checkpoint we resume from (later ones will be written again),
    drop any torn line, and return the kept losses."""
    if not path.is_file():
        return []
    kept = [(line, row) for line, row in log_rows(path) if row["step"] <= upto]
    path.write_text("".join(f"{line}\n" for line, _ in kept), encoding="utf-8")
    return [float(row["loss"]) for _, row in kept]


def append_log(path: Path, row: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")


class ProgressBar:
    """A rich progress bar with loss, tokens/s and ETA; silent when disabled."""

    def __init__(self, *, enabled: bool, total: int, done: int) -> None:
        self.enabled = enabled
        self.total = total
        self.done = done

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self.progress = Progress(
                TextColumn("[bold]train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]:.4f}  {task.fields[tps]:.0f} tok/s"),
                TimeRemainingColumn(),
                transient=False,
            )
            self.progress.start()
            self.task = self.progress.add_task(
                "train", total=self.total, completed=self.done, loss=float("nan"), tps=0.0
            )
        return self

    def update(self, step: int, *, loss: float, tokens_per_s: float) -> None:
        if self.enabled:
            self.progress.update(self.task, completed=step, loss=loss, tps=tokens_per_s)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.progress.stop()
