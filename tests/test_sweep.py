"""forgetbench sweep: grid and random expansion, selection on hand-made trial results, the
preset it writes, and the sweep file's errors."""

from __future__ import annotations

import math

import pytest
import yaml

from forgetbench.config import load_config
from forgetbench.errors import ConfigError
from forgetbench.study.sweep import (
    Range,
    SweepSpec,
    Trial,
    check_spec,
    expand,
    preset,
    read_spec,
    select,
    trial_config,
)


def _spec(**fields) -> SweepSpec:
    return SweepSpec.model_validate(fields)


def test_grid_is_the_product_in_key_order_per_method():
    spec = _spec(
        space={"unlearn.lr": [1e-4, 1e-3]},
        methods={"grad_ascent": None, "npo": {"method.beta": [0.1, 0.5, 1.0]}},
    )
    trials = expand(spec)
    # grad_ascent: 2 lrs; npo: 2 lrs x 3 betas = 6, the last key (beta) varying fastest.
    assert [(t.method, t.index) for t in trials[:3]] == [
        ("grad_ascent", 0),
        ("grad_ascent", 1),
        ("npo", 0),
    ]
    assert [t.settings for t in trials if t.method == "npo"] == [
        {"unlearn.lr": 1e-4, "method.beta": 0.1},
        {"unlearn.lr": 1e-4, "method.beta": 0.5},
        {"unlearn.lr": 1e-4, "method.beta": 1.0},
        {"unlearn.lr": 1e-3, "method.beta": 0.1},
        {"unlearn.lr": 1e-3, "method.beta": 0.5},
        {"unlearn.lr": 1e-3, "method.beta": 1.0},
    ]
    settings = trials[-1].method_settings()
    assert (settings.lr, settings.epochs, settings.options) == (1e-3, None, {"beta": 1.0})


def test_random_search_is_seeded_per_method_and_stays_in_range():
    space = {"unlearn.lr": Range(low=1e-5, high=1e-2, log=True), "unlearn.epochs": [1, 2, 3]}
    spec = _spec(search="random", trials=5, seed=7, space=space, methods={"npo": None})
    first = expand(spec)
    assert [t.settings for t in first] == [t.settings for t in expand(spec)]  # same seed
    assert len(first) == 5
    for trial in first:
        assert 1e-5 <= trial.settings["unlearn.lr"] <= 1e-2
        assert trial.settings["unlearn.epochs"] in (1, 2, 3)
    # Log-uniform draws span the decades: not all in the top one, as a plain uniform would be.
    assert len({math.floor(math.log10(t.settings["unlearn.lr"])) for t in first}) > 1
    other = expand(spec.model_copy(update={"seed": 8}))
    assert [t.settings for t in other] != [t.settings for t in first]
    # Adding a method does not change npo's draws.
    both = expand(spec.model_copy(update={"methods": {"grad_ascent": None, "npo": None}}))
    assert [t.settings for t in both if t.method == "npo"] == [t.settings for t in first]
    # Integer bounds without log draw integers.
    ints = expand(
        _spec(search="random", trials=4, methods={"npo": {"unlearn.epochs": Range(low=1, high=3)}})
    )
    assert all(t.settings["unlearn.epochs"] in (1, 2, 3) for t in ints)


def _rows(method, trial, *steps):
    # (seed, step, forget quality, utility) per row.
    return [
        {"split": "forget05", "method": method, "seed": seed, "step": step, "trial": trial,
         "forget_quality": q, "model_utility": u}
        for seed, step, q, u in steps
    ]  # fmt: skip


