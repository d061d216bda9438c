"""report.html from a results folder: every plot, escaped strings, byte-identical rebuilds, a
template and stylesheet that ship with the package, and a clear error for a missing results.json
(a malformed one: tests/test_results.py)."""

from __future__ import annotations

import copy
import html
import re
import tomllib
from fnmatch import fnmatch
from importlib.resources import files
from pathlib import Path

import markupsafe
import pytest
from synthetic import HOSTILE_QUESTION, SPLITS, figure_ids, synthetic_results, write_results

from forgetbench.errors import DataError
from forgetbench.report.html import build_report

TEMPLATES = files("forgetbench.report") / "templates"


def test_every_plot_is_a_figure(built_report: Path):
    page = built_report.read_text(encoding="utf-8")
    found = re.findall(r'<figure class="plot" id="([^"]+)">\s*<svg', page)
    assert found == figure_ids()
    assert page.count("<figcaption>") == len(found)


def test_dataset_strings_are_escaped(built_report: Path):
    page = built_report.read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert html.escape(HOSTILE_QUESTION) in page
    assert "Who wrote &lt;script&gt;alert(1)&lt;/script&gt; &amp; what else?" in page
    assert "Answer 0 &lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page
    assert "tiny-llama &lt;test&gt;" in page  # the model name in the header and <title>
    assert "&lt;/pre&gt;&lt;script&gt;x&lt;/script&gt;" in page  # a config value


def test_page_is_self_contained_with_unique_ids(built_report: Path):
    page = built_report.read_text(encoding="utf-8")
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}  # XML namespaces
    # No <image> either: matplotlib writes an imshow or a long colour bar as an embedded PNG.
    assert not re.search(r"<(link|img|image|iframe|object)\b|\bsrc=", page)
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)), "inline SVGs must not share element ids"
    assert (TEMPLATES / "report.css").read_text(encoding="utf-8") in page  # inlined, not linked


def test_every_template_file_ships_with_the_package():
    # The template and stylesheet are read at run time; a file pyproject's package-data does not
    # name would be missing from a wheel install while every test here still passed.
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["forgetbench.report"]
    names = [f"templates/{f.name}" for f in TEMPLATES.iterdir()]
    assert "templates/report.html.j2" in names and "templates/report.css" in names
    assert all(any(fnmatch(name, p) for p in patterns) for name in names), (names, patterns)


def test_names_from_the_results_are_escaped_everywhere(tmp_path: Path):
    # Split, method, stage and metric names reach headings, table cells, the leaderboard and the
    # config section. No plot key is left, so nothing is drawn (plots: the LUME test below).
    split, method = 'f10"><script>alert(1)</script>', "npo<img src=x onerror=alert(2)>"
    stage, metric = "<b>stage</b>", "<i>metric</i>"
    results = _without(synthetic_results(), ("forget", "retain/", "real_", "world_", "formats/"))
    results = _without(results, ("mia/", "model_utility", "attack/", "probes/"))
    for item in (*results["rows"], *results["examples"]):
        item["split"] = split if item["split"] == "forget10" else item["split"]
        item["method"] = method if item["method"] == "npo" else item["method"]
    results["timings"] = {stage: 1.0}
    results["metric_versions"] = {metric: 1}
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert "<figure" not in page and "<script" not in page and "<img" not in page
    assert "<b>stage" not in page and "<i>metric" not in page
    escaped = {n: str(markupsafe.escape(n)) for n in (split, method, stage, metric)}
    assert f"<h3>{escaped[split]}</h3>" in page  # the examples' heading
    # an example's model, labelled with the step it answered at
    assert re.search(
        rf'<tr><td>{re.escape(escaped[method])} \([^)<]+\)</td><td class="num">15</td>', page
    )
    # the leaderboard (its PrivLeak above +50 marks it over-unlearnt too)
    assert f"<td>{escaped[method]} * !</td><td>{escaped[split]}</td>" in page
    assert f"<td>{escaped[stage]}</td>" in page and f"<td>{escaped[metric]}</td>" in page


def test_header_leaderboard_and_sections(built_report: Path):
    page = built_report.read_text(encoding="utf-8")
    for text in ("mini", "tiny", "abc123", "0.1.0", "1 min 15.2 s", "0.9 × the finetuned"):
        assert text in page
    sections = re.findall(r'<section id="([^"]+)"', page)
    assert sections == ["validity", "leaderboard", "fq-plane", "subscores", "findings", "mia", "robustness",
                        "generalisation", "formats", "examples", "config", "timings"]  # fmt: skip
    # The table of contents links every section, in the page's order.
    toc = page[page.index('<nav class="toc">') : page.index("</nav>")]
    assert re.findall(r'<a href="#([^"]+)">', toc) == sections
    assert page.count("I don&#39;t know (npo)") == len(SPLITS) * 3  # 3 questions per split


