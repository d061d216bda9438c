"""Method plugins: a file or module of the user's registers a method, which the config accepts by
name with its options checked; every way a plugin can be wrong is one sentence naming its file;
the unlearning run's cache key follows the file's contents. (The plugin running in `unlearn` and
`run`, through worker processes and an installed package's entry point: tests/test_python_api.py.)"""

from __future__ import annotations

import textwrap
import traceback
from pathlib import Path

import pytest

from forgetbench.cli import main
from forgetbench.config import load_config
from forgetbench.errors import ConfigError, PluginError
from forgetbench.methods import plugins
from forgetbench.methods.base import METHODS, build_method
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.unlearn import unlearn_key

HEADER = """\
from dataclasses import dataclass
from typing import ClassVar

from forgetbench import UnlearnInputs, batch_nll, check_positive, register_method
"""


def method_file(name: str, *, decorator: str = "@dataclass(frozen=True)", needs: str = "",
                option: str = "scale: float = 1.0", extra: str = "") -> str:  # fmt: skip
    needs = needs or '{"forget_logps", "forget_mask"}'
    return HEADER + textwrap.dedent(f"""
        {extra}
        @register_method("{name}")
        {decorator}
        class Method:
            needs: ClassVar[frozenset[str]] = frozenset({needs})
            {option}

            def __post_init__(self):
                check_positive("{name}", "scale", self.scale)

            def required_inputs(self):
                return self.needs

            def loss(self, inputs: UnlearnInputs):
                nll = batch_nll(inputs.forget_logps, inputs.forget_mask, "tokens")
                return -self.scale * nll, {{"forget_nll": nll.item()}}
        """)


@pytest.fixture(autouse=True)
def _own_registry(monkeypatch):
    # Registrations stay in this test: a later test's default study runs every registered method.
    monkeypatch.setattr(METHODS, "_entries", dict(METHODS._entries))
    monkeypatch.setattr(plugins, "_loaded", {})
    monkeypatch.setattr(plugins, "_sources", {})


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _refusal(capsys, *argv: str) -> str:
    assert main(["config", *argv, "--json"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def test_a_plugin_method_is_accepted_by_name_with_its_options_checked(tmp_path, capsys):
    path = _write(tmp_path, "mine.py", method_file("plugged"))
    config = load_config(None, [f"plugins=[{path}]", "unlearn.method=plugged", "method.scale=2"])
    assert config.plugins == [str(path)] and config.unlearn.method == "plugged"
    assert build_method("plugged", config.method).scale == 2.0
    assert plugins.loaded_plugins() == (str(path.resolve()),)
    line = _refusal(capsys, "--plugin", str(path), "--method", "plugged", "method.scale=-1")
    assert line == "error: plugged.scale must be > 0, got -1.0"
    line = _refusal(capsys, "--plugin", str(path), "--method", "plugged", "method.scal=3")
    assert line.startswith("error: unknown option 'plugged.scal' (did you mean 'scale'?)")
    # Without the plugin the name is unknown, as any other.
    METHODS._entries.pop("plugged")
    line = _refusal(capsys, "--method", "plugged")
    assert line.startswith("error: --method: unknown method 'plugged'")


def test_a_config_file_lists_plugins(tmp_path, capsys):
    path = _write(tmp_path, "mine.py", method_file("from_yaml"))
    config = _write(
        tmp_path, "run.yaml", f"plugins: [{path}]\nstudy:\n  methods: [npo, from_yaml]\n"
    )
    assert main(["config", "--config", str(config), "--json"]) == 0
    shown = capsys.readouterr().out.strip().splitlines()[-1]
    assert '"methods": ["npo", "from_yaml"]' in shown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (method_file("npo"), "{file} registers method 'npo', the name of a built-in method — "
         "give it another name, e.g. 'my_npo'"),
        (method_file("bad_import", extra="import no_such_package_here"),
         "plugin {file} failed to import (line 6): ModuleNotFoundError: No module named "
         "'no_such_package_here'"),
        (HEADER + "def broken(:\n", "plugin {file} failed to import (line 5): SyntaxError: "),
        (method_file("thawed", decorator="@dataclass"), "{file}: method 'thawed' is a dataclass "
         "that is not frozen — use @dataclass(frozen=True)"),
        (method_file("undecorated", decorator=""), "{file}: method 'undecorated' is not a "
         "dataclass"),
        (method_file("typo", needs='{"forget_logp"}'), "{file}: method 'typo' needs "
         "'forget_logp', which is not an UnlearnInputs field (did you mean 'forget_logps'?)"),
        (method_file("no_default", option="scale: float"), "{file}: method 'no_default' option "
         "'scale' has no default — give every option a default"),
        (method_file("listy", option="scale: list = (1.0,)"), "{file}: method 'listy' option "
         "'scale' has type <class 'list'>"),
        (HEADER, "{file} registers no method — decorate its method class with "
         '@register_method("name")'),
        (HEADER + "import sys\nsys.exit(0)\n", "plugin {file} called sys.exit(0) while it was "
         "imported (line 6) — a plugin only defines and registers its methods"),
    ],
    ids=["builtin-name", "import-error", "syntax-error", "not-frozen", "not-a-dataclass",
         "unknown-input", "no-default", "list-option", "registers-nothing", "exits"],
)  # fmt: skip
def test_a_broken_plugin_is_one_sentence_naming_its_file(tmp_path, capsys, text, message):
    path = _write(tmp_path, "broken.py", text)
    line = _refusal(capsys, "--plugin", str(path))
    assert line.startswith("error: " + message.format(file=path.resolve())), line