def test_selection_is_the_matched_utility_rule_over_every_trial_step():
    # Finetuned utility 0.5: the bar is 0.9 x 0.5 = 0.45.
    trial_rows = {
        # Trial 0: best forget quality of all (0.9) but utility 0.40 < 0.45; its step 1 passes.
        ("npo", 0): _rows("npo", 0, (0, 1, 0.01, 0.50), (0, 2, 0.9, 0.40)),
        # Trial 1, two seeds: step 1 log10 quality mean (-1 + -3) / 2 = -2 -> 0.01, utility 0.47;
        # step 2 quality mean (-1 + -1)/2 -> 0.1, utility (0.46 + 0.44) / 2 = 0.45, on the bar.
        ("npo", 1): _rows(
            "npo", 1, (0, 1, 0.1, 0.48), (1, 1, 0.001, 0.46), (0, 2, 0.1, 0.46), (1, 2, 0.1, 0.44)
        ),
        # Trial 2: 0.1 too, at step 2: a tie with trial 1's step 2 goes to the earlier trial.
        ("npo", 2): _rows("npo", 2, (0, 1, 1e-6, 0.5), (0, 2, 0.1, 0.49)),
        # grad_ascent never keeps the utility: its highest-utility step, flagged.
        ("grad_ascent", 0): _rows("grad_ascent", 0, (0, 1, 0.5, 0.30), (0, 2, 0.9, 0.20)),
        ("grad_ascent", 1): _rows("grad_ascent", 1, (0, 1, 0.2, 0.40)),
    }
    chosen = select(trial_rows, 0.5)
    npo = chosen["npo"]
    assert (npo["trial"], npo["step"], npo["matched"]) == (1, 2, True)
    assert npo["forget_quality"] == pytest.approx(0.1)
    assert npo["model_utility"] == pytest.approx(0.45)
    ga = chosen["grad_ascent"]
    assert (ga["trial"], ga["step"], ga["matched"]) == (1, 1, False)
    assert "0.9 x the finetuned utility" in ga["note"]
    # Without a finetuned utility the highest forget quality wins, flagged.
    assert select(trial_rows, None)["npo"]["trial"] == 0


def test_the_preset_is_a_run_config_with_each_methods_selection(tmp_path):
    spec = _spec(
        seeds=[0, 1],
        space={"unlearn.lr": [1e-4, 1e-3]},
        methods={"npo": {"method.beta": [0.2]}, "grad_ascent": None},
    )
    config = load_config(overrides=["scale=tiny", "unlearn.epochs=2", "out=somewhere"])
    trials = expand(spec)
    chosen = {"npo": {"trial": 1}, "grad_ascent": {"trial": 0}}
    text = preset(config, spec, trials, chosen)
    path = tmp_path / "selected.yaml"
    path.write_text(text)
    data = yaml.safe_load(text)
    assert "out" not in data and data["scale"] == "tiny" and data["unlearn"] == {"epochs": 2}
    assert data["study"]["splits"] == ["forget10"]
    assert data["study"]["seeds"] == [0, 1]
    # One seed, the run's own: the preset leaves study.seeds unset (rows without `seed`).
    single = yaml.safe_load(preset(config, _spec(methods={"npo": None}), trials, {}))
    assert "seeds" not in single["study"]
    other = yaml.safe_load(preset(config, _spec(methods={"npo": None}, seeds=[3]), trials, {}))
    assert other["study"]["seeds"] == [3]
    loaded = load_config(path)
    settings = loaded.study.method_settings
    assert (settings["npo"].lr, settings["npo"].options) == (1e-3, {"beta": 0.2})
    assert settings["grad_ascent"].lr == 1e-4
    assert loaded.study.methods == ["npo", "grad_ascent"]


def test_a_trial_config_is_checked_like_a_run():
    config = load_config()
    good = trial_config(config, Trial("npo", 0, {"unlearn.lr": 1e-3, "method.beta": 0.3}))
    assert good.study.method_settings["npo"].options == {"beta": 0.3}
    with pytest.raises(ConfigError, match="betta"):
        trial_config(config, Trial("npo", 0, {"method.betta": 0.3}))
    # A value out of range is the config's one-sentence error, as in a run, not pydantic's.
    with pytest.raises(ConfigError, match=r"study\.method_settings\.npo\.lr=nan .*finite"):
        trial_config(config, Trial("npo", 0, {"unlearn.lr": math.nan}))


