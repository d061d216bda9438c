"""`forgetbench bench study`: the study's timings turned into stages, jobs and shares (the study
itself is monkeypatched here; the real figures are in docs/speed.md, measured by the command)."""

import json

import pytest

from forgetbench.cli import main

TIMINGS = {
    "data": 0.5, "pretrain": 20.0, "finetune": 30.0, "retain_forget10": 25.0,
    "eval_forget10_retain": 5.0, "eval_forget10_finetuned": 5.0, "unlearn_forget10_npo": 5.0,
    "eval_forget10_npo": 10.0, "scoring_seconds": 8.0, "generation_seconds": 10.0, "total": 70.0,
    "shadow_forget10_0": 12.0, "shadow_forget10_1": 13.0, "eval_forget10_shadow-0": 1.0,
    "eval_forget10_shadow-1": 1.0, "attack_forget10_npo": 4.0, "attack_forget10_retain": 3.0,
}  # fmt: skip


@pytest.fixture
def fake_study(monkeypatch):
    seen = {}

    def run_study(config, *, out, progress):
        import os

        seen["cache"] = os.environ.get("FORGETBENCH_CACHE")
        seen["splits"] = config.study.splits
        return {"timings": TIMINGS, "workers": 2}

    monkeypatch.setattr("forgetbench.study.run.run_study", run_study)
    return seen


def test_bench_study_reports_stages_jobs_and_shares(fake_study, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FORGETBENCH_CACHE", str(tmp_path / "cache"))
    argv = ["bench", "study", "study.splits=[forget10]", "--scale", "tiny"]
    assert main([*argv, "--out", str(tmp_path / "b"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # Cold: the shared cache is off while the study runs, and back as it was after.
    assert fake_study == {"cache": "off", "splits": ["forget10"]}
    assert str(tmp_path / "cache") == __import__("os").environ["FORGETBENCH_CACHE"]
    assert [r["stage"] for r in report["stages"]] == [
        "data", "pretrain", "finetune", "retain_forget10", "shadow_forget10_0", "shadow_forget10_1"
    ]  # fmt: skip
    assert len(report["jobs"]) == 8 and report["wall_seconds"] == 70.0
    # work = training (20 + 30 + 25 + 12 + 13 + 5) + evaluation (5 + 5 + 10 + 1 + 1)
    # + attacks (4 + 3) = 105 + 22 + 7 = 134 process-seconds; other = 22 - 8 - 10
    assert report["process_seconds"] == {
        "training": 105.0, "evaluation": 22.0, "scoring": 8.0, "generation": 10.0, "attacks": 7.0
    }  # fmt: skip
    assert report["shares"] == {
        "training": round(105 / 134, 3), "scoring": round(8 / 134, 3),
        "generation": round(10 / 134, 3), "attacks": round(7 / 134, 3), "other": round(4 / 134, 3),
    }  # fmt: skip


def test_bench_study_needs_an_empty_folder(fake_study, tmp_path, capsys):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text("{}")
    assert main(["bench", "study", "--out", str(tmp_path / "b")]) == 2
    assert "is not empty" in capsys.readouterr().err
