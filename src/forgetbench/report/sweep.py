"""The sweep report (sweep.html, written by `forgetbench sweep`): for each method, every trial's
forget quality against its model utility on the selection split, the selected trial marked, and
a table of the trials' settings and scores. One self-contained page from sweep.json alone, drawn
with the run report's plot helpers (deterministic inline SVG)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jinja2
from markupsafe import Markup

from forgetbench.report.figure import _new_figure, _style, _svg, _text
from forgetbench.report.tables import format_cell
from forgetbench.report.validity import verdict
from forgetbench.rows import UTILITY_RATIO, number
from forgetbench.validity import problems, ranks

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>forgetbench sweep</title>
<style>body{font-family:sans-serif;max-width:70em;margin:auto}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}
td.num{text-align:right}tr.selected{font-weight:bold;background:#eef}</style></head><body>
<h1>forgetbench sweep</h1>
<p class="validity" style="border-left:6px solid {{ 'darkred' if not ranked else 'green' }};padding-left:.6em"><b>{{ verdict }}</b>
{% for check in problems %}<br>{{ check.status | upper }}: {{ check.finding }}{% if check.meaning %}; {{ check.meaning }}{% endif %}{% if check.todo %}; what to do: {{ check.todo }}{% endif %}.{% endfor %}
{% if not ranked %}<br>The selection below is not a choice between methods' settings: every trial starts where the retain model is.{% endif %}</p>
<p>{{ search }} search, {{ trials }} trials, seeds {{ seeds }}, selected on {{ select }} (the
preset selected.yaml reports on {{ report }}). A trial's point is its step chosen by the
leaderboard's matched-utility rule (the highest forget quality among steps keeping at least
{{ ratio }} x the finetuned model's utility), each score the mean over seeds (forget quality: the
geometric mean); the selected trial is the one the same rule picks among every step of every trial
of the method.</p>
{% for method in methods %}
<section><h2>{{ method.name }}</h2>
<figure>{{ method.svg }}<figcaption>{{ method.name }} on {{ select }}: each dot is one trial (its
number beside it), the star the selected trial; forget quality (KS p-value against the retain
model, log scale) on the y axis, higher is better forgetting; model utility on the x axis. The
dotted line is {{ ratio }} x the finetuned model's utility: points left of it do not keep the
utility the rule asks for. The black square is the finetuned model, the grey diamond the retain
model.</figcaption></figure>
<table><tr><th>trial</th><th>settings</th><th>step</th><th>forget quality</th>
<th>model utility</th><th>matched</th></tr>
{% for t in method.trials %}
<tr{% if t.selected %} class="selected"{% endif %}><td>{{ t.trial }}{% if t.selected %}
(selected){% endif %}</td><td>{{ t.settings }}</td><td class="num">{{ t.step }}</td>
<td class="num">{{ t.fq }}</td><td class="num">{{ t.utility }}</td><td>{{ t.matched }}</td></tr>
{% endfor %}
</table></section>
{% endfor %}
</body></html>
"""


def render_sweep(result: Mapping[str, Any]) -> str:
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    references = result["references"]
    finetuned = references.get("finetuned")
    utility = number(finetuned, "model_utility") if finetuned else None
    methods = []
    for name, pick in result["selected"].items():
        trials = [t for t in result["trials"] if t["method"] == name]
        rows = [
            {
                "trial": t["trial"],
                "selected": t["trial"] == pick["trial"],
                "settings": json.dumps(t["settings"]),
                "step": t["chosen"]["step"],
                "fq": format_cell(t["chosen"]["forget_quality"]),
                "utility": format_cell(t["chosen"]["model_utility"]),
                "matched": "yes" if t["chosen"]["matched"] else "no",
            }
            for t in trials
        ]
        svg = Markup(sweep_plane(name, trials, pick["trial"], references, utility))
        methods.append({"name": name, "svg": svg, "trials": rows})
    return environment.from_string(_PAGE).render(
        search=result["search"],
        trials=len(result["trials"]),
        seeds=result["seeds"],
        select=result["select_split"],
        report=result["report_split"],
        ratio=f"{UTILITY_RATIO:g}",
        methods=methods,
        verdict=verdict(result.get("validity")),
        problems=problems(result.get("validity")),
        ranked=ranks(result.get("validity")),
    )


def sweep_plane(
    method: str,
    trials: list[Mapping[str, Any]],
    selected: int,
    references: Mapping[str, Any],
    finetuned_utility: float | None,
) -> str:
    """Forget quality (log y) against model utility (x): one point per trial, the selected one a
    star."""
    with _style():
        fig = _new_figure(6.0, 4.2)
        ax = fig.add_subplot()
        ax.set_yscale("log")
        for trial in trials:
            u = trial["chosen"]["model_utility"]
            q = trial["chosen"]["forget_quality"]
            if u is None or q is None or q <= 0:
                continue
            star = trial["trial"] == selected
            ax.plot(
                [u], [q], linestyle="none", marker="*" if star else "o",
                markersize=14 if star else 6, color="#d62728" if star else "#1f77b4",
                label="selected" if star else None, zorder=4 if star else 3,
            )  # fmt: skip
            ax.annotate(str(trial["trial"]), (u, q), textcoords="offset points", xytext=(5, 4))
        for role, style in (("finetuned", ("s", "black")), ("retain", ("D", "#888888"))):
            row = references.get(role)
            u, q = (number(row, "model_utility"), number(row, "forget_quality")) if row else (0, 0)
            if u is not None and q is not None and q > 0:
                ax.plot([u], [q], linestyle="none", marker=style[0], color=style[1], label=role)
        if finetuned_utility is not None:
            ax.axvline(UTILITY_RATIO * finetuned_utility, color="#999999", linestyle=":")
        ax.set_xlabel("Model utility")
        ax.set_ylabel("Forget quality (KS p-value, log scale)")
        ax.set_title(_text(f"Sweep trials — {method}"))
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="best")
        return _svg(fig, f"sweep-{method}")
