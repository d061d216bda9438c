"""The HTML report: one self-contained page built from a results folder's results.json alone.

This module works out what the page shows (which plots can be drawn, the leaderboard, the
examples); templates/report.html.j2 lays it out, with templates/report.css inlined and the plots
as inline SVG: no scripts and no external URL, so the file can be mailed or archived and opened
anywhere. jinja2 escapes every value from the results (questions, generations, method and split
names, config values); only the plots' SVG is marked safe. The same results.json gives a
byte-identical page: nothing here reads the clock or the machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from forgetbench import rows as row_math
from forgetbench.generalisation import MIN_GAP
from forgetbench.io import atomic_write_text
from forgetbench.metrics.lume import MMLU_THRESHOLD
from forgetbench.metrics.mia_roc import LOW_FPRS, min_nonmembers
from forgetbench.report import plots, robustness, tables
from forgetbench.report.figure import slug
from forgetbench.report.findings import check_findings, findings_rules
from forgetbench.report.generalisation import generalisation_bars
from forgetbench.report.meta_plot import meta_eval_plot
from forgetbench.report.muse_wmdp import muse_wmdp_sections
from forgetbench.report.rwku import rwku_tables
from forgetbench.report.transfer import transfer_sections
from forgetbench.report.validity import verdict
from forgetbench.results import Example, MetaEval, Results, load_meta_eval, load_results
from forgetbench.validity import (
    DISTINGUISHABLE_BAR,
    LEARNT_MARGIN,
    failed_checks,
    passed,
    problems,
    ranks,
)

REPORT_FILE = "report.html"
TEMPLATE = "report.html.j2"
EXAMPLES_PER_SPLIT = 3  # questions shown per split, each with every method's answer

_SUBSCORE_KEYS = [f"{s}/{m}" for s, _ in plots.SETS for m, _ in plots.SUBSCORES]
# figure id prefix -> (title, plot function, key groups a split needs a value from each of, what
# the note says is missing otherwise); a key ending in "/" stands for every key it prefixes.
_PLOTS: dict[
    str, tuple[str, Callable[[Sequence[Any], str], str], tuple[tuple[str, ...], ...], str]
] = {
    "fq-plane": (
        "Forget quality vs model utility",
        plots.forget_quality_plane,
        (("forget_quality",), ("model_utility",)),
        "forget_quality with model_utility",
    ),
    "subscores": (
        "TOFU sub-scores over unlearning steps",
        plots.subscore_curves,
        (tuple(_SUBSCORE_KEYS),),
        "TOFU sub-scores (forget/rougeL, ...)",
    ),
    "formats": (
        "Scores per format",
        plots.format_grid,
        (("formats/",),),
        "formats/<format>/<side> scores",
    ),
    "generalisation": (
        "Does forgetting generalise?",
        generalisation_bars,
        (("probes/",),),
        "probes/<kind> scores (the miniature's generalisation probes)",
    ),
    "mia": (
        "Membership inference and utility over unlearning steps",
        plots.mia_curves,
        (("mia/",),),
        "mia/<attack> AUCs",
    ),
    "robustness": (
        "Robustness attacks",
        robustness.robustness_bars,
        (("attack/none/rougeL",),),
        "attack/* scores (study.attacks)",
    ),
}


@dataclass(frozen=True)
class Figure:
    id: str
    kind: str  # a key of _PLOTS; the template captions each kind
    split: str
    svg: Markup
    # The reference models (finetuned, retain, base) drawn in it: a caption names only these.
    drawn: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PlotGroup:
    title: str
    figures: list[Figure]


def build_report(results_dir: Path) -> Path:
    """Write `results_dir/report.html` from `results_dir/results.json` (and meta_eval.json, when
    the folder has one) atomically and return it."""
    results = load_results(Path(results_dir))
    meta = load_meta_eval(Path(results_dir))
    return atomic_write_text(Path(results_dir) / REPORT_FILE, render_html(results, meta))


def render_html(results: Results, meta: MetaEval | None = None) -> str:
    """The whole page, as text."""

    # Tables and plots read rows as plain mappings, as the CLI hands them the study's own rows.
    rows = [row.model_dump() for row in results.rows]
    # Splits with the same questions (the tiny scale's forget01/05/10) carry identical rows: the
    # page shows the computed one and names the others beside it (results.csv keeps them all).
    same = {s: c for s, c in results.same_data.items() if c in row_math.splits(rows) and s != c}
    rows = [r for r in rows if r["split"] not in same]
    examples = [e for e in results.examples if e.split not in same]
    board = row_math.leaderboard(rows)
    validity = results.validity
    seeds = _seed_table(rows, board) if row_math.is_seeded(rows) else None
    # With seeds, the plots and reference table draw each step's mean over the seeds.
    rows = row_math.seed_means(rows) if seeds else rows
    references = row_math.reference_entries(rows)
    columns = tables.leaderboard_columns(board or references)
    identical = _identical(results.rows, same)
    groups, notes = _figures(rows)
    released = _muse_wmdp(results, rows)
    # A MUSE or WMDP study has no TOFU scores: its page leaves out TOFU's leaderboard, findings,
    # sequence plots and the notes on TOFU's missing plots rather than show them empty (its own
    # validity gates stay, when results.json has them).
    tofu = row_math.tofu_scored(rows)
    notes = notes if tofu else []
    template = _environment().get_template(TEMPLATE)
    return template.render(
        results=results,
        tofu=tofu,
        released=released,
        identical=identical,
        labels={g["shown"]: f"{g['shown']} (= {', '.join(g['others'])})" for g in identical},
        timings=_timings(results.timings),
        notes=notes,
        lume_notes=tables.lume_mmlu_notes(rows),
        validity=_validity(validity),
        ranked=ranks(validity),
        ranks=row_math.tie_ranks(board),
        privleak_column=any(key == "privleak" for key, _ in columns),
        probe_min_gap=MIN_GAP,
        board=board,
        board_caption=tables.board_caption(board),
        over_bars={
            "rouge": f"{row_math.OVER_ROUGE_RATIO:g}",
            "privleak": f"{row_math.OVER_PRIVLEAK:g}",
            "degenerate": f"{row_math.OVER_DEGENERATE:g}",
        },
        references=references,
        seeds=seeds,
        columns=columns,
        lume_column=any(key == "lume_final" for key, _ in columns),
        board_notes=sorted({e["note"] for e in board} - {""}),
        robustness=_robustness(rows),
        robustness_caption=robustness.CAPTION,
        mia=_mia_grid(rows),
        mia_tables=_mia_tables(rows),
        not_resolvable=NOT_RESOLVABLE,
        plots=groups,
        examples=_examples(examples, board),
        metric_versions=list(results.metric_versions.items()),
        config=json.dumps(results.config, indent=2, sort_keys=True, ensure_ascii=False),
        settings=tables.settings_table(rows),
        utility_ratio=f"{row_math.UTILITY_RATIO:g}",
        mmlu_threshold=f"{MMLU_THRESHOLD:g}",
        findings=check_findings(rows),
        findings_rules=list(findings_rules().items()),
        meta=_meta_eval(meta),
        # A MUSE study's sequence rows are drawn by its own section (scalability, sustainability).
        transfer=_transfer(results) if tofu else None,
    )


def _muse_wmdp(results: Results, rows: Sequence[row_math.Row]) -> dict[str, Any]:
    """The MUSE, WMDP and RWKU sections; the WMDP figures' SVG marked safe (matplotlib
    escapes)."""
    found = muse_wmdp_sections(rows, [row.model_dump() for row in results.sequence])
    found["rwku"] = rwku_tables(rows)
    for section in found["wmdp"]:
        section["svg"] = Markup(section["svg"])
    return found


def _validity(validity: Mapping[str, Any] | None) -> dict[str, Any]:
    """The validity section: its verdict, the checks that did not pass (failed first) and how it
    looks (`fail`, `unknown` or `pass`)."""
    checks = problems(validity)
    level = "fail" if failed_checks(validity) else ("unknown" if checks or not validity else "pass")
    if checks:  # which gates did pass, under the ones that did not
        checks = [*checks, *passed(validity)]
    return {
        "verdict": verdict(validity),
        "checks": checks,
        "level": level,
        "bar": f"{DISTINGUISHABLE_BAR:g}",
        "margin": f"{LEARNT_MARGIN:g}",
    }


def _identical(rows: Sequence[Any], same: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each group of splits with the same questions: the split shown and the ones it stands for,
    in the study's order."""
    order = list(dict.fromkeys(r.split for r in rows))
    return [
        {"shown": shown, "others": [s for s in order if same.get(s) == shown]}
        for shown in dict.fromkeys(same.values())
    ]


