"""`forgetbench run --scale tiny`: every method, every metric, results folder and report, on the
session's tiny study (its cached models are reused, as a resumed run reuses them)."""

import csv
import json

import pytest

from forgetbench.cli import main
from forgetbench.methods.base import trained_method_names
from golden_results import check_against_golden

pytestmark = [pytest.mark.slow, pytest.mark.study]

TOFU_SUBSCORES = [
    f"{s}/{m}"
    for s in ("forget", "retain", "real_authors", "world_facts")
    for m in ("probability", "rougeL", "truth_ratio")
]
# Two epochs keep the suite fast: two snapshots per method, the second one final.
ARGS = [
    "--scale",
    "tiny",
    "--splits",
    "forget10",
    "unlearn.epochs=2",
    "eval.max_new_tokens=48",
    "eval.lume_max_new_tokens=48",
]
ARGS += ["eval.batch_size=64"]  # fewer generation steps: the tiny model is cheap per row
ARGS += ["attack.relearn_full_rounds=2"]  # every attack runs; the plain relearning one shorter
# One pair of shadow models (every candidate IN one, OUT of the other), the fewest LiRA and RMIA
# take: each tiny shadow is a full retain training (about 28 s of one core).
ARGS += ["eval.mia_shadows=2"]


@pytest.fixture(scope="module")
def study(tiny_study):
    run = tiny_study[0]
    assert main(["run", *ARGS, "--out", str(run), "--json", "--no-progress"]) == 0
    return run


