"""The report's MUSE and WMDP sections and their terminal tables, from hand-made results.json
files (tests/report/muse_wmdp_rows.py): real cells, escaped names, and no empty TOFU leaderboard."""

import html
import json
import re

from muse_wmdp_rows import HOSTILE, muse_results, wmdp_results
from rich.console import Console
from synthetic import write_results

from forgetbench.config import load_config
from forgetbench.report import corpus_plots
from forgetbench.report.html import build_report
from forgetbench.report.muse_wmdp import print_muse_wmdp


def _row(page: str, *cells: str) -> bool:
    """Whether the page has a table row of exactly these cells (numbers right-aligned)."""
    tds = "".join(f'<td(?: class="num")?>{re.escape(c)}</td>' for c in cells)
    return re.search(rf"<tr(?: class=\"reference\")?>{tds}</tr>", page) is not None


def test_muse_section_numbers_criteria_and_requests(tmp_path):
    page = build_report(write_results(tmp_path, muse_results())).read_text(encoding="utf-8")
    assert 'id="muse"' in page and 'id="wmdp"' not in page
    # The numbers: each model once, npo at its last step, PrivLeak signed.
    assert _row(page, "finetuned", "0", "60.00", "50.00", "-80.0", "40.00", "—")
    assert _row(page, "npo", "10", "15.50", "8.25", "+3.5", "36.50", "no")
    assert not _row(page, "npo", "5", "30.00", "12.00", "-20.0", "39.00", "no")
    # VerbMem 0 against the retain model's 20: "no verbatim memorisation", by destroying the text.
    over = "VerbMem 0.00 &lt; 0.5 x the retain model&#39;s 20.00"
    assert _row(page, "grad_ascent", "10", "0.00", "0.00", "+45.2", "2.00", over)
    # The criteria, in MUSE's order (C5/C6 from the sequence rows, — where they did not run).
    assert _row(page, "npo", "yes", "yes", "yes", "yes", "yes", "no")
    # grad_ascent meets C1 by destroying the text (VerbMem 0 < 0.5 x 20): the cell says so.
    assert _row(page, "grad_ascent", "yes, over-unlearnt", "yes", "no", "no", "—", "—")
    assert _row(page, "finetuned", "no", "no", "no", "yes", "—", "—")
    assert _row(page, "sustainability", "npo", "37.00", "35.00", "no")
    # Each request's bar beside it: the finetuned model's KnowMem on the retain set.
    assert _row(page, "reference", "finetuned", "40.00", "40.00", "")
    assert _row(page, "scalability", "npo", "15.50", "18.25")  # VerbMem per request
    assert 'class="reference"><td>retain</td>' in page
    # Its figures: the scores over the steps and the forget-utility plane, one SVG each.
    for figure in ("muse-curves-1", "muse-plane-1"):
        (svg,) = re.findall(rf'<figure class="plot" id="{figure}">(.*?)</figure>', page, re.S)
        assert svg.count("<svg") == 1, figure
    assert "within ±5 of 0" in page and "0.9 × the finetuned model's" in page
    # No TOFU section drawn empty: no validity gates, leaderboard, findings or missing-plot notes.
    for anchor in ("validity", "leaderboard", "findings", "notes"):
        assert f'id="{anchor}"' not in page, anchor
    assert "forget quality" not in page.lower().split('id="config"')[0]


def test_a_privleak_coarser_than_the_band_leaves_the_verdict_undecided(tmp_path):
    # 4 forget against 4 holdout documents and a retain AUC of 0.5: one pair swapping order
    # moves PrivLeak by 100 / (4 x 4 x 0.5) = 12.5 points, coarser than the +-5 band.
    results = muse_results()
    for row in results["rows"]:
        row.update({"muse/mia/members": 4, "muse/mia/nonmembers": 4})
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert "moves it by 12.5 points" in page and "is undecided for every" in page
    assert _row(page, "npo", "yes", "yes", "undecided", "yes", "yes", "no")
    assert _row(page, "grad_ascent", "yes, over-unlearnt", "yes", "undecided", "no", "—", "—")
    console = Console(record=True, width=200)
    print_muse_wmdp(results["rows"], results["sequence"], console=console)
    assert "PrivLeak on news moves 12.5 points" in console.export_text()
    # With enough documents (20 x 20: 0.5 points a pair) the verdict is decided again.
    for row in results["rows"]:
        row.update({"muse/mia/members": 20, "muse/mia/nonmembers": 20})
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert _row(page, "npo", "yes", "yes", "yes", "yes", "yes", "no")


