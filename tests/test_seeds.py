"""study.seeds and study.method_settings: what one method's run in a study reads."""

from __future__ import annotations

import re

import pytest

from forgetbench.cli import build_parser, parse_args, resolve_config
from forgetbench.config import load_config
from forgetbench.errors import ConfigError
from forgetbench.methods.base import build_method
from forgetbench.study.jobs import method_logs
from forgetbench.study.unlearn import method_config


def test_a_method_run_reads_its_settings_and_seed():
    config = load_config(
        overrides=[
            "unlearn.lr=1e-4",
            "study.method_settings={npo: {lr: 0.003, options: {beta: 0.2}}}",
            "study.seeds=[0,4]",
        ]
    )
    npo = method_config(config, "npo", seed=4)
    assert (npo.unlearn.lr, npo.method, npo.seed) == (0.003, {"beta": 0.2}, 4)
    # A method without settings keeps the study's own; no seed keeps the run's seed.
    plain = method_config(config, "grad_ascent")
    assert plain is config and plain.unlearn.lr == 1e-4 and plain.seed == 0


def test_seeded_runs_log_to_a_folder_per_seed(tmp_path):
    assert method_logs(tmp_path, "forget01", "npo", None) == tmp_path / "logs/forget01/npo"
    assert method_logs(tmp_path, "forget01", "npo", 2) == tmp_path / "logs/forget01/npo/seed-2"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("study.seeds=[1,1]", "study.seeds in command line repeats 1"),
        ("study.seeds=[-1]", "study.seeds.0"),
        ("study.method_settings={npo: {options: {betta: 1}}}", "study.method_settings.npo.options"),
        ("study.method_settings={npo: {lr: 2}}", "study.method_settings.npo.lr"),
        ("study.method_settings={nop: {lr: 0.1}}", "nop"),
    ],
)
def test_bad_seeds_and_settings_fail_naming_the_key(override, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_config(overrides=[override])


def test_a_study_option_reaches_each_of_its_methods_that_has_it():
    # retain_weight is idk's and dpo's, not grad_ascent's: rejection tuning beside the others.
    config = resolve_config(
        parse_args(
            build_parser(),
            [
                "run",
                "--methods",
                "grad_ascent,dpo,idk",
                "method.retain_weight=0",
                "study.method_settings={dpo: {options: {retain_weight: 0.5}}}",
            ],
        )
    )
    assert config.method == {"retain_weight": 0}
    runs = {name: method_config(config, name).method for name in config.study.methods}
    assert runs == {"grad_ascent": {}, "dpo": {"retain_weight": 0.5}, "idk": {"retain_weight": 0}}
    assert build_method("idk", runs["idk"]).retain_weight == 0.0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["method.retain_weight=0"],
            "method.retain_weight is an option of none of the study's methods (grad_ascent, kl)",
        ),
        (
            ["method.kl_wieght=0"],
            "unknown option 'method.kl_wieght' (did you mean 'kl_weight'?): "
            "none of the study's methods (grad_ascent, kl) has it",
        ),
        (["method.forget_weight=-1"], "forget_weight"),
    ],
)
def test_a_study_option_no_method_takes_is_refused_naming_the_methods(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        load_config(overrides=["study.methods=[grad_ascent,kl]", *overrides], study=True)
    if "none of" in message:
        assert "options of grad_ascent: forget_weight, loss_reduction" in caught.value.hint
