"""The Python API and method plugins, end to end on the tiny model, following the docs as a user
outside the repository would: docs/methods.md's plugin file and commands, docs/python-api.md's
commands and scripts, each code block run as written (the study's `run` with options that keep
it small, appended here). Then `forgetbench.evaluate`, `forgetbench.unlearn` and `forgetbench.run`
against the commands they equal, and a method from an installed package's entry point."""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import torch

import forgetbench
from forgetbench.cli import main
from forgetbench.errors import ConfigError
from forgetbench.methods import plugins
from forgetbench.methods.base import METHODS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# A code block the docs mark `<!-- file: NAME -->` (saved as NAME) or `<!-- run -->` (commands).
_BLOCK = re.compile(r"<!-- (file: (\S+)|run) -->\n```[a-z]*\n(.*?)^```", re.M | re.S)
# The docs' study, kept small: one unlearning epoch, no attacks, formats, LUME or shadow models;
# two worker processes, so the plugin is loaded in each.
SMALL_STUDY = ["unlearn.epochs=1", "--attacks", "none", "eval.formats=false", "eval.lume=false",
               "eval.max_new_tokens=16", "eval.mia_shadows=0", "study.workers=2"]  # fmt: skip
QUICK_EVAL = {"formats": False, "lume": False, "max_new_tokens": 16}


def doc_blocks(page: str) -> tuple[dict[str, str], list[str]]:
    files, commands = {}, []
    for _, name, code in _BLOCK.findall((ROOT / "docs" / page).read_text()):
        if name:
            files[name] = code
        else:
            commands += [line for line in code.splitlines() if line.strip()]
    return files, commands


def _cli(line: str, *more: str) -> dict:
    words = shlex.split(line)
    assert words[0] == "forgetbench"
    code = main([*words[1:], *more, "--json", "--no-progress"])
    assert code == 0, line
    return code


@pytest.fixture(scope="module")
def docs(tiny_study, tmp_path_factory):
    """A folder where the docs' commands ran (the tiny models copied in, so they are reused)."""
    folder = tmp_path_factory.mktemp("docs")
    for run in ("runs/tiny", "runs/mine"):
        for part in ("data", "models"):
            shutil.copytree(tiny_study[0] / part, folder / run / part, symlinks=True)
    registered, loaded = dict(METHODS._entries), dict(plugins._loaded)
    here = Path.cwd()
    os.chdir(folder)
    try:
        files, commands = doc_blocks("methods.md")
        api_files, api_commands = doc_blocks("python-api.md")
        for name, code in {**files, **api_files}.items():
            (folder / name).write_text(code)
        unlearn, run = commands
        _cli(unlearn)
        _cli(run, *SMALL_STUDY)
        # python-api.md's commands: a line methods.md has already run is not run again (the same
        # study, every stage reused: only its report rebuilt, seconds of CPU for nothing new).
        for line in [line for line in api_commands if line not in commands]:
            _cli(line, *(SMALL_STUDY if line.startswith("forgetbench run ") else ()))
        yield folder
    finally:
        os.chdir(here)
        METHODS._entries.clear()
        METHODS._entries.update(registered)
        plugins._loaded.clear()
        plugins._loaded.update(loaded)


def test_the_docs_plugin_runs_in_unlearn_and_in_a_study(docs):
    alias = docs / "runs/tiny/unlearned-capped_ascent-forget10"
    record = json.loads((alias.resolve().parent / "unlearn.json").read_text())
    assert record["method"] == "capped_ascent" and record["options"]["cap"] == 3.0
    assert len(record["losses"]) > 1
    results = json.loads((docs / "runs/mine/results.json").read_text())
    methods = {row["method"] for row in results["rows"]}
    assert {"grad_ascent", "capped_ascent"} <= methods
    final = [r for r in results["rows"] if r["method"] == "capped_ascent" and r["step"] > 0]
    assert final and all(r["forget_quality"] is not None for r in final)
    # Each row records the run's settings in force, the plugin file's digest among them.
    digest = plugins.method_source(METHODS.get("capped_ascent"))
    assert all(r["settings/plugin_digest"] == digest and r["settings/method.cap"] > 0
               and r["settings/unlearn_lr"] > 0 for r in final)  # fmt: skip
    assert "capped_ascent" in (docs / "runs/mine/report.html").read_text()


