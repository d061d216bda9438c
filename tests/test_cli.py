import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forgetbench.cli import main

LLAMA = "ft_epoch5_lr1e-05_llama2-7b"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compare_json_has_the_documented_keys(capsys, tofu_logs):
    code, out, err = run(
        capsys,
        "compare",
        "--reference",
        str(tofu_logs / f"{LLAMA}_retain90_wd0"),
        "--candidate",
        str(tofu_logs / f"{LLAMA}_full_wd0" / "eval_log_aggregated.json"),
        "--json",
    )
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    subscores = [
        f"{s}/{m}"
        for s in ("forget", "retain", "real_authors", "world_facts")
        for m in ("probability", "rougeL", "truth_ratio")
    ]
    for key in [*subscores, "model_utility", "forget_quality", "retain_ks_pvalue"]:
        assert isinstance(result[key], float), key
    assert result["model_utility"] == pytest.approx(0.6268, abs=5e-5)
    assert result["forget_quality"] < 1e-15


def test_compare_prints_a_table(capsys, tofu_logs):
    code, out, _ = run(
        capsys,
        "compare",
        "--reference",
        str(tofu_logs / f"{LLAMA}_retain90_wd0"),
        "--candidate",
        str(tofu_logs / f"{LLAMA}_retain90_wd0"),
    )
    assert code == 0
    assert "Real Authors" in out and "model_utility" in out and "forget_quality    1" in out


def test_data_stats_lume_json(capsys, shared_data):
    code, out, _ = run(
        capsys,
        "data",
        "stats",
        "--benchmark",
        "lume",
        "--path",
        str(shared_data / "lume"),
        "--json",
    )
    assert code == 0
    rows = json.loads(out.strip().splitlines()[-1])["rows"]
    assert sum(r["count"] for r in rows) == 2732 + 2734


def _broken_files(tmp: Path) -> dict[str, Path]:
    broken = tmp / "broken.json"
    broken.write_text('{"eval_log_forget.json": {"avg_gt_loss": {"0": 1.')
    missing_field = tmp / "missing_field.json"
    missing_field.write_text(json.dumps({"eval_log_forget.json": {"avg_gt_loss": {"0": 1.0}}}))
    return {"broken": broken, "missing_field": missing_field}


@pytest.mark.parametrize(
    ("case", "argv", "message"),
    [
        (
            "missing file",
            ["compare", "--reference", "{tmp}/nope.json", "--candidate", "{tmp}/nope.json"],
            "evaluation log '{tmp}/nope.json' does not exist",
        ),
        (
            "broken json",
            ["compare", "--reference", "{tmp}/broken.json", "--candidate", "{tmp}/broken.json"],
            "{tmp}/broken.json line 1 column",
        ),
        (
            "missing field",
            [
                "compare",
                "--reference",
                "{tmp}/missing_field.json",
                "--candidate",
                "{tmp}/missing_field.json",
            ],
            "missing field 'avg_paraphrased_loss'",
        ),
        (
            "unknown option",
            ["compare", "--reference", "a", "--candidate", "b", "--frobnicate"],
            "unrecognized arguments: --frobnicate",
        ),
        ("unknown method", ["unlearn", "--method", "nop", "--out", "o"], "did you mean 'npo'"),
        (
            "unknown methods",
            ["run", "--methods", "npo,grad_acsent"],
            "unknown method 'grad_acsent'; did you mean 'grad_ascent'",
        ),
        ("unknown scale", ["run", "--scale", "hugee"], "invalid value scale='hugee'"),
        (
            "unknown benchmark",
            ["data", "stats", "--benchmark", "tofuu", "--path", "x"],
            "did you mean 'tofu'",
        ),
        (
            "broken jsonl",
            ["data", "stats", "--benchmark", "lume", "--path", "{tmp}/lume"],
            "forget.jsonl line 2: invalid JSON",
        ),
    ],
)
def test_bad_input_is_one_line_and_nonzero(capsys, tmp_path, case, argv, message):
    _broken_files(tmp_path)
    (tmp_path / "lume").mkdir()
    (tmp_path / "lume" / "forget.jsonl").write_text(
        '{"id": "asc1", "input": "x", "output": "y", "task": "Task1"}\n{"id"'
    )
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run(capsys, *argv, "--json")
    assert code != 0, case
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert message.replace("{tmp}", str(tmp_path)) in lines[0]
    assert "Traceback" not in err
    assert json.loads(out.strip().splitlines()[-1])["error"]


def test_data_without_an_action_says_what_to_do(capsys):
    code, out, err = run(capsys, "data", "--json")
    assert code == 2 and "try 'forgetbench data stats'" in err


def test_config_command_resolves_overrides(capsys):
    code, out, _ = run(capsys, "config", "--method", "npo", "train.lr=2e-5", "--json")
    assert code == 0
    config = json.loads(out.strip().splitlines()[-1])
    assert config["unlearn"]["method"] == "npo" and config["train"]["lr"] == 2e-5


def test_overrides_may_come_before_and_after_options(capsys):
    code, out, _ = run(
        capsys, "config", "train.lr=2e-5", "--method", "npo", "study.workers=1", "--json"
    )
    assert code == 0
    config = json.loads(out.strip().splitlines()[-1])
    assert config["train"]["lr"] == 2e-5 and config["study"]["workers"] == 1
    assert config["unlearn"]["method"] == "npo"
    code, _, err = run(capsys, "config", "train.lr=2e-5", "--method", "npo", "stray")
    assert code == 2 and "unrecognized arguments: stray" in err


def test_the_installed_console_script(tofu_logs):
    # The real entry point, as a user runs it: exit codes and streams survive the process boundary.
    script = Path(sys.executable).with_name("forgetbench")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    ok = subprocess.run(
        [
            str(script),
            "compare",
            "--reference",
            str(tofu_logs / f"{LLAMA}_retain90_wd0"),
            "--candidate",
            str(tofu_logs / f"{LLAMA}_full_wd0"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout.strip().splitlines()[-1])["retain_ks_pvalue"] > 0.9
    bad = subprocess.run(
        [str(script), "run", "--scale", "hugee"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stdout == ""


def test_bench_refuses_unknown_targets_and_used_folders(capsys, tmp_path):
    assert main(["bench", "trian", "--out", str(tmp_path)]) == 2
    assert "unknown benchmark target 'trian'; did you mean 'train'?" in capsys.readouterr().err
    (tmp_path / "models").mkdir()
    assert main(["bench", "train", "--scale", "tiny", "--out", str(tmp_path)]) == 2
    assert "already holds trained stages" in capsys.readouterr().err