def test_wmdp_section_table_figure_and_escaping(tmp_path):
    page = build_report(write_results(tmp_path, wmdp_results())).read_text(encoding="utf-8")
    assert 'id="wmdp"' in page and 'id="muse"' not in page and 'id="leaderboard"' not in page
    assert _row(page, "rmu", "20", "0.2500", "0.2500", "0.5000", "0.3333", "0.4600", "+0.0833",
                "yes")  # fmt: skip
    assert _row(page, "finetuned", "0", "0.7500", "0.5000", "0.6250", "0.6250", "0.5000",
                "+0.3750", "yes")  # fmt: skip
    escaped = "&lt;i&gt;evil&lt;/i&gt; &amp; [bold]x[/bold]"
    assert _row(page, escaped, "20", "0.2500", "0.1250", "0.2500", "0.2083", "0.3000", "-0.0417",
                "no")  # fmt: skip
    assert "<i>evil" not in page
    # The figure: one panel per subset and all, chance dotted, and a caption naming it.
    (svg,) = re.findall(r'<figure class="plot" id="wmdp-1">(.*?)</figure>', page, re.S)
    assert svg.count("<svg") == 1 and "random chance (0.25" in svg
    (svg,) = re.findall(r'<figure class="plot" id="wmdp-curves-1">(.*?)</figure>', page, re.S)
    assert svg.count("<svg") == 1 and "<i>evil" not in svg


def test_the_terminal_prints_the_same_tables_with_names_as_text():
    console = Console(record=True, width=200)
    muse, wmdp = muse_results(), wmdp_results()
    print_muse_wmdp(muse["rows"] + wmdp["rows"], muse["sequence"], console=console)
    text = console.export_text()
    assert "MUSE's criteria on news" in text and "WMDP on wmdp (chance 0.25)" in text
    assert re.search(r"npo\s+│\s+10\s+│\s+15\.50\s+│\s+8\.25\s+│\s+\+3\.5\s+│\s+36\.50", text)
    assert re.search(r"sustainability\s+│\s+npo\s+│\s+37\.00\s+│\s+35\.00\s+│\s+no", text)
    assert HOSTILE in text  # rich markup in a name is printed, not applied


def test_a_muse_studys_gates_are_shown_without_tofus_leaderboard(tmp_path):
    gate = {"name": "learnt", "status": "fail", "numbers": {"finetuned": 21.0, "retain": 20.0},
            "finding": "news: finetuned VerbMem 21 vs retain 20 (at least 5 apart needed)",
            "meaning": "the finetuned model did not learn the forget set", "todo": "train longer"}  # fmt: skip
    validity = {"valid": False, "failed": ["news/learnt"],
                "splits": {"news": {"valid": False, "checks": [gate]}}}  # fmt: skip
    page = build_report(write_results(tmp_path, {**muse_results(), "validity": validity}))
    page = page.read_text(encoding="utf-8")
    assert 'id="validity"' in page and 'id="leaderboard"' not in page and 'id="muse"' in page
    assert "finetuned VerbMem 21 vs retain 20 (at least 5 apart needed)" in page
    assert "on the scores that show it learnt the forget set" in page
    assert "forget quality must be below" not in page


def _drawn(monkeypatch) -> dict:
    """The figures `corpus_plots` draws, by name, as matplotlib figures rather than SVG."""
    figures = {}

    def keep(fig, name):
        figures[name] = fig
        return name

    monkeypatch.setattr(corpus_plots, "_svg", keep)
    return figures


