"""Does forgetting reach what the forget set entails? The arithmetic over results.json rows that the
report and its findings share (docs/generalisation.md).

For a metric `m` (a probability: higher = the model knows more), the finetuned model F and the
retain model R, a method's model M closes the share

    gap_closed(set) = (m_F(set) - m_M(set)) / (m_F(set) - m_R(set))

of the finetuned-vs-retain gap on a set: 0 = still answers like the finetuned model, 1 = answers
like the model that never saw the forget set. It is computed on the forget set itself and on each
probe kind that entails it (`paraphrase`, `reverse`, `two_hop`); a method whose forgetting
generalises closes about as much of each probe's gap as of the forget set's. `shared` holds facts
both reference models know, so there is no gap to close: its number is the collateral,

    collateral = (m_F(shared) - m_M(shared)) / m_F(shared),

the share of the finetuned model's knowledge of retained facts the method wiped (0 is right).
"""

from __future__ import annotations

from collections.abc import Sequence

from forgetbench.rows import Row, final, methods, number, reference

ENTAILED = ("paraphrase", "reverse", "two_hop")  # the probes whose gap forgetting should close
SHARED = "shared"
METRIC = "probability"
# A gap narrower than this (in probability) is no gap: its share would divide noise by noise.
MIN_GAP = 0.05


def probe_key(kind: str, metric: str = METRIC) -> str:
    """The results key of a probe kind's metric, or of the forget set's for kind "forget"."""
    return f"{kind}/{metric}" if kind == "forget" else f"probes/{kind}/{metric}"


def gap(rows: Sequence[Row], split: str, kind: str) -> float | None:
    """m_F - m_R on `kind` ("forget" or a probe kind), or None where a reference row lacks it."""
    finetuned, retain = reference(rows, split), reference(rows, split, "retain")
    if finetuned is None or retain is None:
        return None
    high, low = number(finetuned, probe_key(kind)), number(retain, probe_key(kind))
    return None if high is None or low is None else high - low


def gap_closed(rows: Sequence[Row], row: Row, kind: str) -> float | None:
    """The share of the finetuned-vs-retain gap on `kind` that `row`'s model closes; None where
    the references show no gap (below MIN_GAP) or a number is missing."""
    split = str(row["split"])
    width = gap(rows, split, kind)
    finetuned = reference(rows, split)
    value = number(row, probe_key(kind))
    if width is None or width < MIN_GAP or finetuned is None or value is None:
        return None
    high = number(finetuned, probe_key(kind))
    assert high is not None  # gap() read it
    return (high - value) / width


def collateral(rows: Sequence[Row], row: Row) -> float | None:
    """The share of the finetuned model's probability on the `shared` probes that `row`'s model
    lost (negative: it gained); None where a number is missing or the finetuned model has none."""
    finetuned = reference(rows, str(row["split"]))
    high = number(finetuned, probe_key(SHARED)) if finetuned is not None else None
    value = number(row, probe_key(SHARED))
    if high is None or value is None or high <= 0:
        return None
    return (high - value) / high


def has_probes(rows: Sequence[Row]) -> bool:
    return any(key.startswith("probes/") for row in rows for key in row)


def generalisation(rows: Sequence[Row], split: str) -> list[dict[str, object]]:
    """Per method, at its final step on `split`: the gap closed on the forget set and on each
    entailed probe, and the collateral on shared facts (None where not measurable)."""
    table = []
    for method in methods(rows):
        row = final(rows, split, method)
        if row is None:
            continue
        entry: dict[str, object] = {"method": method, "step": row["step"]}
        for kind in ("forget", *ENTAILED):
            entry[kind] = gap_closed(rows, row, kind)
        entry["collateral"] = collateral(rows, row)
        table.append(entry)
    return table


def reference_gaps(rows: Sequence[Row], split: str) -> dict[str, float | None]:
    """m_F - m_R per kind on `split` (the forget set and every probe kind): what the world gives
    the finetuned model to know that the retain model cannot."""
    return {kind: gap(rows, split, kind) for kind in ("forget", *ENTAILED, SHARED)}