def test_a_range_bound_must_be_finite(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "sweep:\n  search: random\n  trials: 2\n  methods:\n"
        "    npo: {unlearn.lr: {low: 1.0e-4, high: .inf, log: true}}\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"invalid sweep\.methods\.npo\.unlearn\.lr\.high: "
        "input should be a finite number",
    ):
        read_spec(path)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"select_split": "forget10"}, "both forget10"),
        ({"search": "random"}, "needs sweep.trials"),
        ({"space": {"train.lr": [1]}}, "'train.lr' .* is not one a trial can set"),
        ({"space": {"unlearn.lr": {"low": 1e-4, "high": 1e-3}}}, "grid search needs a list"),
        ({"space": {"unlearn.lr": []}}, "has no values"),
        ({"seeds": [1, 1]}, "distinct seeds"),
        ({"trials": 3}, "sweep.trials is for random search"),
        ({"space": {"unlearn.lr": [math.nan]}}, "sweep value unlearn.lr=nan"),
        ({"space": {"unlearn.epochs": [2, 0]}}, "sweep value unlearn.epochs=0"),
        (
            {"search": "random", "trials": 2, "space": {"unlearn.lr": {"low": 0.1, "high": 2}}},
            "sweep value unlearn.lr=2.0",
        ),
    ],
)
def test_bad_sweeps_fail_with_one_sentence(fields, message):
    spec = _spec(**{"methods": {"npo": None}, **fields})
    with pytest.raises(ConfigError, match=message):
        check_spec(spec, "sweep.yaml")