def _lines(ax) -> dict:
    return {line.get_label(): list(zip(*line.get_data(), strict=True)) for line in ax.get_lines()}


def test_muse_figures_draw_each_method_from_the_finetuned_model_beside_the_references(
    monkeypatch,
):
    figures = _drawn(monkeypatch)
    rows = muse_results()["rows"]
    assert [kind for kind, _ in corpus_plots.muse_figures(rows, "news")] == ["curves", "plane"]
    verbmem, knowmem_f, knowmem_r = figures["muse-curves-news"].axes[:3]
    assert [ax.get_title() for ax in (verbmem, knowmem_f, knowmem_r)] == [
        "VerbMem forget", "KnowMem forget", "KnowMem retain (utility)"
    ]  # fmt: skip
    drawn = _lines(verbmem)
    # npo from the finetuned model (step 0) through its two snapshots; the references flat.
    assert drawn["npo"] == [(0, 60.0), (5, 30.0), (10, 15.5)]
    assert drawn["grad_ascent"] == [(0, 60.0), (10, 0.0)]
    assert {y for _, y in drawn["finetuned model"]} == {60.0}
    assert {y for _, y in drawn["retain model"]} == {20.0}
    # The plane: KnowMem retain across, the forget score up, one panel per forget score.
    plane = figures["muse-plane-news"].axes
    assert [ax.get_title() for ax in plane] == ["VerbMem forget", "KnowMem forget"]
    assert _lines(plane[1])["npo"] == [(40.0, 50.0), (39.0, 12.0), (36.5, 8.25)]
    assert _lines(plane[0])["retain"] == [(38.0, 20.0)]


def test_wmdp_figures_draw_accuracy_against_mmlu_and_over_the_steps(monkeypatch):
    figures = _drawn(monkeypatch)
    rows = wmdp_results()["rows"]
    subsets = ["bio", "cyber", "chem", "all"]
    assert [k for k, _ in corpus_plots.wmdp_figures(rows, "wmdp", subsets, 0.25)] == [
        "plane", "curves"
    ]  # fmt: skip
    plane = figures["wmdp-wmdp"].axes
    assert [ax.get_title() for ax in plane] == ["WMDP-Bio", "WMDP-Cyber", "WMDP-Chem", "WMDP (all)"]
    assert _lines(plane[0])["rmu"] == [(0.5, 0.75), (0.5, 0.5), (0.46, 0.25)]
    curves = figures["wmdp-curves-wmdp"].axes
    assert [ax.get_title() for ax in curves[:5]][-1] == "MMLU (utility)"
    assert _lines(curves[4])["rmu"] == [(0, 0.5), (10, 0.5), (20, 0.46)]
    assert {y for _, y in _lines(curves[4])["chance"]} == {0.25}


def test_a_document_studys_configuration_holds_only_what_it_read(tmp_path):
    # A results.json written with the whole config (as before a document study cut it): the
    # report shows MUSE's and WMDP's own keys, no TOFU splits, formats, MIA shadows or LUME.
    full = load_config().model_dump()
    common = {"methods", "examples", "retain_logs", "method_settings", "workers"}
    evals = {"batch_size", "max_length", "lm_eval_tasks", "lm_eval_chat_template",
             "lm_eval_include_path"}  # fmt: skip
    for results, study, own in (
        (muse_results(), common | {"requests"}, {"mia_k"}),
        (wmdp_results(), common, set()),
    ):
        folder = write_results(tmp_path / results["benchmark"], {**results, "config": full})
        page = build_report(folder).read_text(encoding="utf-8")
        (shown,) = re.findall(r'<pre class="config">(.*?)</pre>', page, re.S)
        config = json.loads(html.unescape(shown))
        assert set(config) == set(full) - {"attack"}
        assert set(config["study"]) == study and set(config["eval"]) == evals | own
        assert config["benchmark"] == {"name": "mini", "path": None}
        assert config["unlearn"] == full["unlearn"] and config["train"] == full["train"]
        for unread in ("splits", "mia_shadows", "formats", "lume", "relearn_lr", "seeds"):
            assert f'"{unread}"' not in shown, unread