def _transfer(results: Results) -> dict[str, Any] | None:
    """The cross-format and sequence sections (report/transfer.py), None without their rows."""

    def plain(rows: Sequence[Any]) -> list[dict[str, Any]]:
        return [row.model_dump() for row in rows]

    found = transfer_sections(plain(results.rows), plain(results.cross_format),
                              plain(results.sequence))  # fmt: skip
    if found is None:
        return None
    # The one value not escaped besides the page's other plots: matplotlib's own SVG.
    for item in [*found["matrices"], *found["sequences"]]:
        item["svg"] = Markup(item["svg"])
    return found


def _meta_eval(meta: MetaEval | None) -> dict[str, Any] | None:
    """The meta-evaluation section: pools, table and plot; None without a meta_eval.json."""
    if meta is None:
        return None

    def cell(m: Any, key: str) -> str:
        value = getattr(m, key)
        return tables.format_cell(value) if value is not None else "—"

    body = [
        [
            m.metric,
            m.direction,
            tables.format_cell(m.faithfulness),
            cell(m, "robustness") if m.robustness is not None else (m.robustness_note or "—"),
            cell(m, "relearning"),
            cell(m, "quantisation"),
            len(m.attacked),
            f"{m.positives} / {m.negatives}",
            tables.format_cell(m.positive_mean),
            tables.format_cell(m.negative_mean),
        ]
        for m in meta.metrics
    ]
    head = ["metric", "knows if", "faithfulness (AUC)", "robustness", "relearning R",
            "quantisation Q", "attacked models", "pools (+ / −)"]  # fmt: skip
    robust = meta.robustness or {}
    return {
        "split": meta.split,
        "scale": meta.scale,
        "sizes": meta.pool_sizes(),
        "models": [[m.pool, m.label, m.split, m.seed, m.epochs, f"{m.lr:g}"] for m in meta.models],
        "head": [*head, "positive mean", "negative mean"],
        "body": body,
        "robust": any(m.robustness is not None for m in meta.metrics),
        "attacked_methods": ", ".join(robust.get("methods", [])),
        "utility_kept": robust.get("utility_kept"),
        "not_judged": list(meta.not_judged.items()),
        "svg": Markup(meta_eval_plot(meta.metrics)),
    }


