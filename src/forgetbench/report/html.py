"""The HTML report: one self-contained page built from a results folder's results.json alone.

Inline CSS and inline SVG, no scripts and no external URL, so the file can be mailed or archived
and opened anywhere. Every string that comes from the results (questions, generations, method and
split names, config values) goes through `html.escape`. The same results.json gives a
byte-identical page: nothing here reads the clock or the machine.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from forgetbench.io import atomic_write_text
from forgetbench.metrics.lume import MMLU_THRESHOLD
from forgetbench.report import plots, tables
from forgetbench.results import load_results

REPORT_FILE = "report.html"
EXAMPLES_PER_METHOD = 3

_SUBSCORE_KEYS = [f"{s}/{m}" for s, _ in plots.SETS for m, _ in plots.SUBSCORES]

_LEADERBOARD_RULE = (
    "Each unlearning method is shown at one step per split, chosen by the matched-utility rule: "
    f"among the steps whose model utility is at least {tables.UTILITY_RATIO:g} × the finetuned "
    "model's utility on that split, the step with the highest forget quality. When no step keeps "
    "that much utility, the row shows the step with the highest utility and is flagged with *. "
    "Rows are sorted by forget quality, highest first."
)

_LUME_MMLU_RULE = (
    "LUME's final score is the mean of the task aggregate, the MIA score and MMLU accuracy. "
    f"SemEval-2025 Task 4 only ranked 7B submissions whose MMLU stayed above {MMLU_THRESHOLD:g} "
    "(75% of the model before unlearning); these models fall below it."
)

_CAPTIONS = {
    "fq-plane": (
        "Each line is one method's unlearning run: it starts at the finetuned model (black star) "
        "and follows the evaluated steps; the arrow points at the last one. Higher is better "
        "forgetting: forget quality is the p-value of a KS test between this model's and the retain "
        "model's forget-set truth ratios (log scale; below 0.05 the two can be told apart). Further "
        "right is more model utility. The grey diamond is the retain model, the target; the dotted "
        f"line is {tables.UTILITY_RATIO:g} × the finetuned utility, the leaderboard's bar. A good "
        "method climbs toward the diamond without moving left of the dotted line."
    ),
    "subscores": (
        "Rows: ROUGE-L recall of the generated answer, probability of the correct answer, truth "
        "ratio. Columns: the forget set, the retain set, real authors, world facts. The x axis is "
        "the unlearning step (step 0 is the finetuned model); the dashed grey line is the retain "
        "model. On Forget the curves should fall to the dashed line and stop there; on the other "
        "three columns they should stay flat. Curves that fall everywhere mean the model is being "
        "broken rather than made to forget."
    ),
    "formats": (
        "Each axis is one format of the same facts (multiple choice, cloze, analogies, odd one out, "
        "comprehension); the radius is the score, 0 at the centre. Left: the forget set; right: the "
        "retain set. Dashed black is the finetuned model, dotted grey the retain model, coloured "
        "polygons each method's final step. Forgetting that only holds for the question format it "
        "was trained on shows as a forget polygon that shrinks on some axes but not others; a good "
        "method's forget polygon matches the retain model's on every axis while its retain polygon "
        "stays close to the finetuned one."
    ),
    "mia": (
        "Membership-inference AUC of each attack (how well it tells forget-set examples from unseen "
        "ones) and model utility against the unlearning epoch (0 is the finetuned model). 0.5 "
        "(dotted) is chance. The target is the retain model's AUC (dashed grey), not the lowest "
        "value: an AUC far below it means the forgotten examples now look suspiciously unlike "
        "anything the model saw, which itself leaks membership. Utility should stay high meanwhile."
    ),
}
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
        plots.format_spider,
        (("formats/",),),
        "formats/<format>/<side> scores",
    ),
    "mia": (
        "Membership inference and utility per epoch",
        plots.mia_curves,
        (("mia/",),),
        "mia/<attack> AUCs",
    ),
}

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222;
  background: #fafafa; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 1.5rem 2rem 4rem; background: #fff; }
h1 { margin-bottom: .2rem; } h2 { border-bottom: 1px solid #ddd; margin-top: 2.5rem; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .3rem .6rem; vertical-align: top; text-align: left; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.flagged td { background: #fff6e0; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; }
figure.plot { margin: 1.5rem 0; } figure.plot svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .9rem; color: #444; max-width: 60rem; margin-top: .4rem; }
.examples td { white-space: pre-wrap; max-width: 22rem; }
pre.config { background: #f6f6f6; padding: 1rem; overflow-x: auto; font-size: .85rem; }
ul.notes { color: #8a5a00; }
"""


