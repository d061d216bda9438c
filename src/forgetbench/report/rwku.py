"""RWKU's rows drawn for the terminal: per target, each model's forget FB / QA / AA, neighbour
FB / QA, MIA on FM and RM (the LOSS score) and utility, as the paper's main table lays them out;
and the adversarial probes per attack. Numbers only: what they mean is docs/rwku.md's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from forgetbench.report.console import _console
from forgetbench.rows import Row

COLUMNS = (
    ("forget FB", "rwku/forget_fb"), ("forget QA", "rwku/forget_qa"),
    ("forget AA", "rwku/forget_aa"), ("neighbour FB", "rwku/neighbor_fb"),
    ("neighbour QA", "rwku/neighbor_qa"), ("MIA FM", "rwku/mia_fm/loss"),
    ("MIA RM", "rwku/mia_rm/loss"), ("MMLU", "rwku/mmlu"), ("BBH", "rwku/bbh"),
    ("TruthfulQA MC1", "rwku/truthful_mc1"), ("TriviaQA F1", "rwku/triviaqa_f1"),
    ("fluency", "rwku/fluency"),
)  # fmt: skip
ATTACK_PREFIX = "rwku/forget_aa/"


def is_rwku(rows: Sequence[Row]) -> bool:
    return any(k.startswith("rwku/") for r in rows for k in r)


def _cell(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, int | float) else "—"


def _final(rows: Sequence[Row], split: str) -> list[Row]:
    """The split's reference rows and each method's last step."""
    last: dict[str, Row] = {}
    for row in rows:
        later = row["method"] not in last or row["step"] >= last[row["method"]]["step"]
        if row["split"] == split and later:
            last[row["method"]] = row
    return list(last.values())


def rwku_tables(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per target: the main table and the per-attack table (rows: the models at their last
    step; "finetuned" is the original model unlearning started from, "retain" the reference
    that never saw the target)."""
    sections = []
    for split in dict.fromkeys(r["split"] for r in rows if is_rwku([r])):
        models = _final(rows, split)
        attacks = sorted({k for r in models for k in r if k.startswith(ATTACK_PREFIX)})
        batch = next((r.get("rwku_batch") for r in models if r.get("rwku_batch")), None)
        title = split if batch is None else (
            f"{split}: batch, the mean over its targets" if split == batch
            else f"{split} in batch {batch}"
        )  # fmt: skip
        sections.append({
            "split": split,
            "title": title,
            "head": ["model", "step", *(title for title, _ in COLUMNS)],
            "body": [[r["method"], r["step"], *(_cell(r.get(k)) for _, k in COLUMNS)]
                     for r in models],
            "attack_head": ["model", *(k.removeprefix(ATTACK_PREFIX) for k in attacks)],
            "attack_body": [[r["method"], *(_cell(r.get(k)) for k in attacks)] for r in models],
        })  # fmt: skip
    return sections


def print_rwku(rows: Sequence[Row], console: Console | None = None) -> None:
    console = console or _console()
    for section in rwku_tables(rows):
        for title, head, body in (
            (f"RWKU on {section['title']}", section["head"], section["body"]),
            (f"RWKU's adversarial probes on {section['title']} (ROUGE-L recall per attack)",
             section["attack_head"], section["attack_body"]),
        ):  # fmt: skip
            table = Table(title=title)
            for i, column in enumerate(head):
                table.add_column(column, justify="left" if i == 0 else "right", overflow="fold")
            for cells in body:
                table.add_row(*(Text(str(c)) for c in cells))
            console.print(table)
