"""The report's findings and meta-evaluation sections, from a results folder."""

from __future__ import annotations

import json
from pathlib import Path

from synthetic import write_results

from forgetbench.report.html import build_report

# Two reference rows and no trajectory: the study's plots are left out, so a build takes a moment.
RESULTS = {
    "rows": [
        {"split": "forget10", "method": m, "step": 0, "forget/rougeL": v, "model_utility": 0.8}
        for m, v in (("finetuned", 0.9), ("retain", 0.3))
    ]
}


def _meta(robustness: float | None = None) -> dict:
    row = {"direction": "higher", "robustness": robustness, "positives": 2, "negatives": 2}
    if robustness is not None:
        row |= {"relearning": 0.75, "quantisation": 0.5, "attacked": ["npo", "idk"]}
    else:
        row["robustness_note"] = "no attacked model reads as having forgotten by this metric"
    return {
        "split": "forget10",
        "scale": "tiny",
        "models": [
            {"pool": p, "label": f"{p}-{i}", "split": s, "seed": i, "epochs": 25, "lr": 0.002}
            for p, s in (("positive", "full"), ("negative", "retain90"))
            for i in range(2)
        ],
        "metrics": [
            {"metric": "forget/rougeL", "faithfulness": 1.0, **row},
            {"metric": "formats/mcqa/forget", "faithfulness": 0.25, **row},
        ],
        "not_judged": {"lume/": "no model is trained on LUME's documents"},
    }


def test_findings_are_always_there_and_the_meta_section_only_with_its_file(tmp_path: Path):
    folder = write_results(tmp_path / "run", RESULTS)
    page = build_report(folder).read_text()
    assert '<section id="findings">' in page
    assert page.count('<td class="verdict">') == 8
    assert "MIA near chance (|AUC - 0.5|) 0.1" in page  # the thresholds are shown
    assert 'id="meta-eval"' not in page

    (folder / "meta_eval.json").write_text(json.dumps(_meta()))
    page = build_report(folder).read_text()
    section = page[page.index('<section id="meta-eval">') : page.index('<section id="examples">')]
    assert "2\npositive models" in section and "2 negative models" in section
    assert "<svg" in section and "Faithfulness (AUC" in section
    assert section.count("no attacked model reads as having forgotten") == 2
    assert "was not measured in this file" in section
    assert "Not judged: lume/*" in section
    assert "Robustness (harmonic mean" not in section  # bars until robustness exists


def test_the_meta_plot_becomes_a_scatter_once_robustness_is_measured(tmp_path: Path):
    folder = write_results(tmp_path / "run", RESULTS)
    (folder / "meta_eval.json").write_text(json.dumps(_meta(robustness=0.8)))
    section = build_report(folder).read_text().split('<section id="meta-eval">')[1]
    assert "Robustness (harmonic mean" in section and "not measured" not in section
    # The table's R, Q and how many attacked models each metric counted.
    assert '<td class="num">0.7500</td><td class="num">0.5000</td><td class="num">2</td>' in section
    assert "faithfulness across, robustness\nup" in section
