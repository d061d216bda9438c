"""Options are applied or refused, never dropped, and refused before any work: each bad option
gives one `error:` line naming it, a non-zero exit and no traceback, and nothing is generated or
trained (the expensive entry points are tripwires).

Longer than 400 lines: half of it is `REFUSED`, one table of refused command lines, a case a row."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest

from forgetbench.cli import main
from forgetbench.config import load_config
from forgetbench.errors import ConfigError
from forgetbench.train.mini import mini_finetune_config, mini_recipe
from forgetbench.train.stages import stage_key

EXPENSIVE = {
    "forgetbench.benchmarks.mini": ["generate_mini"],
    "forgetbench.train.mini": ["pretrain_base", "finetune_mini"],
    "forgetbench.study.unlearn": ["unlearn_command"],
    "forgetbench.study.run": ["run_study"],
    "forgetbench.study.sanity": ["sanity_study"],
    "forgetbench.study.bench": ["bench_training"],
    "forgetbench.train.stages": ["finetune_split"],
    "forgetbench.modeling.loading": ["load_model"],
}


@pytest.fixture
def tripwire(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    called: list[str] = []
    for module, names in EXPENSIVE.items():
        for name in names:

            def trip(*args, _name=f"{module}.{name}", **kwargs):
                called.append(_name)
                raise AssertionError(f"{_name} ran before the options were checked")

            monkeypatch.setattr(f"{module}.{name}", trip)
    return called


# (argv after the command's --out, the text the one error line must contain)
REFUSED = {
    "sanity --model": (["sanity", "--model", "X"], "--model"),
    "sanity train.lr": (["sanity", "train.lr=0.5"], "train.lr"),
    "sanity --split": (["sanity", "--split", "forget05"], "--split"),
    "run --method beside --methods": (["run", "--method", "npo", "--methods", "rmu"], "--method"),
    "run --split beside --splits": (
        ["run", "--split", "forget05", "--splits", "forget10"],
        "--split",
    ),
    "run unlearn.method": (["run", "unlearn.method=npo"], "unlearn.method"),
    "unlearn unknown split": (["unlearn", "--split", "forget99"], "split"),
    "unlearn retain split": (["unlearn", "--split", "retain90"], "--split"),
    "unlearn --methods": (["unlearn", "--methods", "npo,rmu"], "--methods"),
    "unlearn --splits": (["unlearn", "--splits", "forget05"], "--splits"),
    "unlearn study.*": (["unlearn", "study.workers=1"], "study.workers"),
    "unlearn unknown method": (["unlearn", "--method", "nop"], "method"),
    "unlearn lr out of range": (["unlearn", "--lr", "5"], "unlearn.lr"),
    "unlearn --scale with --model": (
        ["unlearn", "--model", "m", "--data", "d", "--scale", "tiny"],
        "--scale",
    ),
    "unlearn train.lr with --model": (
        ["unlearn", "--model", "m", "--data", "d", "train.lr=0.5"],
        "train.lr",
    ),
    "finetune --method": (["finetune", "--scale", "tiny", "--method", "npo"], "--method"),
    "finetune method.*": (
        ["finetune", "--scale", "tiny", "method.forget_weight=2"],
        "method.forget_weight",
    ),
    "finetune forget split (miniature)": (["finetune", "--split", "forget10"], "--split"),
    "finetune train.max_length (miniature)": (
        ["finetune", "--scale", "tiny", "train.max_length=64"],
        "train.max_length",
    ),
    "finetune unknown scale": (["finetune", "--scale", "huge"], "scale"),
    "finetune epochs out of range": (["finetune", "--epochs", "0"], "train.epochs"),
    "finetune --scale with --model": (
        ["finetune", "--model", "m", "--data", "d", "--scale", "tiny"],
        "--scale",
    ),
    "eval --lr": (["eval", "--model", "m", "--data", "d", "--lr", "1e-3"], "--lr"),
    "eval --scale": (["eval", "--model", "m", "--data", "d", "--scale", "tiny"], "--scale"),
    "eval train.lr": (["eval", "--model", "m", "--data", "d", "train.lr=1e-3"], "train.lr"),
    "eval full split": (["eval", "--model", "m", "--data", "d", "--split", "full"], "--split"),
    "run --methods ''": (["run", "--methods", ""], "--methods is empty"),
    "run --methods npo,npo": (["run", "--methods", "npo,npo"], "--methods repeats 'npo'"),
    "run --splits repeated": (
        ["run", "--splits", "forget05,forget01,forget05"],
        "--splits repeats 'forget05'",
    ),
    "run train.warmup_epochs=inf": (
        ["run", "--scale", "tiny", "train.warmup_epochs=inf"],
        "train.warmup_epochs='inf' in command line: input should be a finite number",
    ),
    "run eval.mia_rmia_gamma=inf": (
        ["run", "--scale", "tiny", "eval.mia_rmia_gamma=.inf"],
        "eval.mia_rmia_gamma=inf",
    ),
    "run eval.mia_shadows=1": (["run", "--scale", "tiny", "eval.mia_shadows=1"], "mia_shadows=1"),
    "attack attack.relearn_lr=inf": (
        ["attack", "--scale", "tiny", "attack.relearn_lr=inf"],
        "attack.relearn_lr",
    ),
    "finetune forget split (--model)": (
        ["finetune", "--model", "m", "--data", "d", "--split", "forget10"],
        "finetune --split forget10: finetune trains the finetuned model (full) or a retain model",
    ),
    "unlearn refusals_file (grad_ascent)": (
        ["unlearn", "--method", "grad_ascent", "unlearn.refusals_file=refusals.txt"],
        "does not use unlearn.refusals_file: only idk and dpo read refusals, and grad_ascent",
    ),
    "unlearn refusals_file (--model, npo)": (
        ["unlearn", "--model", "m", "--data", "d", "--method", "npo", "unlearn.refusals_file=r"],
        "does not use unlearn.refusals_file",
    ),
    "run refusals_file (npo, rmu)": (
        ["run", "--methods", "npo,rmu", "unlearn.refusals_file=refusals.txt"],
        "only idk and dpo read refusals, and npo, rmu do not",
    ),
    "run study.sequence of one request": (
        ["run", "--scale", "tiny", "study.sequence=[forget10]"],
        "study.sequence=['forget10'] in command line: lists one request",
    ),
    "run retain_logs (miniature)": (
        ["run", "--scale", "tiny", "study.retain_logs={forget10: /nonexistent}"],
        "study.retain_logs names a retain model's evaluation for a study of your own model",
    ),
    "run retain_logs missing (--model)": (
        ["run", "--model", "m", "--data", "d", "study.retain_logs={forget10: /nonexistent}"],
        "study.retain_logs.forget10: '/nonexistent' does not exist",
    ),
    "run retain_logs unknown split": (
        ["run", "--model", "m", "--data", "d", "study.retain_logs={forget1O: /nonexistent}"],
        "unknown split in study.retain_logs 'forget1O'; did you mean 'forget10'?",
    ),
    "run mia_shadow_models missing": (
        ["run", "--model", "m", "--data", "d", "study.mia_shadow_models={forget05: [/no/s0.json]}"],
        "study.mia_shadow_models.forget05: '/no/s0.json' does not exist",
    ),
    "run lm_eval_tasks": (
        ["run", "--scale", "tiny", "eval.lm_eval_tasks=[mmlu]"],
        "forgetbench run does not use eval.lm_eval_tasks: run scores utility on its own sets",
    ),
    "eval lm_eval_include_path missing": (
        [
            "eval",
            "--model",
            "m",
            "--data",
            "d",
            "eval.lm_eval_tasks=[mmlu]",
            "eval.lm_eval_include_path=/nonexistent",
        ],
        "eval.lm_eval_include_path: '/nonexistent' is not a folder",
    ),  # fmt: skip
    "eval --benchmark muse --split": (
        ["eval", "--model", "m", "--data", "d", "--benchmark", "muse", "--split", "forget05"],
        "forgetbench eval does not use --split: muse is scored on its folder's own sets",
    ),
    "eval --benchmark muse eval.probes=true": (
        ["eval", "--model", "m", "--data", "d", "--benchmark", "muse", "eval.probes=true"],
        "forgetbench eval does not use eval.probes: the generalisation probes are TOFU-layout",
    ),
    "eval --benchmark wmdp --retain-log": (
        ["eval", "--model", "m", "--data", "d", "--benchmark", "wmdp", "--retain-log", "r"],
        "forgetbench eval --benchmark wmdp does not use --retain-log",
    ),
    "eval model.mixed_precision": (
        ["eval", "--model", "m", "--data", "d", "model.mixed_precision=bf16"],
        "forgetbench eval does not use model.mixed_precision: eval trains nothing",
    ),
    "eval model.size": (
        ["eval", "--model", "m", "--data", "d", "model.size=8b"],
        "forgetbench eval does not use model.size: it shapes only the built-in model",
    ),
    "unlearn model.size with --model": (
        ["unlearn", "--model", "m", "--data", "d", "model.size=8b"],
        "forgetbench unlearn does not use model.size",
    ),
    "unlearn lora_rank without lora": (
        ["unlearn", "unlearn.lora_rank=4"],
        "unlearn.lora_rank applies only with unlearn.lora=true: without it every weight trains",
    ),
    "finetune train.lora_alpha without lora": (
        ["finetune", "--model", "m", "--data", "d", "train.lora_alpha=4"],
        "train.lora_alpha applies only with train.lora=true",
    ),
    # One setting twice on the command line, refused even when the values agree.
    "unlearn --preset and unlearn.preset=": (
        ["unlearn", "--preset", "open_unlearning", "unlearn.preset=mini"],
        "got --preset and unlearn.preset=, two values for one setting",
    ),
    "unlearn --lr and unlearn.lr= (equal)": (
        ["unlearn", "--lr", "1e-3", "unlearn.lr=1e-3"],
        "got --lr and unlearn.lr=",
    ),
    "finetune --lr and train.lr=": (
        ["finetune", "--scale", "tiny", "--lr", "1e-3", "train.lr=2e-3"],
        "got --lr and train.lr=",
    ),
    "run --seed and seed=": (["run", "--seed", "1", "seed=2"], "got --seed and seed="),
    "unlearn --method and unlearn.method=": (
        ["unlearn", "--method", "npo", "unlearn.method=simnpo"],
        "got --method and unlearn.method=",
    ),
    "unlearn unlearn.lr= twice": (
        ["unlearn", "unlearn.lr=1e-3", "unlearn.lr=2e-3"],
        "got unlearn.lr= twice",
    ),
    # One flag twice: argparse would keep the last.
    "run --out twice": (["run", "--out", "A"], "forgetbench run got --out twice, two values"),
    "unlearn --lr twice": (
        ["unlearn", "--lr", "1e-4", "--lr", "2e-4"],
        "forgetbench unlearn got --lr twice, two values for one setting",
    ),
    "run --config twice": (
        ["run", "--config", "a.yaml", "--config", "b.yaml"],
        "forgetbench run got --config twice",
    ),
    "unlearn model.device=tpu": (
        ["unlearn", "model.device=tpu"],
        "invalid value model.device='tpu' in command line — expected auto, cpu, cuda or cuda:N",
    ),
    "run altpo in cloze": (
        ["run", "--scale", "tiny", "--methods", "npo,altpo", "study.unlearn_formats=[cloze]"],
        "method altpo trains toward TOFU's perturbed answers",
    ),
    "bench train --model": (["bench", "train", "--model", "m"], "--model"),
    "bench --lr": (["bench", "train", "--lr", "1e-3"], "--lr"),
    "bench train --steps -1": (
        ["bench", "train", "--model", "m", "--data", "d", "--steps", "-1"],
        "--steps -1: a number of optimizer steps is 0 or more",
    ),
    "bench eval --steps": (
        ["bench", "eval", "--scale", "tiny", "--steps", "3"],
        "forgetbench bench eval does not use --steps",
    ),
    "bench eval --seed with --model": (
        ["bench", "eval", "--model", "m", "--data", "d", "--seed", "3"],
        "--seed",
    ),
}


def _one_error_line(capsys, code: int, names: str) -> str:
    out, err = capsys.readouterr()
    assert code not in (0, 1), err  # 1 would be a bug (an unexpected exception)
    assert "Traceback" not in out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert names in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("case", list(REFUSED))
def test_option_is_refused_before_any_work(capsys, tmp_path, tripwire, case):
    argv, names = REFUSED[case]
    code = main([*argv, "--out", str(tmp_path / "run")])
    _one_error_line(capsys, code, names)
    assert tripwire == []
    assert not (tmp_path / "run" / "data").exists()
    assert not (tmp_path / "run" / "models").exists()


@pytest.mark.parametrize("split", ["unknown", "forget99"])
def test_config_refuses_an_unknown_split(capsys, split):
    code = main(["config", "--split", split])
    _one_error_line(capsys, code, "split")


def test_config_still_shows_every_option(capsys):
    # `config` prints what a config resolves to; it refuses nothing but invalid values.
    assert main(["config", "--json", "--method", "npo", "--methods", "rmu", "train.lr=0.5"]) == 0


def test_miniature_finetune_applies_train_options():
    """`finetune --scale tiny train.lr=0.5 train.epochs=1` trains with them: a new stage key."""
    config = load_config(None, ["scale=tiny", "train.lr=0.5", "train.epochs=1"])
    loop, lora = mini_finetune_config("tiny", seed=0, train=config.train)
    default = mini_recipe("tiny", seed=0).finetune
    assert (loop.lr, loop.epochs) == (0.5, 1)
    assert lora is None
    # Only what was set changes; the recipe's tuned values stay, not TrainConfig's LLM defaults.
    assert asdict(loop) == {**asdict(default), "lr": 0.5, "epochs": 1}
    assert mini_finetune_config("tiny", train=load_config().train)[0] == default

    def key(config) -> str:
        return stage_key(name="finetune", examples=[], config=config, parent="base")

    assert key(loop) != key(default)


def test_miniature_batch_size_keeps_the_per_device_batch_within_it():
    train = load_config(None, ["train.batch_size=8"]).train
    loop, _ = mini_finetune_config("tiny", train=train)
    assert (loop.batch_size, loop.per_device_batch_size) == (8, 8)


@pytest.mark.parametrize(
    "options", [["train.lr=0.5", "train.epochs=1"], ["--lr", "0.5", "--epochs", "1"]]
)
def test_finetune_command_passes_train_options_to_the_miniature(monkeypatch, tmp_path, options):
    """The command wiring, without training: the finetune stage gets the user's loop."""
    from forgetbench.train import mini
    from forgetbench.train.stages import StageResult

    seen = {}
    monkeypatch.setattr("forgetbench.benchmarks.mini.generate_mini", lambda *a, **k: None)

    def fake_pretrain(out, data, **kwargs):
        return StageResult("pretrain", Path(out) / "base", True, [1.0], 0.0)

    def fake_run_stage(run_dir, *, name, config, lora=None, **kwargs):
        seen.update(name=name, config=config, lora=lora)
        return StageResult(name, Path(run_dir) / "ft", False, [1.0], 0.0)

    monkeypatch.setattr(mini, "pretrain_base", fake_pretrain)
    monkeypatch.setattr(mini, "run_stage", fake_run_stage)
    monkeypatch.setattr(mini, "load_tofu", lambda *a, **k: [])
    monkeypatch.setattr(mini, "encode_qa", lambda *a, **k: [])
    monkeypatch.setattr(mini, "rehearsal_examples", lambda *a, **k: [])
    monkeypatch.setattr("transformers.AutoTokenizer.from_pretrained", lambda *a, **k: None)
    out = tmp_path / "run"
    code = main(["finetune", "--scale", "tiny", "--out", str(out), "--json", *options])
    assert code == 0
    assert seen["name"] == "finetune"
    assert (seen["config"].lr, seen["config"].epochs) == (0.5, 1)


