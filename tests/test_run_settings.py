"""What each results row records of the run that made its model (`settings/*`): the values in
force, not the config's nulls, so two studies with different method settings differ."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from forgetbench.config import load_config
from forgetbench.study.inputs import Study
from forgetbench.study.unlearn import finetune_settings, run_settings
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.mini import mini_unlearn_defaults
from forgetbench.train.presets import unlearn_preset


def _study() -> Study:
    # The miniature's study as `Miniature.study` makes it; no model is read to resolve settings.
    return Study(
        Path("data"), Path("finetuned"), None, {}, None, 64,
        partial(mini_unlearn_defaults, layers=4), benchmark="mini",
        finetune_loop=LoopConfig(lr=2e-3, epochs=30, batch_size=16), unlearn_preset="mini",
    )  # fmt: skip


def test_a_row_records_the_recipe_preset_and_options_in_force():
    config = load_config(overrides=["study.methods=[npo,rmu]"])
    assert config.unlearn.lr is None and config.method == {}  # what results.json's config shows
    npo = run_settings(_study(), config, "npo")
    loop, options = unlearn_preset("mini", "npo")
    assert npo["settings/unlearn_preset"] == "mini"
    assert (npo["settings/unlearn_lr"], npo["settings/unlearn_epochs"]) == (loop.lr, loop.epochs)
    assert npo["settings/method.beta"] == options.get("beta", 0.1)
    assert (npo["settings/finetune_lr"], npo["settings/finetune_epochs"]) == (2e-3, 30)
    assert "settings/plugin_digest" not in npo  # a built-in: the version names its code
    rmu = run_settings(_study(), config, "rmu")
    assert rmu["settings/method.preset"] == "wmdp_defaults"
    # The steered blocks scaled to the model's depth, a tuple written as one cell.
    layers = mini_unlearn_defaults("rmu", layers=4)[1]["update_layers"]
    assert rmu["settings/method.update_layers"] == json.dumps(list(layers))
    assert rmu["settings/unlearn_lr"] == unlearn_preset("mini", "rmu")[0].lr


def test_different_settings_give_different_rows():
    study = _study()
    plain = run_settings(study, load_config(), "npo")
    tuned = load_config(
        overrides=["study.method_settings={npo: {lr: 5.0e-4, options: {beta: 0.3}}}"]
    )
    changed = run_settings(study, tuned, "npo")
    assert {k for k in plain if plain[k] != changed[k]} == {
        "settings/unlearn_lr", "settings/method.beta",
    }  # fmt: skip
    assert (changed["settings/unlearn_lr"], changed["settings/method.beta"]) == (5e-4, 0.3)


def test_a_model_of_the_users_records_no_finetuning():
    study = Study(
        Path("d"), Path("m"), None, {}, None, 64, partial(mini_unlearn_defaults, layers=4)
    )
    assert finetune_settings(study) == {}
    assert run_settings(study, load_config(), "npo")["settings/unlearn_preset"] == "tofu"


def test_a_document_study_records_the_documents_recipe_not_tofus(monkeypatch):
    # The document benchmarks' models train on the documents' recipe; with its learning rate
    # apart from the TOFU-shaped finetuning's, the study (relearning's default, the rows) must
    # carry the one that trained them. No model is trained: the stage returns a folder name.
    from dataclasses import replace
    from types import SimpleNamespace

    from forgetbench.study.corpus_models import corpus_models
    from forgetbench.train import corpus_stages
    from forgetbench.train import mini as mini_training

    recipe = mini_training.mini_recipe
    monkeypatch.setattr(
        mini_training, "mini_recipe",
        lambda scale, seed=0: (r := recipe(scale, seed=seed))
        and replace(r, documents=replace(r.documents, lr=5e-4)),
    )  # fmt: skip
    monkeypatch.setattr(
        corpus_stages,
        "finetune_corpus",
        lambda *a, name, **k: SimpleNamespace(model_dir=Path(name)),
    )
    mini = SimpleNamespace(
        out=Path("run"), base=SimpleNamespace(model_dir=Path("base")), scale="tiny", seed=0,
        train=None, timings={}, template=None, max_length=64,
        finetune_loop=lambda: mini_training.mini_finetune_config("tiny")[0],
    )  # fmt: skip
    bench = SimpleNamespace(
        name="muse", finetune_texts=lambda d: [], retain_model_texts=lambda d: [],
        forget_sets=("news",), unlearn_preset="muse", eval_layout="muse", pretrained=None,
        sets=lambda d: {"news": None}, chosen_sets=lambda d, c: {"news": None},
    )  # fmt: skip
    study = corpus_models(load_config(), bench, Path("data"), mini, progress=False)
    assert study.finetune_lr == 5e-4 == study.finetune_loop.lr
    assert finetune_settings(study)["settings/finetune_batch_size"] == 4  # the documents' batch
