"""The A/B split of a forget set: each author's questions cut into two halves at random (seeded).
An attack may train on or show A; it is scored on B only, so whatever it gets right on B was
recovered, not taught."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from forgetbench.errors import DataError
from forgetbench.records import QARecord

# TOFU writes 20 questions per author, in author order (`full` and each forget split).
DEFAULT_QUESTIONS_PER_AUTHOR = 20


@dataclass(frozen=True)
class Halves:
    """Question indices (positions in the forget split) of each half, and the author groups."""

    a: tuple[int, ...]
    b: tuple[int, ...]
    authors: tuple[tuple[int, ...], ...]

    def to_json(self) -> dict[str, list]:
        return {"a": list(self.a), "b": list(self.b), "authors": [list(g) for g in self.authors]}


def author_groups(
    records: Sequence[QARecord], *, questions_per_author: int = DEFAULT_QUESTIONS_PER_AUTHOR
) -> list[list[int]]:
    """Indices grouped by author: by `entity` when every record names one, else consecutive
    blocks of `questions_per_author` (TOFU's and the miniature's order)."""
    if records and all(r.entity for r in records):
        groups: dict[str, list[int]] = {}
        for i, record in enumerate(records):
            groups.setdefault(record.entity or "", []).append(i)
        return list(groups.values())
    return [
        list(range(start, min(start + questions_per_author, len(records))))
        for start in range(0, len(records), questions_per_author)
    ]


def split_halves(
    records: Sequence[QARecord],
    *,
    seed: int,
    questions_per_author: int = DEFAULT_QUESTIONS_PER_AUTHOR,
) -> Halves:
    """Each author's questions shuffled with `seed` and cut in two; an odd one out goes to B."""
    groups = author_groups(records, questions_per_author=questions_per_author)
    if any(len(g) < 2 for g in groups):
        raise DataError(
            "the relearning and in-context attacks need at least 2 questions per forget author",
            f"found an author with {min(len(g) for g in groups)}",
        )
    rng = random.Random(seed)
    a: list[int] = []
    b: list[int] = []
    for group in groups:
        shuffled = list(group)
        rng.shuffle(shuffled)
        half = len(shuffled) // 2
        a += sorted(shuffled[:half])
        b += sorted(shuffled[half:])
    return Halves(tuple(sorted(a)), tuple(sorted(b)), tuple(tuple(g) for g in groups))


def author_of(halves: Halves) -> dict[int, int]:
    """Question index -> its author group's position."""
    return {i: n for n, group in enumerate(halves.authors) for i in group}
