"""A study of your own model with the retain model given as its evaluation log
(`study.retain_logs`), as README section 3 runs it: the retain model's row, point and lines are in
the results and the report, and the validity gates judge the finetuned model against it. A model
that never learnt the forget set (the pretrained base standing in for a failed finetuning) gets
the banner, no ranking, and with --strict a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forgetbench.cli import main
from forgetbench.metrics.mia_roc import privleak

pytestmark = [pytest.mark.slow]

# Short evaluations: only the TOFU sets and membership inference matter here.
FAST = ["eval.max_new_tokens=32", "eval.batch_size=64", "eval.formats=false", "eval.lume=false"]


@pytest.fixture(scope="module")
def retain_log(tiny_study, tmp_path_factory) -> Path:
    _, data, _, _, retain = tiny_study
    out = tmp_path_factory.mktemp("retain-eval") / "retain90"
    args = ["eval", "--benchmark", "tofu", "--model", str(retain.model_dir),
            "--data", str(data / "tofu"), "--split", "forget10", "--out", str(out), *FAST]  # fmt: skip
    assert main([*args, "--json"]) == 0
    return out


def _run(model: Path, data: Path, log: Path, out: Path, *extra: str, flags: bool = False) -> int:
    """The study of `model` on the TOFU folder with the retain log as study.retain_logs, or
    (`flags`) as run's --retain-log, the folder given without --benchmark."""
    given = (["--retain-log", str(log)] if flags
             else ["--benchmark", "tofu", f"study.retain_logs.forget10={log}"])  # fmt: skip
    return main(["run", "--model", str(model), "--data", str(data / "tofu"), *given,
                 "--splits", "forget10", "--methods", "grad_ascent", "--attacks", "none",
                 "unlearn.epochs=1", *FAST, "--out", str(out), "--no-progress", *extra])  # fmt: skip


def test_the_retain_log_is_a_row_a_point_and_a_line_of_the_report(tiny_study, retain_log, tmp_path):
    _, data, _, finetuned, _ = tiny_study
    assert _run(finetuned.model_dir, data, retain_log, tmp_path, "--json", "--strict") == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert (results["benchmark"], results["model"]) == ("tofu", str(finetuned.model_dir))
    retain = next(r for r in results["rows"] if r["method"] == "retain")
    summary = json.loads((retain_log / "summary.json").read_text())["scores"]
    # Its scores are the ones its evaluation wrote; forget quality against itself is 1.
    assert retain["forget_quality"] == 1.0 and retain["privleak"] == 0.0
    for key in ("model_utility", "forget/rougeL", "mia/min_k", "exact_memorisation"):
        assert retain[key] == summary[key], key
    assert (tmp_path / retain["log"]).resolve() == retain_log.resolve()
    # Every other row's PrivLeak against the retain model's Min-K% AUC from that summary.
    for row in results["rows"]:
        if row["method"] != "retain":
            assert row["privleak"] == pytest.approx(
                privleak(row["mia/min_k"], summary["mia/min_k"])
            )
    assert results["validity"]["valid"], results["validity"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    board = page[page.index('<table class="leaderboard">') :]
    assert '<tr class="reference"><td></td><td>retain</td>' in board[: board.index("</table>")]
    for figure in ("fq-plane-forget10", "mia-forget10"):
        start = page.index(f'id="{figure}"')
        caption = page[page.index("<figcaption>", start) : page.index("</figcaption>", start)]
        assert "retain model" in caption and "not drawn" not in caption, figure
    assert "The grey diamond is the retain model" in page


def test_a_model_that_never_learnt_the_forget_set_is_not_ranked(
    tiny_study, retain_log, tmp_path, capsys
):
    _, data, base, _, _ = tiny_study
    # The pretrained base never saw the authors: as "finetuned" it has nothing to forget.
    # run's --retain-log is study.retain_logs of its one split; a TOFU folder given without
    # --benchmark is recorded as the TOFU benchmark, not the built-in miniature.
    assert _run(base.model_dir, data, retain_log, tmp_path, "--strict", flags=True) == 1
    out = capsys.readouterr().out
    assert out.index("This study cannot rank methods") < out.index("leaderboard withheld")
    assert "Leaderboard at matched utility" not in out
    assert "PASS: forget10: finetuned model utility" in out  # the base still answers Real Authors
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["benchmark"] == "tofu"
    assert "forget10/distinguishable" in results["validity"]["failed"]
    assert any(r["method"] == "retain" for r in results["rows"])
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert '<table class="leaderboard invalid">' in page and "Not judged." in page