def build_report(results_dir: Path) -> Path:
    """Write `results_dir/report.html` from `results_dir/results.json` (atomically) and return it."""
    results = load_results(Path(results_dir))
    return atomic_write_text(Path(results_dir) / REPORT_FILE, render_html(results.model_dump()))


def render_html(results: Mapping[str, Any]) -> str:
    """The whole page for results already checked by `forgetbench.results.Results`."""
    rows = results["rows"]
    figures, notes = _figures(rows)
    title = (
        f"forgetbench report — {results.get('benchmark') or '?'} · {results.get('model') or '?'}"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>",
        _header(results),
        _notes(notes),
        _lume_mmlu(rows),
        _leaderboard(rows),
        '<section id="plots"><h2>Plots</h2>',
        *figures,
        "</section>",
        _examples(results["examples"]),
        _config(results),
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _figures(rows: Sequence[tables.Row]) -> tuple[list[str], list[str]]:
    """Every plot as a <figure>, and a note for each plot left out for lack of data."""
    figures: list[str] = []
    notes: list[str] = []
    used: set[str] = set()
    for kind, (title, draw, needs, missing) in _PLOTS.items():
        drawable = [s for s in tables.splits(rows) if all(_has(rows, s, keys) for keys in needs)]
        if not drawable:
            notes.append(f"{title}: omitted, results.json has no {missing}.")
            continue
        figures.append(f"<h3>{_e(title)}</h3>")
        for split in tables.splits(rows):
            if split not in drawable:
                notes.append(f"{title} on {split}: omitted, results.json has no {missing} for it.")
                continue
            figure_id = _unique(f"{kind}-{plots.slug(split)}", used)
            figures.append(
                f'<figure class="plot" id="{_e(figure_id)}">\n{draw(rows, split)}\n'
                f"<figcaption><b>{_e(split)}.</b> {_e(_CAPTIONS[kind])}</figcaption></figure>"
            )
    return figures, notes


def _has(rows: Sequence[tables.Row], split: str, keys: Sequence[str]) -> bool:
    """Whether a row of `split` has a value for one of `keys` (a key ending in '/' is a prefix)."""
    return any(
        r["split"] == split
        and any(k == key or (key.endswith("/") and k.startswith(key)) for key in keys)
        and tables.number(r, k) is not None
        for r in rows
        for k in r
    )


def _header(results: Mapping[str, Any]) -> str:
    fields = [("benchmark", "benchmark"), ("scale", "scale"), ("model", "model"), ("seed", "seed")]
    fields += [("forgetbench version", "forgetbench_version"), ("git sha", "git_sha")]
    fields += [("created", "created")]
    meta = "".join(f"<dt>{_e(k)}</dt><dd>{_e(_show(results.get(v)))}</dd>" for k, v in fields)
    timings = results.get("timings") or {}
    # `total` is the run's wall time; older results without it get the sum of the stages.
    stages = {k: v for k, v in timings.items() if k != "total"}
    body = [_row([k, _seconds(v)], text=1) for k, v in stages.items()]
    total = tables.as_number(timings.get("total"))
    if total is None:
        total = sum(n for v in stages.values() if (n := tables.as_number(v)) is not None)
    body.append(_row(["total", _seconds(total)], text=1, tag="th"))
    table = _table("timings", ["stage", "time"], body) if timings else ""
    return f'<header><h1>forgetbench report</h1><dl class="meta">{meta}</dl>{table}</header>'


def _notes(notes: Sequence[str]) -> str:
    items = "".join(f"<li>{_e(n)}</li>" for n in notes)
    heading = "<h2>What is missing</h2>"
    return f'<section id="notes">{heading}<ul class="notes">{items}</ul></section>' if notes else ""


def _lume_mmlu(rows: Sequence[tables.Row]) -> str:
    """The models whose LUME final score rests on an MMLU accuracy below SemEval-2025's bar."""
    notes = tables.lume_mmlu_notes(rows)
    if not notes:
        return ""
    items = "".join(f"<li>{_e(n)}</li>" for n in notes)
    return (
        f'<section id="lume-mmlu"><h2>LUME: MMLU below {_e(f"{MMLU_THRESHOLD:g}")}</h2>'
        f'<p>{_e(_LUME_MMLU_RULE)}</p><ul class="notes">{items}</ul></section>'
    )


def _leaderboard(rows: Sequence[tables.Row]) -> str:
    board = tables.leaderboard(rows)
    columns = tables.leaderboard_columns(board)
    body = []
    for entry in board:
        cells = [tables.format_cell(entry[key]) for key, _ in columns]
        flag = "" if entry["matched"] else f' class="flagged" title="{_e(entry["note"])}"'
        cells[0] += "" if entry["matched"] else " *"
        body.append(_row(cells, text=2, attrs=flag))
    table = _table("leaderboard", [t for _, t in columns], body) if board else ""
    notes = "".join(f"<li>* {_e(n)}</li>" for n in sorted({e["note"] for e in board} - {""}))
    return (
        f'<section id="leaderboard"><h2>Leaderboard</h2><p>{_e(_LEADERBOARD_RULE)}</p>'
        f"{table or '<p>No unlearning method in the results.</p>'}"
        f"{f'<ul class=notes>{notes}</ul>' if notes else ''}{_references(rows)}</section>"
    )


def _references(rows: Sequence[tables.Row]) -> str:
    keys = [("forget_quality", "forget quality"), ("model_utility", "model utility")]
    keys += [("forget/rougeL", "forget ROUGE-L"), ("retain/rougeL", "retain ROUGE-L")]
    optional = (("privleak", "PrivLeak"), ("lume/final", "LUME final"))
    keys += [(k, t) for k, t in optional if tables.has_key(rows, k)]
    body = [
        _row(
            [r["method"], r["split"], *(tables.format_cell(tables.number(r, k)) for k, _ in keys)],
            text=2,
        )
        for s in tables.splits(rows)
        for m in tables.REFERENCE_METHODS
        if (r := tables.reference(rows, s, m))
    ]
    head = ["model", "split", *(t for _, t in keys)]
    return f"<h3>Reference models</h3>{_table('references', head, body)}" if body else ""


def _examples(examples: Sequence[Mapping[str, Any]]) -> str:
    """A few generations per method at its last logged step, beside the finetuned model's answer."""
    parts = ['<section id="examples"><h2>Example generations</h2>']
    if not examples:
        return parts[0] + "<p>results.json has no examples.</p></section>"
    parts.append(
        "<p>Answers to forget-set questions before unlearning (the finetuned model) and after it "
        "(each method at its last logged step).</p>"
    )
    before: dict[tuple[Any, Any], Any] = {}
    for e in examples:
        if e.get("method") == "finetuned":
            before.setdefault((e.get("split"), e.get("question")), e.get("generation"))
    methods = [(e.get("split"), e.get("method")) for e in examples]
    for split, method in dict.fromkeys(methods):
        if method in tables.REFERENCE_METHODS:
            continue
        own = [e for e in examples if e.get("split") == split and e.get("method") == method]
        last = max(int(tables.number(e, "step") or 0) for e in own)
        shown = [e for e in own if int(tables.number(e, "step") or 0) == last]
        body = [
            _row(
                [
                    e.get("question"),
                    e.get("ground_truth"),
                    before.get((split, e.get("question"))),
                    e.get("generation"),
                ]
            )
            for e in shown[:EXAMPLES_PER_METHOD]
        ]
        parts.append(f"<h3>{_e(_show(method))} on {_e(_show(split))}, step {last}</h3>")
        parts.append(
            _table("examples", ["question", "ground truth", "before (finetuned)", "after"], body)
        )
    return "\n".join(parts) + "</section>"


def _config(results: Mapping[str, Any]) -> str:
    versions = results.get("metric_versions") or {}
    body = [_row([k, v], text=1) for k, v in versions.items()]
    table = f"<h3>Metric versions</h3>{_table('versions', ['metric', 'version'], body)}"
    config = json.dumps(results.get("config"), indent=2, sort_keys=True, ensure_ascii=False)
    return (
        f'<section id="config"><h2>Configuration</h2>{table if body else ""}'
        f'<h3>Resolved config</h3><pre class="config">{_e(config)}</pre></section>'
    )


def _table(name: str, head: Sequence[str], body: Sequence[str]) -> str:
    header = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f'<table class="{name}"><tr>{header}</tr>{"".join(body)}</table>'


def _row(cells: Sequence[Any], *, text: int | None = None, tag: str = "td", attrs: str = "") -> str:
    """One escaped table row; the cells after the first `text` ones are numbers (right-aligned)."""
    text = len(cells) if text is None else text
    out = "".join(
        f"<{tag}{'' if i < text else ' class=num'}>{_e(_show(c))}</{tag}>"
        for i, c in enumerate(cells)
    )
    return f"<tr{attrs}>{out}</tr>"


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}-{n}"
    used.add(candidate)
    return candidate


def _seconds(value: Any) -> str:
    number = tables.as_number(value)
    if number is None:
        return "—"
    minutes, seconds = divmod(number, 60)
    return f"{int(minutes)} min {seconds:04.1f} s" if minutes else f"{seconds:.1f} s"


def _show(value: Any) -> str:
    return "—" if value is None else str(value)


def _e(text: str) -> str:
    return html.escape(text, quote=True)