def test_a_bad_refusals_file_is_refused_before_any_training(tmp_path, capsys, monkeypatch):
    import forgetbench.study.run
    import forgetbench.study.unlearn

    def tripwire(*args, **kwargs):
        raise AssertionError("training started before the refusals file was read")

    monkeypatch.setattr(forgetbench.study.unlearn, "unlearn_command", tripwire)
    monkeypatch.setattr(forgetbench.study.run, "run_study", tripwire, raising=False)
    bad = tmp_path / "refusals.txt"
    bad.write_bytes(b"I don't know.\n\xff\xfe\n")
    for command in (["unlearn", "--method", "idk"], ["run", "--methods", "idk"]):
        code = main(
            [
                *command,
                "--scale",
                "tiny",
                "--out",
                str(tmp_path / "o"),
                f"unlearn.refusals_file={bad}",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and err.count("error:") == 1 and str(bad) in err and "Traceback" not in err
    assert not (tmp_path / "o" / "models").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["data", "generate", "--scale", "tiny", "--out", ""],
        ["run", "--scale", "tiny", "--out", ""],
        ["finetune", "--scale", "tiny", "--out", ""],
        ["run", "--scale", "tiny", "out="],
    ],
)
def test_an_empty_output_path_is_refused_not_the_current_folder(
    capsys, tmp_path, monkeypatch, tripwire, argv
):
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    line = _one_error_line(capsys, code, "empty")
    assert "--out is '' (an empty path)" in line or "out in command line is empty" in line
    assert tripwire == []
    assert list(tmp_path.iterdir()) == []


