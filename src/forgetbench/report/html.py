"""The HTML report: one self-contained page built from a results folder's results.json alone.

This module works out what the page shows (which plots can be drawn, the leaderboard, each
section from its module: `mia_tables`, `examples`, `meta_section`, `muse_wmdp`);
templates/report.html.j2 lays it out, with templates/report.css inlined and the plots
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
from forgetbench.benchmarks.corpus import corpus_benchmark
from forgetbench.generalisation import MIN_GAP
from forgetbench.io import atomic_write_text
from forgetbench.lume_gate import lume_noise
from forgetbench.metrics.lume import MMLU_THRESHOLD
from forgetbench.report import plots, robustness, tables
from forgetbench.report.examples import examples_section
from forgetbench.report.figure import slug
from forgetbench.report.findings import check_findings, findings_rules
from forgetbench.report.generalisation import generalisation_bars
from forgetbench.report.meta_section import meta_eval_section
from forgetbench.report.mia_tables import NOT_RESOLVABLE, mia_grid, mia_tables
from forgetbench.report.muse_wmdp import muse_wmdp_sections
from forgetbench.report.rwku import rwku_tables
from forgetbench.report.transfer import transfer_sections
from forgetbench.report.validity import verdict
from forgetbench.results import MetaEval, Results, load_meta_eval, load_results
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
    validity = results.validity
    board = tables.without_noise(row_math.leaderboard(rows), validity)
    seeds = _seed_table(rows, board) if row_math.is_seeded(rows) else None
    # With seeds, the plots and reference table draw each step's mean over the seeds.
    rows = row_math.seed_means(rows) if seeds else rows
    references = tables.without_noise(row_math.reference_entries(rows), validity)
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
        mia=mia_grid(rows),
        mia_tables=mia_tables(rows),
        not_resolvable=NOT_RESOLVABLE,
        plots=groups,
        examples=examples_section(examples, board),
        metric_versions=list(results.metric_versions.items()),
        config=json.dumps(_config(results), indent=2, sort_keys=True, ensure_ascii=False),
        settings=tables.settings_table(rows),
        utility_ratio=f"{row_math.UTILITY_RATIO:g}",
        mmlu_threshold=f"{MMLU_THRESHOLD:g}",
        findings=check_findings(rows),
        findings_rules=list(findings_rules().items()),
        meta=meta_eval_section(meta),
        # A MUSE study's sequence rows are drawn by its own section (scalability, sustainability).
        transfer=_transfer(results) if tofu else None,
    )


def _config(results: Results) -> dict[str, Any] | None:
    """The resolved config as the study read it: a document benchmark's (MUSE, WMDP) without the
    TOFU-shaped study's options, also from a results.json written before it recorded so."""
    bench = corpus_benchmark(results.benchmark) if results.benchmark else None
    return bench.read_config(results.config) if bench and results.config else results.config


def _muse_wmdp(results: Results, rows: Sequence[row_math.Row]) -> dict[str, Any]:
    """The MUSE, WMDP and RWKU sections; their figures' SVG marked safe (matplotlib escapes)."""
    found = muse_wmdp_sections(rows, [row.model_dump() for row in results.sequence])
    for section in [*found["muse"], *found["wmdp"]]:
        section["figures"] = {kind: Markup(svg) for kind, svg in section["figures"].items()}
    found["rwku"] = rwku_tables(rows)
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
        "lume": lume_noise(validity),
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