def test_a_sweep_file_without_a_sweep_section_or_with_a_typo_fails(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("scale: tiny\n")
    with pytest.raises(ConfigError, match="has no 'sweep' section"):
        read_spec(path)
    path.write_text("sweep:\n  methods: {npo: null}\n  serch: grid\n")
    with pytest.raises(ConfigError, match=r"invalid sweep\.serch"):
        read_spec(path)
    path.write_text("sweep:\n  methods: {nop: null}\n")
    with pytest.raises(ConfigError, match="unknown method nop"):
        read_spec(path)


def test_the_sweep_report_plots_each_method_and_marks_the_selected_trial():
    from forgetbench.report.sweep import render_sweep

    def trial(index, quality, utility):
        chosen = {"step": 5, "forget_quality": quality, "model_utility": utility, "matched": True}
        return {
            "method": "npo",
            "trial": index,
            "settings": {"unlearn.lr": index},
            "chosen": chosen,
        }

    result = {
        "search": "grid",
        "seeds": [0],
        "select_split": "forget05",
        "report_split": "forget10",
        "references": {"finetuned": {"forget_quality": 1e-5, "model_utility": 0.5}},
        "trials": [trial(0, 0.01, 0.48), trial(1, 0.2, 0.47)],
        "selected": {"npo": {"trial": 1}},
    }
    page = render_sweep(result)
    assert page.count("<svg") == 1
    assert "Model utility" in page and "Forget quality (KS p-value, log scale)" in page
    rows = page.split("<tr")[2:]
    assert "(selected)" not in rows[0] and "(selected)" in rows[1]
    assert render_sweep(result) == page  # deterministic
    # A sweep whose finetuned model is not told apart from the retain model says so first.
    from forgetbench.validity import check_validity

    references = [
        {"split": "forget05", "method": "finetuned", "forget_quality": 0.6, "model_utility": 0.5,
         "forget/rougeL": 0.9},
        {"split": "forget05", "method": "retain", "forget_quality": 1.0, "forget/rougeL": 0.4},
    ]  # fmt: skip
    page = render_sweep({**result, "validity": check_validity(references)})
    assert "This study cannot rank methods" in page
    assert "forget05: the finetuned model&#39;s forget quality is 0.6" in page
    assert page.index("cannot rank") < page.index("<svg")


def test_a_method_option_of_the_sweep_reaches_the_methods_that_have_it():
    # method.beta on a sweep of npo and grad_ascent is npo's (grad_ascent has no beta), as in a
    # study; it is refused only when none of the sweep's methods has it.
    config = load_config(overrides=["method.beta=0.3"], study=True)
    for method in ("npo", "grad_ascent"):
        trial = trial_config(config, Trial(method, 0, {}), ["npo", "grad_ascent"])
        assert trial.method == {"beta": 0.3}
    with pytest.raises(ConfigError, match=r"method.beta is an option of none of the study's"):
        trial_config(config, Trial("grad_ascent", 0, {}), ["grad_ascent"])


def test_the_sweep_command_refuses_what_it_does_not_read(tmp_path, capsys):
    from forgetbench.cli import main

    path = tmp_path / "sweep.yaml"
    path.write_text("sweep:\n  methods: {npo: null}\n")
    assert main(["sweep", "--out", str(tmp_path / "o")]) == 2
    assert "forgetbench sweep: the following arguments are required: --config" in (
        capsys.readouterr().err
    )
    assert (
        main(["sweep", "--config", str(path), "--out", str(tmp_path / "o"), "--splits", "forget01"])
        == 2
    )
    assert "does not use --splits" in capsys.readouterr().err
    args = ["sweep", "--config", str(path), "--out", str(tmp_path / "o"), "--address", "x:1"]
    assert main(args) == 2
    assert "does not use --address: it is for --executor ray" in capsys.readouterr().err
    # A method option on the command line is the sweep's methods', not unlearn.method's
    # (grad_ascent has no beta): the command reads its config and stops at the next check.
    args = ["sweep", "--config", str(path), "--out", str(tmp_path / "o"), "method.beta=0.3"]
    assert main([*args, "model.name=/nonexistent"]) == 2
    assert "needs both --model and --data" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--cpus-per-trial", "2"], "--executor process does not use --cpus-per-trial"),
        (["--gpus-per-trial", "0"], "--executor process does not use --gpus-per-trial"),
        (["--executor", "ray", "--cpus-per-trial", "-1"], "--cpus-per-trial -1: a trial needs"),
        (["--executor", "ray", "--cpus-per-trial", "0"], "--cpus-per-trial 0: a trial needs"),
        (["--executor", "ray", "--cpus-per-trial", "nan"], "--cpus-per-trial nan: a trial"),
        (["--executor", "ray", "--gpus-per-trial", "-0.5"], "--gpus-per-trial -0.5: a trial"),
    ],
)
def test_executor_options_are_checked_before_any_work(
    tmp_path, capsys, monkeypatch, options, message
):
    from forgetbench.cli import main

    def tripwire(*args, **kwargs):
        raise AssertionError("the sweep started before its executor options were checked")

    monkeypatch.setattr("forgetbench.study.sweep.run_sweep", tripwire)
    monkeypatch.setattr("forgetbench.study.sweep.read_spec", tripwire)
    path = tmp_path / "sweep.yaml"
    path.write_text("sweep:\n  methods: {npo: null}\n")
    code = main(["sweep", "--config", str(path), "--out", str(tmp_path / "o"), *options])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert message in err


def test_a_nan_learning_rate_in_a_sweep_file_is_one_sentence(tmp_path, capsys):
    from forgetbench.cli import main

    path = tmp_path / "sweep.yaml"
    for values, shown in (
        ("[.nan]", "unlearn.lr=nan (npo): input should be a finite number"),
        ("[1.0e-3, 2.0]", "unlearn.lr=2.0 (npo): input should be less than or equal to 1"),
    ):
        path.write_text(f"scale: tiny\nsweep:\n  methods:\n    npo: {{unlearn.lr: {values}}}\n")
        code = main(["sweep", "--config", str(path), "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert f"error: {path}: sweep value {shown}" in err
    assert not (tmp_path / "o" / "models").exists()