def test_every_method_has_a_trajectory_and_every_metric(study):
    results = json.loads((study / "results.json").read_text())
    rows = results["rows"]
    references = {r["method"] for r in rows if r["step"] == 0}
    assert references == {"retain", "finetuned", "base"}
    for method in trained_method_names():
        steps = sorted(r["step"] for r in rows if r["method"] == method)
        assert len(steps) == 2 and steps[0] > 0, method
        final = next(r for r in rows if r["method"] == method and r["step"] == steps[-1])
        for key in ["forget_quality", "model_utility", "privleak", *TOFU_SUBSCORES]:
            assert final[key] is not None, (method, key)
        assert "formats/mcqa/forget" in final and "lume/task_aggregate" in final
        assert "mia/min_k_plus_plus" in final and "exact_memorisation" in final
        # Row-time attacks (retain model, 2 shadows) and the low-FPR TPRs: holdout10 has 20
        # questions at tiny scale, too few to resolve 1% FPR.
        assert final["mia/lira"] is not None and final["mia/reference"] is not None
        assert final["mia/nonmembers"] == 20 and final["mia/rmia/tpr@1%fpr"] is None
        middle = next(r for r in rows if r["method"] == method and r["step"] == steps[0])
        assert "mia/loss" in middle and "formats/mcqa/forget" not in middle
    retain = next(r for r in rows if r["method"] == "retain")
    finetuned = next(r for r in rows if r["method"] == "finetuned")
    assert retain["forget_quality"] == pytest.approx(1.0)
    assert finetuned["forget_quality"] < 0.05
    ga = max((r for r in rows if r["method"] == "grad_ascent"), key=lambda r: r["step"])
    assert ga["forget/probability"] < finetuned["forget/probability"]
    assert results["examples"] and {"question", "generation", "ground_truth"} <= set(
        results["examples"][0]
    )
    assert results["seed"] == 0 and "total" in results["timings"]
    with (study / "results.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == len(rows)
    html = (study / "report.html").read_text()
    assert 'id="fq-plane-forget10"' in html and 'id="formats-forget10"' in html
    # Every method's final model and both references are attacked; snapshots and base are not.
    attacked = {r["method"] for r in rows if "attack/none/rougeL" in r}
    assert attacked == {*trained_method_names(), "retain", "finetuned"}
    for method in trained_method_names():
        final = max((r for r in rows if r["method"] == method), key=lambda r: r["step"])
        for key in ("relearn/recovered_rougeL", "int4/forget_quality", "incontext/rougeL"):
            assert f"attack/{key}" in final, (method, key)
        assert "attack/relearn_full/budget_steps" in final
    assert 'id="robustness-forget10"' in html and '<section id="robustness">' in html
    assert '<section id="mia">' in html
    shadows = sorted((study / "mia" / "forget10").glob("shadow-*.json"))
    assert [json.loads(f.read_text())["index"] for f in shadows] == [0, 1]
    for row in rows:
        assert (study / row["log"] / "summary.json").is_file()


def test_every_model_is_probed_and_the_finetuned_model_knows_what_the_retain_model_cannot(study):
    # The generalisation probes (docs/generalisation.md): every evaluated model has the three
    # scores of the four kinds, and the world gives the finetuned model a real lead over the
    # retain model on the forget facts asked in other words and asked backwards.
    rows = json.loads((study / "results.json").read_text())["rows"]
    for row in rows:
        for kind in ("paraphrase", "reverse", "two_hop", "shared"):
            for metric in ("probability", "rougeL", "truth_ratio"):
                assert row[f"probes/{kind}/{metric}"] is not None, (row["method"], kind, metric)
    finetuned = next(r for r in rows if r["method"] == "finetuned")
    retain = next(r for r in rows if r["method"] == "retain")
    for kind in ("paraphrase", "reverse"):
        key = f"probes/{kind}/probability"
        assert finetuned[key] > retain[key] + 0.2, (kind, finetuned[key], retain[key])
    # Shared facts are retain authors' own: both reference models know them.
    assert min(finetuned["probes/shared/probability"], retain["probes/shared/probability"]) > 0.5


def test_the_results_carry_the_leaderboard_its_rule_and_every_setting(study):
    results = json.loads((study / "results.json").read_text())
    rows = {(r["method"], r["step"]): r for r in results["rows"]}
    for (method, step), row in rows.items():
        assert method == "base" or row["settings/finetune_lr"] > 0, method
        if step:  # an unlearning run's rows: its loop and method options in force
            assert row["settings/unlearn_preset"] == "mini" and row["settings/unlearn_lr"] > 0
            assert any(k.startswith("settings/method.") for k in row), method
        assert 0 <= row["forget/degenerate"] <= 1
        assert row["forget_quality/held_out_low"] <= row["forget_quality/held_out"]
        assert row["forget_quality/held_out"] <= row["forget_quality/held_out_high"]
    record = results["leaderboard"]
    assert record["selection"] == "halves" and "other half" in record["rule"]
    assert {e["method"] for e in record["entries"]} == set(trained_method_names())
    for entry in record["entries"]:
        row = rows[entry["method"], entry["step"]]
        assert entry["forget_quality"] == row["forget_quality/held_out"]
        assert isinstance(entry["over_unlearning"], list)
    assert [e["method"] for e in record["references"]] == ["finetuned", "retain", "base"]


def test_the_numbers_are_the_golden_ones(study):
    # Every row, sub-score and example generation of the tiny study, to 1e-6: a refactor that
    # should not move results does not.
    comparable, found = check_against_golden(json.loads((study / "results.json").read_text()))
    if not comparable:
        pytest.skip(f"golden numbers are for another build: {found[0]}")
    assert not found, f"{len(found)} values differ from tests/golden: {found[:5]}"


def test_a_finished_study_reruns_from_its_caches_with_the_same_numbers(study, capsys):
    before = json.loads((study / "results.json").read_text())
    summaries = {p: p.stat().st_mtime_ns for p in study.glob("logs/**/summary.json")}
    capsys.readouterr()
    assert main(["run", *ARGS, "--out", str(study), "--json", "--no-progress"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["report"].endswith("report.html")
    after = json.loads((study / "results.json").read_text())
    assert after["rows"] == before["rows"] == printed["rows"]
    # The rerun says which methods it took from the folder rather than retrained: all of them.
    assert sorted(after["reused"]) == sorted(f"{m} (forget10)" for m in trained_method_names())
    # No evaluation ran the second time: every summary is the one written before.
    assert {p: p.stat().st_mtime_ns for p in study.glob("logs/**/summary.json")} == summaries


@pytest.fixture(scope="module")
def alone(study, tmp_path_factory):
    """The fixture's study again in this process alone (study.workers=1), NPO beside the
    references; the copied models are reused, not retrained."""
    import shutil

    tmp_path = tmp_path_factory.mktemp("alone")
    for part in ("data", "models"):
        shutil.copytree(study / part, tmp_path / part)
    # The references' evaluations, shadow scores and attacks are reused (the same code path as
    # NPO's, which this process unlearns, evaluates and attacks again): NPO's rows are the check.
    for part in ("logs/forget10/retain", "logs/forget10/finetuned", "logs/forget10/base",
                 "logs/forget10/shadows", "attacks/forget10/retain", "attacks/forget10/finetuned",
                 "mia"):  # fmt: skip
        shutil.copytree(study / part, tmp_path / part)
    # One method beside the references: the pool's numbers, not every method's, are the point.
    argv = ["run", *ARGS, "--methods", "npo", "study.workers=1", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    return tmp_path


def test_one_process_gives_the_numbers_of_the_worker_pool(study, alone):
    # The fixture's study ran in a pool of one process per core (study.workers=0 on CPU); the
    # same study in this process alone must agree.
    pooled = json.loads((study / "results.json").read_text())
    single = json.loads((alone / "results.json").read_text())
    assert single["workers"] == 1 and pooled["workers"] > 1
    expected = [
        r
        for r in pooled["rows"]
        if r["method"] not in trained_method_names() or r["method"] == "npo"
    ]
    assert [(r["method"], r["step"]) for r in single["rows"]] == [
        (r["method"], r["step"]) for r in expected
    ]
    for got, want in zip(single["rows"], expected, strict=True):
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-4, abs=1e-6), (got["method"], key)


def test_report_rebuilds_from_results_alone(alone):
    # On the one-method study (a report of all seventeen methods takes three times as long to
    # draw), byte for byte the report `run` wrote.
    written = (alone / "report.html").read_bytes()
    (alone / "report.html").unlink()
    assert main(["report", str(alone), "--json"]) == 0
    assert (alone / "report.html").read_bytes() == written
