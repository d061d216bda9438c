import pytest

from forgetbench.config import load_config
from forgetbench.errors import ConfigError


def test_defaults_then_yaml_then_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("seed: 3\ntrain:\n  lr: 2.0e-5\nunlearn:\n  method: npo\n")
    config = load_config(path, ["train.lr=3e-5", "eval.truth_ratio_form=paper"])
    assert config.seed == 3
    assert config.train.lr == 3e-5
    assert config.unlearn.method == "npo"
    assert config.eval.truth_ratio_form == "paper"
    assert config.train.epochs == 5  # untouched default


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "train.lrr=1e-5",
            "unknown config key 'train.lrr' in command line (did you mean 'train.lr'?)",
        ),
        ("trian.lr=1e-5", "unknown config key 'trian' in command line (did you mean 'train'?)"),
        (
            "unlearn.method=nop",
            "invalid value unlearn.method='nop' in command line (did you mean 'npo'?)",
        ),
        ("scale=huge", "invalid value scale='huge'"),
        (
            "train.lr=-1",
            "invalid value train.lr=-1 in command line: input should be greater than 0",
        ),
        ("train.epochs=0", "train.epochs=0"),
        ("train.lr", "not of the form key=value"),
    ],
)
def test_bad_overrides_are_one_line_errors(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: [1,\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(broken)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("model:\n  nmae: x\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'model.nmae' in .*unknown.yaml"):
        load_config(unknown)


def _float_keys() -> list[str]:
    from forgetbench.config import RunConfig
    from forgetbench.options.reference import _fields

    return [key for key, info in _fields(RunConfig) if info.annotation in (float, float | None)]


def test_the_config_has_float_keys_to_check():
    # The test below covers every float key; it would pass vacuously on none.
    assert {"train.warmup_epochs", "eval.mia_rmia_gamma", "attack.relearn_lr"} <= set(_float_keys())


@pytest.mark.parametrize("key", _float_keys())
@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "inf"])
def test_every_float_key_refuses_infinity_and_nan(key, value):
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"{key}={value}"])
    assert f"invalid value {key}=" in str(info.value)
    assert "finite number" in str(info.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("out=", "out in command line is empty"),
        ("model.name=", "model.name in command line is empty"),
        ("benchmark.path=", "benchmark.path in command line is empty"),
        ("unlearn.refusals_file=", "unlearn.refusals_file in command line is empty"),
        ("study.retain_logs={forget10: ''}", "study.retain_logs.forget10 in command line is empty"),
        ("study.methods=[]", "study.methods in command line is empty"),
        ("study.splits=[]", "study.splits in command line is empty"),
    ],
)
def test_empty_names_paths_and_lists_are_refused(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("study.methods=[npo, rmu, npo]", "study.methods in command line repeats 'npo'"),
        ("study.splits=[forget05, forget05]", "study.splits in command line repeats 'forget05'"),
        ("study.attacks=[quantize, quantize]", "study.attacks in command line repeats 'quantize'"),
        ("attack.quantize=[int8, int8]", "attack.quantize in command line repeats 'int8'"),
        ("eval.lm_eval_tasks=[mmlu, mmlu]", "eval.lm_eval_tasks in command line repeats 'mmlu'"),
    ],
)
def test_repeated_list_items_are_refused(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert message in str(info.value)


def test_a_method_option_list_is_the_methods_to_check():
    # Method options are free-form (a method may take a list with repeats); the config checks
    # its own lists only.
    from forgetbench.config import _lists

    config = load_config(None, ["study.method_settings={npo: {options: {beta: 0.2}}}"])
    assert sorted(key for key, _ in _lists(config, "")) == [
        "attack.quantize",
        "eval.lm_eval_tasks",
        "plugins",
        "study.attacks",
        "study.methods",
        "study.seeds",
        "study.sequence",
        "study.splits",
        "study.unlearn_formats",
    ]


@pytest.mark.parametrize("shadows", [0, 2, 64])
def test_mia_shadows_zero_or_at_least_two_are_accepted(shadows):
    assert load_config(None, [f"eval.mia_shadows={shadows}"]).eval.mia_shadows == shadows


def test_one_mia_shadow_is_refused_with_the_config():
    with pytest.raises(ConfigError) as info:
        load_config(None, ["eval.mia_shadows=1"])
    assert "eval.mia_shadows=1" in str(info.value)
    assert "needs 0 (no shadow attacks) or at least 2: LiRA and RMIA" in str(info.value)


def test_a_key_given_twice_in_a_config_file_names_the_key_and_lines(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("scale: tiny\ntrain:\n  lr: 0.001\neval:\n  mia: false\ntrain:\n  epochs: 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(
        f"{path} line 6: key 'train' is given twice (first on line 2)"
    )
    nested = tmp_path / "nested.yaml"
    nested.write_text("train:\n  lr: 0.001\n  epochs: 2\n  lr: 0.01\n")
    with pytest.raises(ConfigError, match="line 4: key 'lr' is given twice"):
        load_config(nested)


def test_a_sweep_file_with_a_key_given_twice_is_refused(tmp_path):
    from forgetbench.study.sweep import read_spec

    path = tmp_path / "sweep.yaml"
    path.write_text("sweep:\n  methods:\n    npo: {unlearn.lr: [1.0e-3]}\n    npo: null\n")
    with pytest.raises(ConfigError, match="line 4: key 'npo' is given twice"):
        read_spec(path)


def test_a_key_given_twice_in_an_override_is_refused():
    with pytest.raises(ConfigError, match="gives the key 'forget10' twice"):
        load_config(None, ["study.retain_logs={forget10: a, forget10: b}"])


def test_yaml_merge_keys_may_still_be_overridden(tmp_path):
    # `<<: *base` then a key of the base is an override YAML defines, not a repeat.
    merged = tmp_path / "merged.yaml"
    merged.write_text(
        "study:\n  method_settings:\n    npo: &s {lr: 0.001, epochs: 3}\n"
        "    rmu:\n      <<: *s\n      lr: 0.01\n"
    )
    settings = load_config(merged).study.method_settings
    assert (settings["rmu"].lr, settings["rmu"].epochs) == (0.01, 3)
