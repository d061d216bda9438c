"""The report's MUSE and WMDP sections and their terminal tables, from hand-made results.json
files (tests/report/muse_wmdp_rows.py): real cells, escaped names, and no empty TOFU leaderboard."""

import re

from muse_wmdp_rows import HOSTILE, muse_results, wmdp_results
from rich.console import Console
from synthetic import write_results

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
    assert _row(page, "grad_ascent", "yes", "yes", "no", "no", "—", "—")
    assert _row(page, "finetuned", "no", "no", "no", "yes", "—", "—")
    assert _row(page, "sustainability", "npo", "37.00", "35.00", "no")
    # Each request's bar beside it: the finetuned model's KnowMem on the retain set.
    assert _row(page, "reference", "finetuned", "40.00", "40.00", "")
    assert _row(page, "scalability", "npo", "15.50", "18.25")  # VerbMem per request
    assert 'class="reference"><td>retain</td>' in page
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
    assert _row(page, "grad_ascent", "yes", "yes", "undecided", "no", "—", "—")
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