def _script(docs: Path, name: str, capsys, monkeypatch) -> list[str]:
    """The docs' script run as `python NAME` runs it, in this process (a new interpreter costs
    seconds): as __main__, from its folder, which heads the import path (`import my_method`)."""
    monkeypatch.chdir(docs)
    monkeypatch.syspath_prepend(str(docs))
    registered = dict(METHODS._entries)
    capsys.readouterr()
    try:
        runpy.run_path(str(docs / name), run_name="__main__")
    finally:
        # What the script registered and imported leaves with it, as with its process.
        sys.modules.pop("my_method", None)
        METHODS._entries.clear()
        METHODS._entries.update(registered)
    return capsys.readouterr().out.strip().splitlines()


def test_the_docs_script_runs_as_written(docs, capsys, monkeypatch):
    steps, *scores = _script(docs, "unlearn_mine.py", capsys, monkeypatch)
    assert re.fullmatch(r"\d+ steps, loss -?[\d.]+ -> -?[\d.]+", steps)
    moved = {
        m[1]: (float(m[2]), float(m[3]))
        for m in (re.fullmatch(r"(\S+): ([\d.e-]+) -> ([\d.e-]+)", line) for line in scores)
    }
    assert set(moved) == {"forget/rougeL", "model_utility", "forget_quality"}
    before, after = moved["forget/rougeL"]
    assert after < before  # the plugin's method forgot


def test_the_callback_logs_from_a_real_trainer_run(docs, capsys, monkeypatch):
    found = [
        re.fullmatch(r"step (\d+): forget quality (\S+), model utility (\S+)", line)
        for line in _script(docs, "ascent_trainer.py", capsys, monkeypatch)
    ]
    lines = [m.groups() for m in found if m]  # the Trainer prints its own log lines too
    assert [int(step) for step, *_ in lines] == [2, 4]
    (_, fq2, mu2), (_, fq4, mu4) = lines
    assert all(0 <= float(v) <= 1 for v in (fq2, mu2, fq4, mu4))
    assert (fq2, mu2) != (fq4, mu4)  # two more steps of ascent moved the scores


def _trainer_losses(tiny_study, out: Path, *, callback: bool) -> list[tuple[int, float]]:
    """A real Trainer's own loss entries over 4 steps of finetuning the tiny model on forget10,
    logged every step, with or without a ForgetbenchCallback evaluating every 2 steps."""
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from forgetbench.callbacks import ForgetbenchCallback

    _, data, _, finetuned, _ = tiny_study
    model, tokenizer = _load(finetuned.model_dir)
    lines = (data / "tofu/forget10.json").read_text().splitlines()
    texts = [json.loads(line) for line in lines if line.strip()][:8]
    dataset = [tokenizer(f"Question: {r['question']}\nAnswer: {r['answer']}") for r in texts]
    args = TrainingArguments(
        output_dir=str(out), max_steps=4, per_device_train_batch_size=2, learning_rate=1e-3,
        logging_steps=1, save_strategy="no", report_to=[], seed=0,
    )  # fmt: skip
    trainer = Trainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )  # fmt: skip
    if callback:
        ForgetbenchCallback(
            data=data, every=2, max_questions=4, mia=False, formats=False, lume=False,
            probes=False, max_new_tokens=4,
        ).attach(trainer)  # fmt: skip
    trainer.train()
    logged = trainer.state.log_history
    if callback:  # it did evaluate, at steps 2 and 4
        assert [e["step"] for e in logged if "forgetbench/model_utility" in e] == [2, 4]
    return [(e["step"], e["loss"]) for e in logged if "loss" in e]


def test_the_callback_leaves_the_trainers_own_loss_log_untouched(tiny_study, tmp_path):
    plain = _trainer_losses(tiny_study, tmp_path / "plain", callback=False)
    scored = _trainer_losses(tiny_study, tmp_path / "scored", callback=True)
    assert [step for step, _ in plain] == [1, 2, 3, 4]
    assert scored == plain


def test_the_callback_must_be_attached():
    from forgetbench.callbacks import ForgetbenchCallback

    with pytest.raises(ValueError, match=r"call callback.attach\(trainer\)"):
        ForgetbenchCallback(data="d").on_train_begin(None, None, None)