@cache
def _environment() -> jinja2.Environment:
    # PackageLoader reads the installed package's data, so a wheel install finds the template.
    # StrictUndefined: a misspelt name in the template fails the render instead of printing "".
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("forgetbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    environment.filters["cell"] = tables.format_cell
    environment.filters["board_cell"] = tables.board_cell
    environment.filters["show"] = _show
    return environment


def _figures(rows: Sequence[row_math.Row]) -> tuple[dict[str, PlotGroup], list[str]]:
    """Every plot that can be drawn, by kind (a key of `_PLOTS`), and a note for each plot left
    out for lack of data."""
    groups: dict[str, PlotGroup] = {}
    notes: list[str] = []
    used: set[str] = set()
    for kind, (title, draw, needs, missing) in _PLOTS.items():
        drawable = [s for s in row_math.splits(rows) if all(_has(rows, s, keys) for keys in needs)]
        if not drawable:
            notes.append(f"{title}: omitted, results.json has no {missing}.")
            continue
        figures = []
        for split in row_math.splits(rows):
            if split not in drawable:
                notes.append(f"{title} on {split}: omitted, results.json has no {missing} for it.")
                continue
            figure_id = _unique(f"{kind}-{slug(split)}", used)
            # The one string not escaped: matplotlib writes the SVG and escapes the text in it
            # (method and split names included), which tests/report checks with hostile names.
            drawn = frozenset(
                name
                for name in row_math.REFERENCE_METHODS
                if (row := row_math.reference(rows, split, name)) is not None
                and all(_has([row], split, keys) for keys in needs)
            )
            figures.append(Figure(figure_id, kind, split, Markup(draw(rows, split)), drawn))
        groups[kind] = PlotGroup(title, figures)
    return groups, notes


def _has(rows: Sequence[row_math.Row], split: str, keys: Sequence[str]) -> bool:
    """Whether a row of `split` has a value for one of `keys` (a key ending in '/' is a prefix)."""
    return any(
        r["split"] == split
        and any(k == key or (key.endswith("/") and k.startswith(key)) for key in keys)
        and row_math.number(r, k) is not None
        for r in rows
        for k in r
    )


def _timings(timings: Mapping[str, float | None]) -> dict[str, Any] | None:
    """Each stage's time and the total, as text; None when the results recorded no timings."""
    if not timings:
        return None
    # `total` is the run's wall time; older results without it get the sum of the stages.
    stages = {k: v for k, v in timings.items() if k != "total"}
    total = row_math.as_number(timings.get("total"))
    if total is None:
        total = sum(n for v in stages.values() if (n := row_math.as_number(v)) is not None)
    return {"stages": [(k, _seconds(v)) for k, v in stages.items()], "total": _seconds(total)}


def _seed_table(rows: Sequence[row_math.Row], board: Sequence[Any]) -> dict[str, list[Any]]:
    """Each leaderboard entry's mean and 95% interval over seeds, at its chosen step: forget
    quality (log10), model utility and every TOFU sub-score present."""
    keys = [("log10_forget_quality", "log10 forget quality"), ("model_utility", "model utility")]
    keys += [(k, k) for k in _SUBSCORE_KEYS if row_math.has_key(rows, k)]
    body = []
    for summary in row_math.seed_summary(rows, board):
        cells = [summary["method"], summary["split"], summary["step"], len(summary["seeds"])]
        for key, _ in keys:
            found = summary["scores"].get(key)
            cells.append(
                None
                if found is None
                else f"{tables.format_cell(found['mean'])} [{tables.format_cell(found['low'])}, "
                f"{tables.format_cell(found['high'])}]"
            )
        body.append(cells)
    return {"head": ["method", "split", "step", "seeds", *(t for _, t in keys)], "body": body}


def _robustness(rows: Sequence[row_math.Row]) -> list[dict[str, Any]]:
    """Per split, the robustness table of its attacked models (the retain and finetuned models
    and each method's final step)."""
    out = []
    for split in row_math.splits(rows):
        named = {}
        for method in (*row_math.REFERENCE_METHODS, *row_math.methods(rows)):
            row = (
                row_math.reference(rows, split, method)
                if method in row_math.REFERENCE_METHODS
                else row_math.final(rows, split, method)
            )
            if row is not None and "attack/none/rougeL" in row:
                named[method] = row
        if named:
            head, body = robustness.robustness_rows(named)
            out.append({"split": split, "head": head, "body": body})
    return out


NOT_RESOLVABLE = "n/r"
ATTACK_NAMES = {
    "loss": "LOSS",
    "zlib": "zlib",
    "min_k": "Min-K%",
    "min_k_plus_plus": "Min-K%++",
    "reference": "reference (retain model)",
    "lira": "LiRA (online, shadows)",
    "rmia": "RMIA (online, shadows)",
}


def _count(row: row_math.Row, key: str) -> int | None:
    value = row_math.number(row, key)
    return None if value is None else int(value)


def _mia_grid(rows: Sequence[row_math.Row]) -> list[dict[str, Any]]:
    """Per split, one table of membership-inference AUCs: a row per model (the reference models,
    then each method at its last step), a column per attack. Each cell is shaded by how far the
    AUC lies from the retain model's (the target): red above it, blue below."""
    attacks = plots.mia_attacks(rows)
    out = []
    for split in row_math.splits(rows):
        retain = row_math.reference(rows, split, "retain")
        models = [(m, row_math.reference(rows, split, m)) for m in row_math.REFERENCE_METHODS]
        models += [(m, row_math.final(rows, split, m)) for m in row_math.methods(rows)]
        body = []
        for method, row in models:
            if row is None or not any(
                row_math.number(row, f"mia/{a}") is not None for a in attacks
            ):
                continue
            cells = []
            for attack in attacks:
                value = row_math.number(row, f"mia/{attack}")
                target = row_math.number(retain, f"mia/{attack}") if retain else None
                cells.append((tables.format_cell(value), _shade(value, target)))
            body.append({"model": method, "step": int(row.get("step") or 0), "cells": cells})
        if body:
            head = [ATTACK_NAMES.get(a, a) for a in attacks]
            out.append({"split": split, "head": head, "body": body})
    return out


def _shade(value: float | None, target: float | None) -> str:
    """A cell's background: its distance from the retain model's AUC, full colour at 0.3 away.
    Built from two numbers only, never from a string of the results."""
    if value is None or target is None:
        return ""
    distance = value - target
    alpha = min(abs(distance) / 0.3, 1.0) * 0.55
    if alpha < 0.005:
        return ""
    rgb = "214, 39, 40" if distance > 0 else "31, 119, 180"
    return f"background: rgba({rgb}, {alpha:.2f})"


def _mia_tables(rows: Sequence[row_math.Row]) -> list[dict[str, Any]]:
    """One membership-inference table per split and model (the reference models, then each
    method at its last step): a row per attack, its AUC and TPRs at low FPR, beside the retain
    model's. A TPR the holdout is too small to measure shows as `NOT_RESOLVABLE`."""
    attacks = plots.mia_attacks(rows)
    if not attacks:
        return []

    def tpr(row: row_math.Row | None, attack: str, suffix: str) -> str:
        if row is None:
            return "—"
        value = row_math.number(row, f"mia/{attack}/{suffix}")
        if value is not None:
            return tables.format_cell(value)
        count = row_math.number(row, "mia/nonmembers")
        short = count is not None and count < min_nonmembers(LOW_FPRS[suffix])
        return (
            NOT_RESOLVABLE if short and row_math.number(row, f"mia/{attack}") is not None else "—"
        )

    head = ["attack", "AUC", *(f"TPR @ {s[4:-3]} FPR" for s in LOW_FPRS)]
    head += ["retain AUC", "retain TPR @ 1% FPR"]
    out = []
    for split in row_math.splits(rows):
        retain = row_math.reference(rows, split, "retain")
        models = [(m, row_math.reference(rows, split, m)) for m in row_math.REFERENCE_METHODS]
        models += [(m, row_math.final(rows, split, m)) for m in row_math.methods(rows)]
        for method, row in models:
            if row is None or not any(
                row_math.number(row, f"mia/{a}") is not None for a in attacks
            ):
                continue
            body = [
                [
                    ATTACK_NAMES.get(attack, attack),
                    tables.format_cell(row_math.number(row, f"mia/{attack}")),
                    *(tpr(row, attack, suffix) for suffix in LOW_FPRS),
                    tables.format_cell(
                        row_math.number(retain, f"mia/{attack}") if retain else None
                    ),
                    tpr(retain, attack, "tpr@1%fpr"),
                ]
                for attack in attacks
            ]
            out.append(
                {
                    "split": split,
                    "method": method,
                    "step": int(row.get("step") or 0),
                    "members": _count(row, "mia/members"),
                    "nonmembers": _count(row, "mia/nonmembers"),
                    "head": head,
                    "body": body,
                }
            )
    return out


def _examples(
    examples: Sequence[Example], board: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per split, a few forget-set questions, each shown once: its ground truth, the finetuned
    model's answer (before) and every method's answer at the step the leaderboard chose, then at
    its last logged step when that is another one, each labelled."""
    chosen = {(e["split"], e["method"]): e["step"] for e in board}
    out = []
    for split in dict.fromkeys(e.split for e in examples):
        own = [e for e in examples if e.split == split]
        last = {
            m: max(e.step for e in own if e.method == m)
            for m in dict.fromkeys(e.method for e in own)
            if m not in row_math.REFERENCE_METHODS
        }
        if not last:
            continue
        questions = list(dict.fromkeys(e.question for e in own))[:EXAMPLES_PER_SPLIT]
        blocks = []
        for question in questions:
            asked = [e for e in own if e.question == question]
            truth = next((e.ground_truth for e in asked if e.ground_truth is not None), None)
            before = next((e for e in asked if e.method == "finetuned"), None)
            answers = [["finetuned (before)", "", *_generation(before)]]
            for method, final_step in last.items():
                leader = chosen.get((split, method))
                if leader is None or leader == final_step:
                    label = "leaderboard's step, last" if leader == final_step else "last"
                    steps = [(final_step, label)]
                else:
                    steps = [(leader, "leaderboard's step"), (final_step, "last")]
                for step, label in steps:
                    found = next((e for e in asked if e.method == method and e.step == step), None)
                    if found is not None:
                        answers.append([f"{method} ({label})", step, *_generation(found)])
            blocks.append({"question": question, "truth": truth, "answers": answers})
        out.append({"split": split, "questions": blocks})
    return out


def _generation(example: Example | None) -> tuple[str | None, str]:
    """A generation as shown, and a note when it held bytes that were not valid UTF-8: the
    tokenizer decodes them to U+FFFD, which would otherwise look like a character the model
    chose."""
    if example is None or example.generation is None:
        return None, ""
    if "\ufffd" in example.generation:
        count = example.generation.count("\ufffd")
        return example.generation, (
            f"{count} × � = bytes that are not valid UTF-8 (the model produced an incomplete "
            "multi-byte character; the tokenizer decodes it as U+FFFD)"
        )
    return example.generation, ""


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}-{n}"
    used.add(candidate)
    return candidate


def _seconds(value: Any) -> str:
    number = row_math.as_number(value)
    if number is None:
        return "—"
    minutes, seconds = divmod(number, 60)
    return f"{int(minutes)} min {seconds:04.1f} s" if minutes else f"{seconds:.1f} s"


def _show(value: Any) -> str:
    return "—" if value is None else str(value)