def test_rebuild_is_byte_identical(
    built_report: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The plots: each kind drawn again, for one split, gives the bytes the page built earlier in
    # the session holds.
    from forgetbench.report import html as report_html
    from forgetbench.results import load_results

    page = built_report.read_text(encoding="utf-8")
    results = load_results(write_results(tmp_path / "rows", synthetic_results()))
    rows = [row.model_dump() for row in results.rows]  # as render_html hands them to the plots
    drawn = [fid for fid in figure_ids() if fid.endswith("-forget10")]
    assert len(drawn) == len(report_html._PLOTS)
    for figure_id in drawn:
        start = page.index("<svg", page.index(f'<figure class="plot" id="{figure_id}">'))
        svg = page[start : page.index("</svg>", start) + len("</svg>")]
        draw = report_html._PLOTS[figure_id.removesuffix("-forget10")][1]
        assert draw(rows, "forget10").strip() == svg, figure_id
    # The page around them, its plots undrawn (`_undraw`): built twice, the same bytes, and
    # nothing written beside report.html.
    _undraw(monkeypatch)
    first, again = (
        build_report(write_results(tmp_path / name, synthetic_results()))
        for name in ("first", "elsewhere")
    )
    assert again.read_bytes() == first.read_bytes()
    assert sorted(p.name for p in again.parent.iterdir()) == ["report.html", "results.json"]


def _undraw(monkeypatch: pytest.MonkeyPatch, drawn: list | None = None) -> None:
    """Each plot drawn as an empty SVG naming its kind and split, for a test about the page's text
    (drawing every plot takes seconds): which plots exist, their ids, captions and notes are still
    the page's own, and every drawing is tested on the full results above (`built_report`,
    `test_rebuild_is_byte_identical`). `drawn` collects each call's (kind, split, rows)."""
    from forgetbench.report import html as report_html

    def stub(kind: str):
        def draw(rows, split):
            if drawn is not None:
                drawn.append((kind, split, rows))
            return f'<svg data-kind="{kind}" data-split="{split}"></svg>'

        return draw

    plots = {k: (title, stub(k), *rest) for k, (title, _, *rest) in report_html._PLOTS.items()}
    monkeypatch.setattr(report_html, "_PLOTS", plots)


@pytest.fixture
def undrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    _undraw(monkeypatch)


def _without(results: dict, prefixes: tuple[str, ...]) -> dict:
    results = copy.deepcopy(results)
    results["rows"] = [
        {k: v for k, v in row.items() if not k.startswith(prefixes)} for row in results["rows"]
    ]
    return results


def test_missing_optional_keys_omit_plots_with_a_note(tmp_path: Path):
    results = _without(
        synthetic_results(),
        ("formats/", "mia/", "lume/", "privleak", "forget_quality", "attack/", "probes/"),
    )
    for key in ("examples", "timings", "config", "metric_versions", "git_sha", "scale"):
        del results[key]
    results["rows"] = [r for r in results["rows"] if r["split"] == "forget10"]
    results["rows"][4]["model_utility"] = None  # nulls anywhere are allowed
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert re.findall(r'<figure class="plot" id="([^"]+)"', page) == ["subscores-forget10"]
    assert "Scores per format: omitted" in page and "mia/&lt;attack&gt; AUCs" in page
    assert "PrivLeak" not in page and "results.json has no examples" in page


def test_a_split_without_data_gets_a_note(tmp_path: Path, undrawn: None):
    results = _without(synthetic_results(), ("forget", "retain/", "real_", "world_", "mia/"))
    for row in results["rows"]:
        if row["split"] == "forget01":
            row.update(dict.fromkeys([k for k in row if k.startswith("formats/")]))
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert 'id="formats-forget10"' in page and 'id="formats-forget01"' not in page
    assert "Scores per format on forget01: omitted" in page


def test_only_reference_rows(tmp_path: Path):
    results = synthetic_results()
    results = _without(results, ("retain/", "real_", "world_", "formats/", "mia/"))
    results["rows"] = [r for r in results["rows"] if r["method"] in ("finetuned", "retain")]
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert "No unlearning method in the results." in page and 'id="fq-plane-forget01"' in page
    # The reference rows head the leaderboard table, in its columns.
    board = page[page.index('<table class="leaderboard">') :]
    board = board[: board.index("</table>")]
    assert re.findall(
        r'<tr class="reference"><td></td><td>([^<]+)</td><td>([^<]+)</td>', board
    ) == [(m, s) for s in SPLITS for m in ("finetuned", "retain")]


def test_missing_results_json_raises_data_error(tmp_path: Path):
    with pytest.raises(DataError) as caught:
        build_report(tmp_path)
    assert str(tmp_path / "results.json") in caught.value.what
    assert "forgetbench run" in caught.value.hint
    assert not (tmp_path / "report.html").exists()


@pytest.fixture(scope="module")
def varied_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The synthetic results with three changes no figure draws, in one report with its plots
    undrawn (`_undraw`): a cached rerun's timings, passed validity gates, an invalid-UTF-8 generation.
    Each test below reads its own part of the page."""
    from forgetbench.validity import check_validity

    results = synthetic_results()
    # A cached rerun: stages took ~0 s each, the recorded total is the run's wall time.
    results["timings"] = {"pretrain": 0.01, "unlearn": 0.02, "total": 4.5}
    results["validity"] = check_validity(results["rows"])
    example = next(e for e in results["examples"] if e["method"] != "finetuned")
    example["generation"] = "Answer \ufffd\ufffd"
    run = tmp_path_factory.mktemp("varied")
    with pytest.MonkeyPatch.context() as patch:
        _undraw(patch)
        return build_report(write_results(run, results)).read_text(encoding="utf-8")


def test_timings_show_the_runs_own_total_once(varied_page: str):
    page = varied_page
    table = page[page.index('class="timings"') :]
    table = table[: table.index("</table>")]
    assert table.count(">total<") == 1 and "4.5 s" in table


def test_a_model_below_the_semeval_mmlu_bar_is_flagged(tmp_path: Path, undrawn: None):
    results = synthetic_results()
    # Hand-made: npo's last step on forget10 measured MMLU 0.35 (< 0.371), idk's 0.40 (not flagged).
    for row in results["rows"]:
        if row["split"] == "forget10" and row["step"] == 15 and row["method"] in ("npo", "idk"):
            mmlu = 0.35 if row["method"] == "npo" else 0.40
            row.update({"lume/utility": mmlu, "lume/utility_source": "mmlu_lm_eval"})
            row["lume/mmlu_below_threshold"] = mmlu < 0.371
            row["lume/final"] = round((0.5 + 0.8 + mmlu) / 3, 4)
        if row["method"] == "npo":
            row["method"] = "npo <i>x</i>"  # a name from the results: escaped like every other
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert '<section id="lume-mmlu"><h2>LUME: MMLU below 0.371</h2>' in page
    (section,) = re.findall(r'<section id="lume-mmlu">.*?</section>', page, flags=re.S)
    assert section.count("<li>") == 1
    assert "MMLU 0.3500 (measured by lm-eval) of npo &lt;i&gt;x&lt;/i&gt; on forget10, step 15" in (
        section
    )
    assert "<i>x</i>" not in page and "awards leaderboard" in section


def test_no_mmlu_bar_section_without_a_flag(built_report: Path):
    assert 'id="lume-mmlu"' not in built_report.read_text(encoding="utf-8")


def test_the_robustness_section_shows_what_each_attack_recovered(built_report: Path):
    page = built_report.read_text(encoding="utf-8")
    start = page.index('<section id="robustness">')
    section = page[start : page.index("<section", start + 1)]
    # Per split: retain and finetuned first, then each method's final step; cells are knowledge
    # recovered as ROUGE-L / probability (npo is method 1: 0.3 + 0.2 = 0.5 for relearning).
    assert section.count("<h3>") == 2
    rows = re.findall(r"<tr><td>([^<]+)</td>(.*?)</tr>", section)
    assert [name for name, _ in rows[:5]] == ["finetuned", "retain", "grad_ascent", "npo", "idk"]
    npo = re.findall(r'<td class="num">([^<]+)</td>', rows[3][1])
    assert npo[:3] == ["0.200", "0.200", "+0.50 / +0.50"] and npo[-1] == "10"
    finetuned = re.findall(r'<td class="num">([^<]+)</td>', rows[0][1])
    assert finetuned[2] == "—" and finetuned[-1] == "&gt; 25"
    assert "Knowledge recovered on the B half" in section


def test_without_attacks_there_is_no_robustness_section(tmp_path: Path, undrawn: None):
    results = _without(synthetic_results(), ("attack/",))
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert 'id="robustness"' not in page and "Robustness attacks: omitted" in page
    assert 'data-kind="robustness"' not in page and 'data-kind="fq-plane"' in page


def test_membership_table_per_model_with_not_resolvable_cells(built_report: Path):
    page = built_report.read_text(encoding="utf-8")
    section = page[page.index('<section id="mia">') : page.index('<section id="robustness">')]
    # Folded: one table per split and model: 3 reference models + 3 methods at their last step.
    section = section[section.index("<details>") : section.index("</details>")]
    titles = re.findall(r"<h3>([^<]+)</h3>", section)
    assert titles[:4] == [
        "finetuned on forget01",
        "retain on forget01",
        "base on forget01",
        "grad_ascent on forget01, step 15",
    ]
    assert len(titles) == 12
    table = section[section.index("grad_ascent on forget01") :]
    rows = re.findall(r"<tr>(.*?)</tr>", table[: table.index("</table>")], flags=re.S)
    cells = [re.findall(r"<t[dh][^>]*>([^<]*)</t[dh]>", r) for r in rows]
    head = ["attack", "AUC", "TPR @ 1% FPR", "TPR @ 0.1% FPR", "retain AUC", "retain TPR @ 1% FPR"]
    assert cells[0] == head
    assert [c[0] for c in cells[1:]] == [
        "LOSS",
        "zlib",
        "Min-K%",
        "Min-K%++",
        "reference (retain model)",
        "LiRA (online, shadows)",
        "RMIA (online, shadows)",
    ]
    # synthetic: grad_ascent at step 15 has shift 0.3 (LOSS AUC 0.9 - 0.3/2 = 0.75, TPR 0.35),
    # npo 0.32; the retain model 0.3 as well. 150 non-members: 0.1% is n/r, 1% a number.
    assert cells[1][1:] == ["0.7500", "0.3500", "n/r", "0.7500", "0.3500"]
    npo = section[section.index("npo on forget01") :]
    assert re.search(r"<td>LOSS</td><td[^>]*>0.7400</td><td[^>]*>0.3400</td>", npo)
    assert "20 members, 150 non-members." in table


def test_a_seeded_study_shows_intervals_and_draws_the_seed_means(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Two seeds: the synthetic rows, and a copy whose method rows have utility 0.02 lower.
    drawn: list = []
    _undraw(monkeypatch, drawn)
    results = synthetic_results()
    rows = []
    for seed, drop in ((0, 0.0), (1, 0.02)):
        for row in results["rows"]:
            if row["method"] in ("finetuned", "retain", "base"):
                if seed == 0:
                    rows.append(row)
                continue
            rows.append({**row, "seed": seed, "model_utility": row["model_utility"] - drop})
    results["rows"] = rows
    page = build_report(write_results(tmp_path, results)).read_text()
    assert "Over seeds" in page and "10,000 resamples" in page
    # Every figure is still drawn once per split, from the seeds' mean rows: one row per
    # (method, split, step), no seed, utility halfway between the two seeds'.
    assert all(f'id="{fid}"' in page for fid in figure_ids())
    assert sorted((kind, split) for kind, split, _ in drawn) == sorted(
        (fid.rsplit("-", 1)[0], fid.rsplit("-", 1)[1]) for fid in figure_ids()
    )
    unseeded = {(r["method"], r["split"], r["step"]): r for r in synthetic_results()["rows"]}
    for _, _, given in drawn:
        assert sorted((r["method"], r["split"], r["step"]) for r in given) == sorted(unseeded)
        for row in given:
            assert "seed" not in row
            expected = unseeded[row["method"], row["split"], row["step"]]["model_utility"]
            if row["method"] not in ("finetuned", "retain", "base") and expected is not None:
                assert row["model_utility"] == pytest.approx(expected - 0.01, abs=1e-9)
    # Each leaderboard cell of utility carries its interval: the two seeds' values, 0.02 apart.
    board = page[page.index('<table class="leaderboard">') :]
    # The first method's row: past the header and the reference rows.
    first = re.findall(r'<tr(?! class="reference")[^>]*><td class="num">[^<]*</td><td>.*?</tr>',
                       board)[0]  # fmt: skip
    cells = re.findall(r'<td class="num">([^<]*)</td>', first)
    # Rank, then after method and split: step, forget quality, model utility, ...
    mean, low, high = (float(x) for x in re.findall(r"[0-9.]+", cells[3]))
    assert high - low == pytest.approx(0.02, abs=1e-4) and low < mean < high


def test_identical_splits_are_shown_once_and_named(tmp_path: Path, undrawn: None):
    # What a tiny study writes: forget01 holds forget10's questions, so its rows are forget10's
    # under its own name, and same_data says so.
    results = synthetic_results()
    ten = [r for r in results["rows"] if r["split"] == "forget10"]
    results["rows"] = [{**r, "split": s} for s in SPLITS for r in ten]
    examples = [e for e in results["examples"] if e["split"] == "forget10"]
    results["examples"] = [{**e, "split": s} for s in SPLITS for e in examples]
    results["same_data"] = {"forget01": "forget10"}
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    assert re.findall(r'<figure class="plot" id="([^"]+)"', page) == [
        i for i in figure_ids() if i.endswith("forget10")
    ]
    assert "<b>Identical splits:</b> forget01 holds\nthe same questions as forget10" in page
    assert page.count("<figcaption><b>forget10 (= forget01).</b>") == 6
    assert ">forget01<" not in page  # no table cell or heading of its own
    board = page[page.index('<table class="leaderboard">') :]
    assert board[: board.index("</table>")].count("<td>forget10</td>") == 3 + 3  # refs + methods
    assert page.count("I don&#39;t know (npo)") == 3  # each question once, not once per name


def _figcaption(page: str, figure_id: str) -> str:
    start = page.index(f'<figure class="plot" id="{figure_id}">')
    caption = page[page.index("<figcaption>", start) : page.index("</figcaption>", start)]
    return " ".join(caption.split())


def test_a_failed_validity_gate_comes_first_and_nothing_is_ranked_or_judged(
    tmp_path: Path, undrawn: None
):
    from forgetbench.validity import check_validity

    results = synthetic_results()
    for row in results["rows"]:
        if row["method"] == "finetuned":  # a finetuned model no better than the retain model
            row.update({"forget_quality": 0.91, "forget/rougeL": 0.1, "forget/probability": 0.1})
    results["validity"] = check_validity(results["rows"])
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    banner = page[page.index('<section id="validity"') : page.index('<section id="leaderboard"')]
    assert 'class="validity fail"' in banner and "This study cannot rank methods" in banner
    assert "forget10: the finetuned model&#39;s forget quality is 0.91, not below 0.05" in banner
    assert "never learnt the forget set" in banner and "docs/your-model.md" in banner
    # The gates that passed are listed under the failed one.
    assert "<b>PASS</b>: forget10: finetuned model utility 0.6000 &gt; 0" in banner
    assert '<table class="leaderboard invalid">' in page and "Not a ranking." in page
    findings = page[page.index('<section id="findings">') :]
    findings = findings[: findings.index("</section>")]
    assert "Not judged." in findings and '<table class="findings">' not in findings
    # The validity section leads the table of contents, before the leaderboard.
    toc = page[page.index('<nav class="toc">') : page.index("</nav>")]
    assert re.findall(r'<a href="#([^"]+)">', toc)[:2] == ["validity", "leaderboard"]


def test_passed_gates_rank_with_ties_said_and_judge_the_findings(varied_page: str):
    page = varied_page
    assert 'class="validity pass"' in page and "Validity gates: all pass" in page
    assert '<table class="leaderboard">' in page and '<table class="findings">' in page
    assert "share a rank" in page
    # PrivLeak is explained beside the leaderboard and shown to one decimal with its sign.
    assert "0 is the target" in page and "under-unlearning" in page


def test_a_caption_names_only_the_reference_models_its_figure_draws(
    built_report: Path, tmp_path: Path, undrawn: None
):
    results = synthetic_results()
    with_retain = built_report.read_text(encoding="utf-8")
    caption = _figcaption(with_retain, "fq-plane-forget10")
    assert "The grey diamond is the retain model" in caption and "black star" in caption
    assert "ringed" in caption
    for kind in ("subscores", "mia"):
        assert "retain model" in _figcaption(with_retain, f"{kind}-forget10")
    results["rows"] = [r for r in results["rows"] if r["method"] != "retain"]
    page = build_report(write_results(tmp_path, results)).read_text(encoding="utf-8")
    caption = _figcaption(page, "fq-plane-forget10")
    assert "diamond" not in caption and "has no point here" in caption
    assert "dashed grey line" not in _figcaption(page, "subscores-forget10")
    assert "dashed grey" not in _figcaption(page, "mia-forget10")
    assert "grey bar" not in _figcaption(page, "robustness-forget10")


def test_invalid_utf8_in_a_generation_is_said_beside_it(varied_page: str):
    page = varied_page
    assert "2 × � = bytes that are not valid UTF-8" in page
