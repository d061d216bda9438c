"""`forgetbench attack` from the command line: refusals in one sentence, and a real run on the
tiny miniature's finetuned and retain models."""

import json

import pytest

from forgetbench.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--split", "retain90"], "the attacks run on a forget split"),
        (["--attacks", "relearn,melt"], "melt"),
        (["--finetuned", "x"], "--finetuned and --retain are for a model of your own"),
        (["--method", "npo"], "attack runs no unlearning"),
        (["--data", "somewhere"], "needs both --model and --data"),
    ],
)
def test_bad_options_are_refused_in_one_line(argv, message, tmp_path, capsys):
    code = main(["attack", "--scale", "tiny", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert code != 0 and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_attack_on_the_miniatures_references(tiny_study, tmp_path, capsys):
    run = tiny_study[0]
    out = tmp_path / "attack"
    out.mkdir()
    # The tiny study's stages, reused rather than trained again.
    for name in ("data", "models"):
        (out / name).symlink_to(run / name, target_is_directory=True)
    argv = ["attack", "--scale", "tiny", "--split", "forget10", "--out", str(out)]
    argv += ["--attacks", "relearn,quantize", "attack.quantize=[int4]", "eval.batch_size=64"]
    argv += ["eval.max_new_tokens=24", "--json"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    saved = json.loads((out / "attacks.json").read_text())
    assert printed == saved and set(saved["models"]) == {"finetuned", "retain"}
    retain = saved["models"]["retain"]
    # The control: relearning on A teaches the retain model little about B.
    assert retain["attack/relearn/recovered_rougeL"] < 0.5
    assert retain["attack/relearn/steps"] == 3 and "attack/int4/forget_quality" in retain
    assert "attack/int8/rougeL" not in retain and "attack/incontext/rougeL" not in retain
    # Nothing was forgotten by the finetuned model, so there is nothing to recover.
    assert saved["models"]["finetuned"]["attack/relearn/recovered_rougeL"] is None
    halves = json.loads((out / "attacks" / "forget10" / "retain" / "halves.json").read_text())
    assert len(halves["a"]) == len(halves["b"]) == 10
    # The attacks score no membership: no shadow models were trained for them.
    assert not (out / "mia").exists()


@pytest.mark.slow
def test_attack_on_a_model_of_your_own(tiny_study, tmp_path, capsys):
    # A model folder and TOFU-layout data, as a Hugging Face model would be given.
    run, data, _, finetuned, retain = tiny_study
    argv = ["attack", "--model", str(retain.model_dir), "--data", str(data / "tofu")]
    argv += ["--finetuned", str(finetuned.model_dir), "--split", "forget10"]
    argv += ["--out", str(tmp_path / "out"), "--attacks", "quantize", "attack.quantize=[int8]"]
    argv += ["eval.max_new_tokens=24", "eval.batch_size=64", "--json"]
    assert main(argv) == 0
    saved = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(saved["models"]) == {"model", "finetuned"}
    model = saved["models"]["model"]
    # No retain model given: no forget quality; int8 barely moves a model.
    assert model["attack/int8/forget_quality"] is None
    assert abs(model["attack/int8/recovered_rougeL"]) < 0.1
