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
