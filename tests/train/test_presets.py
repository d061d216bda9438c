"""The per-setup unlearning defaults, now YAML presets, give the numbers the Python tables gave
(the tiny study's golden results depend on them to 1e-6)."""

from dataclasses import asdict

import pytest

from forgetbench.errors import UnknownNameError
from forgetbench.methods import method_names
from forgetbench.study.unlearn import external_unlearn_defaults
from forgetbench.train.loop import LoopConfig
from forgetbench.train.mini import mini_unlearn_defaults
from forgetbench.train.presets import unlearn_preset

MINI = LoopConfig(lr=1e-3, epochs=5, batch_size=4, per_device_batch_size=4, weight_decay=0.0)


# Issue 20's methods' tuned miniature options (the values and what was measured are in the preset).
TUNED = {
    "satimp": {"forget_weight": 3.0},
    "ce_u": {"retain_weight": 1.0},
    "undial": {"retain_weight": 1.0},
    "pdu": {"retain_eps": 0.05, "dual_step_size": 10.0, "dual_warmup_epochs": 1},
}


@pytest.mark.parametrize("method", method_names())
def test_the_miniature_preset_is_the_old_table(method):
    loop, options = mini_unlearn_defaults(method, layers=4)
    if method != "rmu":
        assert (loop, options) == (MINI, TUNED.get(method, {}))
        return
    assert asdict(loop) == {**asdict(MINI), "lr": 1e-2}
    assert options == {"layer": 2, "update_layers": (1, 2), "steering_coeff": 5.0, "alpha": 10.0}
    assert all(type(options[k]) is float for k in ("steering_coeff", "alpha"))


def test_rmu_steers_the_middle_block_of_any_depth():
    assert mini_unlearn_defaults("rmu", layers=8)[1]["update_layers"] == (3, 4)
    assert mini_unlearn_defaults("rmu", layers=1)[1]["update_layers"] == (0,)


def test_the_tofu_preset_is_tofus_recipe():
    loop = LoopConfig(lr=1e-5, epochs=5, batch_size=32, per_device_batch_size=4, weight_decay=0.01)
    assert external_unlearn_defaults() == (loop, {})
    assert unlearn_preset("tofu", "npo") == (loop, {})


def test_an_unknown_preset_names_the_known_ones():
    with pytest.raises(UnknownNameError, match="unknown preset 'mnii'; did you mean 'mini'"):
        unlearn_preset("mnii", "npo")


def test_the_miniature_study_evaluates_with_its_eval_preset_under_the_users_settings():
    from forgetbench.config import load_config
    from forgetbench.study.run import with_setup_defaults

    config = load_config(None, ["eval.batch_size=8"])
    mini = with_setup_defaults(config, model=None, data=None).eval
    assert (mini.max_new_tokens, mini.lume_max_new_tokens, mini.batch_size) == (48, 48, 8)
    given = with_setup_defaults(config, model="some/model", data="some/data").eval
    assert (given.max_new_tokens, given.lume_max_new_tokens, given.batch_size) == (200, 256, 8)
