"""study.seeds and study.method_settings: what one method's run in a study reads."""

from __future__ import annotations

import pytest

from forgetbench.config import load_config
from forgetbench.errors import ConfigError
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
