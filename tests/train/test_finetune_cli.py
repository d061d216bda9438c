import json

from forgetbench.cli import main
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.loading import save_model
from toy import toy_qa, toy_tokenizer


def test_finetune_command_trains_then_reuses(tmp_path, capsys):
    tokenizer = toy_tokenizer()
    base = save_model(build_tiny_model(tokenizer), tokenizer, tmp_path / "base")
    data = tmp_path / "data"
    data.mkdir()
    (data / "full.json").write_text(
        "".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in toy_qa())
    )
    argv = [
        "finetune",
        "--model",
        str(base),
        "--data",
        str(data),
        "--out",
        str(tmp_path / "run"),
        "train.lr=3e-3",
        "train.epochs=2",
        "train.batch_size=8",
        "--json",
    ]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert first["stage"] == "finetune" and not first["cached"] and first["steps"] == 4
    assert first["final_loss"] < first["first_loss"]
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert second["cached"] and second["model_dir"] == first["model_dir"]
    # A readable name beside the hashed one: runs/x/finetuned is the model folder, by a relative
    # link (the run folder can move); a real folder of that name would be left alone.
    alias = tmp_path / "run" / "finetuned"
    assert first["alias"] == str(alias) and alias.is_symlink()
    assert not alias.readlink().is_absolute() and alias.readlink().parts[0] == "models"
    assert (
        alias.resolve() == (tmp_path / "run" / first["model_dir"]).resolve()
        or alias.resolve() == __import__("pathlib").Path(first["model_dir"]).resolve()
    )
    assert (alias / "config.json").is_file()


def test_finetune_bad_inputs(tmp_path, capsys):
    assert (
        main(
            [
                "finetune",
                "--model",
                str(tmp_path),
                "--data",
                str(tmp_path),
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 2
    )
    assert "no file for TOFU split 'full'" in capsys.readouterr().err
    assert main(["finetune", "--data", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "--model is required" in capsys.readouterr().err
    assert (
        main(["finetune", "--model", "m", "--data", "d", "--out", "o", "train.batch_size=6"]) == 2
    )