def _load(folder: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def test_evaluate_gives_the_scores_of_forgetbench_eval(docs, tmp_path):
    model_dir, data = docs / "runs/mine/finetuned", docs / "runs/mine/data"
    retain = docs / "runs/mine/logs/forget10/retain/step-0"
    flags = " ".join(f"eval.{k}={str(v).lower()}" for k, v in QUICK_EVAL.items())
    _cli(f"forgetbench eval --model {model_dir} --data {data} --retain-log {retain} "
         f"--out {tmp_path / 'cli'} {flags}")  # fmt: skip
    cli = json.loads((tmp_path / "cli/summary.json").read_text())["scores"]
    model, tokenizer = _load(model_dir)
    result = forgetbench.evaluate(
        model, tokenizer, data=data, retain_log=retain, out=tmp_path / "api", **QUICK_EVAL
    )
    assert set(result.scores) == set(cli) and result.forget_quality is not None
    for key, value in cli.items():
        if isinstance(value, float):
            assert result.scores[key] == pytest.approx(value, abs=1e-6), key
        else:
            assert result.scores[key] == value, key
    written = json.loads((tmp_path / "api/summary.json").read_text())["scores"]
    assert written == json.loads(json.dumps(result.scores))
    with pytest.raises(ConfigError, match=r"forgetbench.evaluate\(mia=\.\.\.\)"):
        forgetbench.evaluate(model, tokenizer, data=data, mia="sometimes")


def test_unlearn_gives_the_losses_of_forgetbench_unlearn(docs, tmp_path):
    model_dir, data = docs / "runs/mine/finetuned", docs / "runs/mine/data"
    _cli(f"forgetbench unlearn --model {model_dir} --data {data} --method npo method.beta=0.2 "
         f"--out {tmp_path}")  # fmt: skip
    (record,) = tmp_path.glob("unlearn/npo-forget10-*/unlearn.json")
    cli = json.loads(record.read_text())["losses"]
    model, tokenizer = _load(model_dir)
    result = forgetbench.unlearn(model, tokenizer, data=data, method="npo", beta=0.2)
    assert result.model is model and result.method.beta == 0.2
    assert len(result.losses) == len(cli) > 1
    assert result.losses == pytest.approx(cli, abs=1e-6)


def test_run_returns_the_results_of_forgetbench_run(docs, monkeypatch):
    monkeypatch.chdir(docs)
    config = {
        "scale": "tiny",
        "out": "runs/mine",
        "plugins": ["my_method.py"],
        # In this process: the study is the CLI's, whose every stage is reused.
        "study": {"methods": ["grad_ascent", "capped_ascent"], "attacks": [], "workers": 1},
        "unlearn": {"epochs": 1},
        "eval": {**QUICK_EVAL, "mia_shadows": 0},
    }
    results = forgetbench.run(config)
    written = json.loads((docs / "runs/mine/results.json").read_text())
    assert [(r.method, r.split, r.step) for r in results.rows] == [
        (r["method"], r["split"], r["step"]) for r in written["rows"]
    ]
    assert {r.method for r in results.rows} >= {"grad_ascent", "capped_ascent"}


def test_an_installed_packages_method_runs_without_a_flag(docs, tmp_path, monkeypatch, capsys):
    # An installed distribution as importlib.metadata finds it: a dist-info folder on the path
    # with its entry points, beside the module they name. forgetbench reads the entry points when
    # forgetbench.methods is imported: the package is imported again here (a new interpreter
    # costs seconds of CPU), as a new process would, and the command then finds the method.
    import importlib

    import forgetbench.methods

    site = tmp_path / "site"
    info = site / "forgetbench_extra-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: forgetbench-extra\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[forgetbench.plugins]\nextra = forgetbench_extra\n")
    plugin = (docs / "my_method.py").read_text().replace("capped_ascent", "installed_ascent")
    (site / "forgetbench_extra.py").write_text(plugin)
    registered, loaded = dict(METHODS._entries), dict(plugins._loaded)
    monkeypatch.chdir(docs)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)  # as in a new process
    argv = ["unlearn", "--scale", "tiny", "--method", "installed_ascent", "method.cap=3",
            "unlearn.epochs=1", "--out", str(docs / "runs/tiny"), "--json", "--no-progress"]  # fmt: skip
    try:
        assert "installed_ascent" not in METHODS
        importlib.reload(forgetbench.methods)
        capsys.readouterr()
        assert main(argv) == 0, capsys.readouterr().err[-2000:]
    finally:
        sys.modules.pop("forgetbench_extra", None)
        METHODS._entries.clear()
        METHODS._entries.update(registered)
        plugins._loaded.clear()
        plugins._loaded.update(loaded)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["method"] == "installed_ascent" and summary["steps"] > 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: forgetbench.evaluate({"weights": 1}, None, data="d"),
         "forgetbench.evaluate(model=...) got dict {'weights': 1}, not a model — pass a Hugging "
         "Face causal LM"),
        (lambda: forgetbench.evaluate(torch.nn.Linear(1, 1), None, data="d"),
         "forgetbench.evaluate(tokenizer=...) is None, and a model object comes without one"),
        (lambda: forgetbench.evaluate(torch.nn.Linear(1, 1), "tok", data="d"),
         "forgetbench.evaluate(tokenizer=...) got str 'tok', not a tokenizer"),
        (lambda: forgetbench.evaluate(torch.nn.Linear(1, 1), None, data=3),
         "forgetbench.evaluate(data=...) got int 3, not a path"),
        (lambda: forgetbench.unlearn(torch.nn.Linear(1, 1), None, data="d", method="npo",
                                     plugins="mine.py"),
         "forgetbench.unlearn(plugins=...) got str 'mine.py', not a list of plugins"),
        (lambda: forgetbench.unlearn(7, None, data="d", method="npo"),
         "forgetbench.unlearn(model=...) got int 7, not a model"),
        (lambda: forgetbench.run(42), "forgetbench.run(config=...) got int 42, not a config"),
    ],
    ids=["dict-model", "no-tokenizer", "str-tokenizer", "int-data", "str-plugins", "int-model",
         "int-config"],
)  # fmt: skip
def test_the_api_checks_its_arguments_in_one_sentence(call, message):
    with pytest.raises(ConfigError) as info:
        call()
    assert info.value.message.startswith(message), info.value.message