def test_a_missing_plugin_file_or_module_is_named(tmp_path, capsys):
    line = _refusal(capsys, "--plugin", str(tmp_path / "nope.py"))
    assert line == (
        f"error: plugin file '{tmp_path / 'nope.py'}' (from --plugin) does not exist — give the "
        "path of your method's .py file"
    )
    line = _refusal(capsys, "--plugin", "no_such_plugin_module")
    assert line.startswith(
        "error: plugin 'no_such_plugin_module' (from --plugin) is neither a .py file nor an "
        "importable module"
    )


def test_two_plugins_of_one_name_are_refused(tmp_path, capsys):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    first = _write(tmp_path / "a", "mine.py", method_file("twice"))
    second = _write(tmp_path / "b", "mine.py", method_file("twice"))
    line = _refusal(capsys, "--plugin", str(first), "--plugin", str(second))
    assert line.startswith(
        f"error: {second} registers method 'twice', which {first} registered already"
    )


def test_editing_a_plugin_file_changes_its_runs_cache_key(tmp_path):
    path = _write(tmp_path, "mine.py", method_file("edited"))
    loop = LoopConfig(lr=1e-3, epochs=1, batch_size=4, per_device_batch_size=4)

    def key() -> str:
        plugins._loaded.clear()  # a new process: the file is imported afresh
        plugins.load_plugins([str(path)])
        return unlearn_key(build_method("edited"), loop, "parent", [])

    first = key()
    assert key() == first  # the same file, the same key: the run is reused
    path.write_text(path.read_text().replace("-self.scale * nll", "-self.scale * nll * 1.0"))
    edited = key()
    assert edited != first
    # Built-in methods' keys carry no source hash: their code is the forgetbench version's.
    assert plugins.method_source(METHODS.get("npo")) is None
    assert plugins.method_source(METHODS.get("edited")) is not None


def _installed(site: Path, module: str, text: str) -> None:
    """A distribution as importlib.metadata finds an installed one: a dist-info folder on the
    path declaring the entry point, beside the module it names."""
    info = site / f"{module}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[forgetbench.plugins]\nmine = {module}\n")
    (site / f"{module}.py").write_text(text)


