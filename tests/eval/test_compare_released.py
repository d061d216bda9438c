"""`forgetbench compare --benchmark muse|wmdp`: our results.json beside open-unlearning's
MUSE_EVAL.json / LMEval_SUMMARY.json, written by hand in the layout its evaluators write (numbers
worked out by hand below), and every bad file refused in one line."""

import json
import sys
from pathlib import Path

import pytest

from forgetbench.cli import main

sys.path.insert(0, str(Path(__file__).parents[1] / "report"))
from muse_wmdp_rows import muse_results, wmdp_results  # noqa: E402


def _rouge(values: list[float]) -> dict:
    """open-unlearning's `rouge` metric: the mean rougeL_f1 and the per-index scores."""
    by_index = {str(i): {"rouge1_recall": v, "rougeL_f1": v, "rougeL_recall": v, "input": "Q",
                         "ground_truth": "A", "generation": "A"} for i, v in enumerate(values)}  # fmt: skip
    return {"agg_value": sum(values) / len(values), "value_by_index": by_index}


def muse_eval() -> dict:
    # Min-40% AUC 0.75 (forget more likely than holdout in 3 of 4 pairs); no retain log, so its
    # privleak uses ref_value 0.5: ((1 - 0.75) - (1 - 0.5)) / (1 - 0.5) x 100 = -50.
    scores = {"0": {"score": 1.0}, "1": {"score": 3.0}}
    return {
        "extraction_strength": {"agg_value": 0.125,
                                "value_by_index": {"0": {"score": 0.25}, "1": {"score": 0.0}}},
        "forget_knowmem_ROUGE": _rouge([0.5, 0.25]),  # 0.375 -> 37.5
        "forget_verbmem_ROUGE": _rouge([0.1, 0.3]),  # 0.2 -> 20
        "mia_min_k": {"forget": {"agg_value": 2.0, "value_by_index": scores},
                      "holdout": {"agg_value": 3.0, "value_by_index": scores},
                      "auc": 0.75, "agg_value": 0.75},
        "privleak": {"agg_value": -50.0},
        "retain_knowmem_ROUGE": _rouge([0.75, 0.5]),  # 0.625 -> 62.5
    }  # fmt: skip


def _write(folder: Path, name: str, data: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data, indent=4))
    return folder / name


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_muse_results_and_muse_eval_side_by_side(capsys, tmp_path):
    ours = _write(tmp_path / "study", "results.json", muse_results())
    theirs = _write(tmp_path / "muse_npo", "MUSE_EVAL.json", muse_eval())
    argv = ["compare", "--benchmark", "muse", "--results", str(ours.parent), str(theirs)]
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    models = [(c["tool"], c["model"], c["step"]) for c in result["columns"]]
    assert models == [("forgetbench", "finetuned", 0), ("forgetbench", "retain", 0),
                      ("forgetbench", "npo", 10), ("forgetbench", "grad_ascent", 10),
                      ("open-unlearning", "muse_npo", None)]  # fmt: skip
    assert result["columns"][-1]["values"] == {
        "muse/verbmem_f": pytest.approx(20.0), "muse/knowmem_f": 37.5, "muse/knowmem_r": 62.5,
        "muse/privleak": -50.0, "muse/mia/min_k": 0.75,
    }  # fmt: skip
    assert result["columns"][2]["values"]["muse/verbmem_f"] == 15.5
    assert result["keys"] == ["muse/verbmem_f", "muse/knowmem_f", "muse/privleak",
                              "muse/knowmem_r", "muse/mia/min_k"]  # fmt: skip
    assert result["their_names"]["muse/knowmem_r"] == "retain_knowmem_ROUGE"
    assert result["theirs_only"] == [{"source": str(theirs), "name": "extraction_strength",
                                      "value": 0.125}]  # fmt: skip
    # The table: each key with open-unlearning's name, every model's value on our scale.
    code, out, _ = _run(capsys, *argv)
    line = next(x for x in out.splitlines() if "muse/knowmem_f" in x)
    assert "forget_knowmem_ROUGE" in line
    assert [c for c in line.replace("│", " ").split() if c[0].isdigit()] == [
        "50.00", "10.00", "8.25", "0.00", "37.50"]  # fmt: skip
    assert "open-unlearning only: extraction_strength = 0.1250" in out
    assert "use_stemmer=True" in out