def test_run_refuses_a_sharding_it_cannot_run_before_any_work(monkeypatch, tmp_path):
    # model.sharding=fsdp outside torchrun: `forgetbench run` refuses it in one sentence, and so
    # must the API instead of running the study unsharded.
    import forgetbench.study.run

    started = []
    monkeypatch.setattr(forgetbench.study.run, "run_study", lambda *a, **k: started.append(a))
    config = {"scale": "tiny", "out": str(tmp_path / "out"), "model": {"sharding": "fsdp"}}
    with pytest.raises(ConfigError, match=r"model.sharding=fsdp shards the model over"):
        forgetbench.run(config)
    assert started == [] and not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """The miniature's data and an untrained tiny model saved as a folder (a second to make)."""
    from transformers import AutoTokenizer

    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.modeling.builtin import build_tiny_model
    from forgetbench.modeling.loading import save_model
    from forgetbench.train.mini import build_tokenizer

    root = tmp_path_factory.mktemp("api-world")
    generate_mini(root / "data", scale="tiny", seed=0)
    tokenizer = AutoTokenizer.from_pretrained(build_tokenizer(root, root / "data", scale="tiny"))
    model = save_model(build_tiny_model(tokenizer, scale="tiny", seed=0), tokenizer, root / "m")
    return root / "data", model


def test_a_model_folder_is_loaded_as_the_command_loads_it(untrained):
    # A folder where a model object is expected is what a user has after finetuning: loaded as
    # `--model FOLDER` is, it unlearns step for step as the object loaded by hand.
    data, folder = untrained
    where = {"data": data, "method": "grad_ascent", "split": "forget01", "epochs": 2}
    by_path = forgetbench.unlearn(folder, **where)
    by_object = forgetbench.unlearn(*_load(folder), **where)
    assert isinstance(by_path.model, torch.nn.Module) and len(by_path.losses) == 2
    assert by_path.losses == pytest.approx(by_object.losses, abs=1e-6)
    quick = {**QUICK_EVAL, "max_questions": 1, "max_new_tokens": 2, "mia": False, "probes": False}
    scores = forgetbench.evaluate(str(folder), data=data, split="forget01", **quick).scores
    assert 0 <= scores["forget/rougeL"] <= 1 and scores["forget/probability"] > 0