def test_an_installed_entry_point_registers_its_method(tmp_path, monkeypatch):
    _installed(tmp_path, "fb_plugin_ok", method_file("from_package"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    assert plugins.load_entry_points() == ("from_package",)
    assert load_config(None, ["unlearn.method=from_package"]).unlearn.method == "from_package"
    assert plugins.load_entry_points() == ()  # once per process


def test_a_broken_entry_point_is_one_sentence_naming_it(tmp_path, monkeypatch):
    _installed(tmp_path, "fb_plugin_broken", method_file("npo"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_entry_points_loaded", False)
    with pytest.raises(ConfigError) as info:
        plugins.load_entry_points()
    assert info.value.what == (
        f"{tmp_path / 'fb_plugin_broken.py'} registers method 'npo', the name of a built-in method"
    )


def test_a_sweep_file_may_search_a_plugin_method(tmp_path, monkeypatch):
    # The sweep section is read after the config, whose plugins register the method it names;
    # the sweep itself (minutes of training) is replaced by a stand-in that records what it got.
    import forgetbench.study.sweep as sweep_module

    path = _write(tmp_path, "mine.py", method_file("swept"))
    sweep = _write(
        tmp_path,
        "sweep.yaml",
        f"plugins: [{path}]\nscale: tiny\n"
        "sweep:\n  methods:\n    swept: {method.scale: [1.0, 2.0]}\n",
    )
    got = {}

    def stand_in(config, spec, **kwargs):
        got.update(config=config, spec=spec)
        raise KeyboardInterrupt  # stop before the report: what was passed is what is tested

    monkeypatch.setattr(sweep_module, "run_sweep", stand_in)
    assert main(["sweep", "--config", str(sweep), "--out", str(tmp_path / "out")]) == 130
    assert list(got["spec"].methods) == ["swept"] and got["config"].plugins == [str(path)]


@pytest.mark.parametrize("where", ["flag", "config", "override"])
def test_help_lists_the_methods_of_the_plugins_the_command_line_names(tmp_path, capsys, where):
    text = '"""Listed: a plugin method shown by --help."""\n' + method_file("listed_here")
    path = _write(tmp_path, "mine.py", text)
    given = ["--plugin", str(path)]
    if where == "config":
        given = ["--config", str(_write(tmp_path, "run.yaml", f"plugins: [{path}]\n"))]
    if where == "override":
        given = [f"plugins=[{path}]"]
    # --help before the option that names the plugin: argparse stops at --help.
    for argv in (["run", "--help", *given], ["unlearn", *given, "-h"]):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert f"listed_here Listed: a plugin method shown by --help. (plugin: {path})" in text
    # Without the plugin the help lists the built-ins only.
    METHODS._entries.pop("listed_here")
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "listed_here" not in capsys.readouterr().out


# A plugin whose loss misbehaves at run time: `BODY` is the loss after the forget NLL.
RUNTIME = (
    HEADER
    + """
calls = []


@register_method("{name}")
@dataclass(frozen=True)
class Method:
    needs: ClassVar[frozenset[str]] = frozenset({{"forget_logps", "forget_mask"}})

    def required_inputs(self):
        return self.needs

    def loss(self, inputs: UnlearnInputs):
        calls.append(1)
        nll = batch_nll(inputs.forget_logps, inputs.forget_mask, "tokens")
        {body}
"""
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The miniature's data and an untrained tiny model (a second to make): a plugin's loss runs
    on it as on any model."""
    from transformers import AutoTokenizer

    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.modeling.builtin import build_tiny_model
    from forgetbench.modeling.loading import save_model
    from forgetbench.train.mini import build_tokenizer

    root = tmp_path_factory.mktemp("plugin-world")
    generate_mini(root / "data", scale="tiny", seed=0)
    tokenizer = AutoTokenizer.from_pretrained(build_tokenizer(root, root / "data", scale="tiny"))
    model = save_model(build_tiny_model(tokenizer, scale="tiny", seed=0), tokenizer, root / "m")
    return root / "data", model


def _unlearn(world, tmp_path, name, body, *more):
    path = _write(tmp_path, f"{name}.py", RUNTIME.format(name=name, body=body))
    data, model = world
    argv = ["unlearn", "--model", str(model), "--data", str(data), "--plugin", str(path),
            "--method", name, "--split", "forget01", "--out", str(tmp_path / "out"),
            "unlearn.batch_size=1", "unlearn.per_device_batch_size=1", "--no-progress", *more]  # fmt: skip
    return path, argv


def test_a_plugin_loss_that_raises_is_the_plugins_error_naming_its_step(world, tmp_path, capsys):
    body = 'if len(calls) == 3:\n            raise ValueError("boom")\n        return -nll, {}'
    path, argv = _unlearn(world, tmp_path, "boom_ascent", body)
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        f"error: plugin {path.resolve()}: method 'boom_ascent', step 3 (epoch 1): loss() raised "
        "ValueError: boom — fix the method (--debug shows its traceback); finished stages are kept"
    )
    # Nothing is recorded as done: the run folder holds no unlearn.json.
    assert not list((tmp_path / "out").rglob("unlearn.json"))
    # --debug: the plugin's own frame is the cause of our error.
    plugins._loaded.clear()
    with pytest.raises(PluginError) as info:
        main([*argv, "--debug"])
    frames = traceback.extract_tb(info.value.__cause__.__traceback__)
    assert (frames[-1].filename, frames[-1].name) == (str(path.resolve()), "loss")


@pytest.mark.parametrize(
    ("body", "broken"),
    [
        ("return -nll.item(), {}", "loss() returned float -"),
        ("return -nll, {'forget_nll': nll.reshape(1)}", "loss() returned a tensor of shape "
         "(1,) (torch.float32) for part 'forget_nll', not a float or a scalar float tensor"),
        ("return -nll", "loss() returned a tensor of shape () (torch.float32), not a tuple"),
    ],
    ids=["float-loss", "tensor-part", "no-parts"],
)  # fmt: skip
def test_a_plugin_loss_that_breaks_the_contract_is_one_sentence(
    world, tmp_path, capsys, body, broken
):
    path, argv = _unlearn(world, tmp_path, "off_contract", body)
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    head = f"error: plugin {path.resolve()}: method 'off_contract', step 1 (epoch 1): "
    assert line.startswith(head + broken), line