def test_probes_asked_for_on_data_without_probe_files_are_refused(capsys, tmp_path, tripwire):
    # The default (eval.probes true) scores them where the data has them; typed, it is a request.
    data = tmp_path / "tofu"
    data.mkdir()
    argv = ["eval", "--model", "m", "--data", str(data), "--out", str(tmp_path / "o")]
    code = main([*argv, "eval.probes=true"])
    line = _one_error_line(capsys, code, "eval.probes=true asks for the generalisation probes")
    assert (
        f"{data} has no probe file for forget10 (e.g. forget10_paraphrase_perturbed.json)" in line
    )
    (data / "forget10_paraphrase_perturbed.json").write_text('{"question": "q"}\n')
    code = main([*argv, "eval.probes=true"])
    # Accepted: the run stops later, at TOFU's own files.
    assert "needs forget10_perturbed.json(l)" in capsys.readouterr().err
    assert tripwire == []


def test_a_recipes_per_device_batch_fits_the_processes_a_users_does_not(monkeypatch):
    # torchrun with 2 processes: the miniature's recipe (16 a step, 16 a device) would need 32
    # a step; the recipe's per-device size adapts in the loop, as accumulation does, the
    # effective batch staying 16, and the stage keeps its one-process key (a torchrun launch
    # reuses the models a one-process run trained). One the user set is kept, and the loop
    # refuses it if it cannot divide.
    from forgetbench.study.unlearn import resolve_method
    from forgetbench.train.batches import accumulation_steps, fit_per_device
    from forgetbench.train.loop import train_loop
    from forgetbench.train.loop_config import config_key
    from forgetbench.train.mini import mini_recipe

    assert [fit_per_device(16, 16, n) for n in (1, 2, 3, 4, 32)] == [16, 8, 16, 4, 16]
    assert fit_per_device(32, 4, 2) == 4 and fit_per_device(12, 8, 2) == 6
    one_process = config_key(mini_recipe("tiny").finetune)
    monkeypatch.setenv("WORLD_SIZE", "2")
    recipe = mini_recipe("tiny")
    assert config_key(recipe.finetune) == one_process
    for loop in (recipe.pretrain, recipe.finetune, recipe.documents):
        assert loop.fit_per_device
        fitted = fit_per_device(loop.batch_size, loop.per_device_batch_size, 2)
        assert (
            fitted * 2 * accumulation_steps(replace(loop, per_device_batch_size=fitted), 2)
            == loop.batch_size
        )
    assert fit_per_device(recipe.pretrain.batch_size, recipe.pretrain.per_device_batch_size, 2) == 8
    train = load_config(None, ["train.batch_size=8"]).train
    loop = mini_finetune_config("tiny", train=train)[0]
    assert (loop.per_device_batch_size, loop.fit_per_device) == (8, True)
    train = load_config(None, ["train.batch_size=8", "train.per_device_batch_size=8"]).train
    assert not mini_finetune_config("tiny", train=train)[0].fit_per_device
    config = load_config(None, ["unlearn.batch_size=6"])
    loop, _ = resolve_method(config, "npo", recipe.finetune, {})
    assert (loop.batch_size, loop.fit_per_device) == (6, True)
    assert fit_per_device(loop.batch_size, loop.per_device_batch_size, 2) == 3
    config = load_config(None, ["unlearn.batch_size=6", "unlearn.per_device_batch_size=6"])
    loop, _ = resolve_method(config, "npo", recipe.finetune, {})
    assert loop.per_device_batch_size == 6 and not loop.fit_per_device
    with pytest.raises(ConfigError, match="not a multiple of per_device_batch_size x processes"):
        accumulation_steps(loop, 2)
    # The loop itself fits a recipe's size (and refuses the user's) before it trains anything.
    with pytest.raises(ConfigError, match="not a multiple of per_device_batch_size x processes"):
        train_loop(None, [], loss_fn=lambda *a: None, collate_fn=list, config=loop, out_dir="x")