def test_a_muse_summary_file_and_a_wmdp_lm_eval_summary(capsys, tmp_path):
    summary = {k: v["agg_value"] for k, v in muse_eval().items()}
    theirs = _write(tmp_path / "ou", "MUSE_SUMMARY.json", summary)
    code, out, err = _run(capsys, "compare", "--benchmark", "muse", "--results", str(theirs),
                          "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["columns"][0]["values"]["muse/knowmem_r"] == 62.5
    lm_eval = {"wmdp_bio/acc": 0.5, "wmdp_bio/acc_stderr": 0.1, "mmlu/acc": 0.4375,
               "mmlu/acc_stderr": 0.02, "wmdp_cyber/acc": 0.25}  # fmt: skip
    theirs = _write(tmp_path / "rmu", "LMEval_SUMMARY.json", lm_eval)
    ours = _write(tmp_path / "study", "results.json", wmdp_results())
    code, out, err = _run(capsys, "compare", "--benchmark", "wmdp", "--results", str(ours),
                          str(theirs), "--json")  # fmt: skip
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["columns"][-1]["values"] == {"wmdp/bio": 0.5, "wmdp/cyber": 0.25,
                                               "mmlu/all": 0.4375}  # fmt: skip
    assert result["keys"] == ["wmdp/bio", "wmdp/cyber", "wmdp/chem", "wmdp/all", "mmlu/all"]
    assert result["theirs_only"] == []  # stderr columns are not scores


def _without(name: str) -> dict:
    data = muse_eval()
    del data[name]
    return data


@pytest.mark.parametrize(
    ("case", "data", "message"),
    [
        ("missing metric", _without("privleak"),
         "MUSE_EVAL.json has no 'privleak' (open-unlearning's default MUSE metrics)"),
        ("string agg_value", {**muse_eval(), "forget_verbmem_ROUGE": {"agg_value": "0.2"}},
         "MUSE_EVAL.json: 'forget_verbmem_ROUGE.agg_value' must be a number, got str"),
        ("null agg_value", {**muse_eval(), "privleak": {"agg_value": None}},
         "'privleak.agg_value' must be a number, got null"),
        ("no agg_value", {**muse_eval(), "retain_knowmem_ROUGE": {"value_by_index": {}}},
         "metric 'retain_knowmem_ROUGE' has no 'agg_value'"),
        ("a list", [1, 2], "is not an open-unlearning MUSE or WMDP evaluation file (found list)"),
        ("wrong benchmark", {"wmdp_bio/acc": 0.5},
         "is open-unlearning's WMDP evaluation, not MUSE's"),
    ],
)  # fmt: skip
def test_a_bad_open_unlearning_file_is_one_line(capsys, tmp_path, case, data, message):
    theirs = _write(tmp_path, "MUSE_EVAL.json", data)
    code, _, err = _run(capsys, "compare", "--benchmark", "muse", "--results", str(theirs))
    assert code != 0, case
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err


def test_wrong_files_and_options_are_one_line(capsys, tmp_path):
    ours = _write(tmp_path / "wmdp_study", "results.json", wmdp_results())
    for argv, message in [
        (["--benchmark", "muse", "--results", str(ours)], "holds no MUSE scores"),
        (["--benchmark", "muse", "--reference", "a", "--results", str(ours)], "not --reference"),
        (["--results", str(ours)], "add --benchmark muse or --benchmark wmdp"),
        (["--reference", "a"], "compare needs --candidate for TOFU logs"),
    ]:
        code, _, err = _run(capsys, "compare", *argv)
        lines = err.strip().splitlines()
        assert code != 0 and len(lines) == 1 and message in lines[0], (argv, err)
