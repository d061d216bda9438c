"""Models a user can hand to forgetbench that do not work: truncated or corrupt weights, a config
that needs remote code or names an unknown architecture, a folder without a tokenizer, a Hub id
that is not there (offline). Each command that takes `--model` refuses them at load, before any
training, in one line naming the model, exit 2, no traceback, and changes nothing it had written.
A model whose weights hold NaN is refused where its outputs are computed, with or without MIA.

Every model here is built from a config and saved (no training), then damaged."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from file_tree import snapshot
from forgetbench.cli import main
from forgetbench.errors import ModelError

# One split, a few questions, no generation-heavy tasks: an evaluation of a healthy tiny model
# takes a few seconds, so the NaN cases fail in the scoring, not on a timeout.
FAST_EVAL = [
    "--split",
    "forget01",
    "eval.max_questions=4",
    "eval.max_new_tokens=4",
    "eval.formats=false",
    "eval.lume=false",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The miniature's data and a healthy untrained tiny model with its tokenizer."""
    from transformers import AutoTokenizer

    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.modeling.builtin import build_tiny_model
    from forgetbench.modeling.loading import save_model
    from forgetbench.train.mini import build_tokenizer

    root = tmp_path_factory.mktemp("faults-models")
    data = root / "data"
    generate_mini(data, scale="tiny", seed=0)
    tokenizer = AutoTokenizer.from_pretrained(build_tokenizer(root, data, scale="tiny"))
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    good = save_model(model, tokenizer, root / "good")
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight[0, 0] = float("nan")
    nan = save_model(model, tokenizer, root / "nan")
    return {"root": root, "data": data, "good": good, "nan": nan}


def _copy(world: dict[str, Path], tmp: Path) -> Path:
    return Path(shutil.copytree(world["good"], tmp / "model"))


def _truncated_weights(world: dict[str, Path], tmp: Path) -> str:
    weights = _copy(world, tmp) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return str(weights.parent)


def _garbage_weights(world: dict[str, Path], tmp: Path) -> str:
    folder = _copy(world, tmp)
    (folder / "model.safetensors").write_bytes(b"<html>rate limited</html>\n")
    return str(folder)


def _edit_config(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _remote_code(world: dict[str, Path], tmp: Path) -> str:
    folder = _copy(world, tmp)
    _edit_config(
        folder,
        model_type="mystery_lm",
        architectures=["MysteryForCausalLM"],
        auto_map={
            "AutoConfig": "modeling_mystery.MysteryConfig",
            "AutoModelForCausalLM": "modeling_mystery.MysteryForCausalLM",
        },
    )
    return str(folder)


def _unknown_architecture(world: dict[str, Path], tmp: Path) -> str:
    folder = _copy(world, tmp)
    _edit_config(folder, model_type="mystery_lm", architectures=["MysteryForCausalLM"])
    return str(folder)


def _config_not_json(world: dict[str, Path], tmp: Path) -> str:
    folder = _copy(world, tmp)
    text = (folder / "config.json").read_text()
    (folder / "config.json").write_text(text[: len(text) // 2])
    return str(folder)


def _no_tokenizer(world: dict[str, Path], tmp: Path) -> str:
    folder = _copy(world, tmp)
    for path in folder.glob("tokenizer*"):
        path.unlink()
    return str(folder)


def _missing_folder(world: dict[str, Path], tmp: Path) -> str:
    return str(tmp / "no-such-model")


def _nonexistent_hub_id(world: dict[str, Path], tmp: Path) -> str:
    return "nonexistent"  # HF_HUB_OFFLINE=1 (conftest): not in the cache, no download


# damage -> (make the --model argument, words the error line must hold)
BAD_MODELS: dict[str, tuple[Callable[[dict[str, Path], Path], str], str]] = {
    "truncated safetensors": (_truncated_weights, "model.safetensors is truncated"),
    "garbage safetensors": (_garbage_weights, "model.safetensors is not a safetensors file"),
    "remote-code config": (_remote_code, "model.trust_remote_code=true"),
    "unknown architecture": (_unknown_architecture, "model_type 'mystery_lm'"),
    "config.json not JSON": (_config_not_json, "invalid JSON"),
    "no tokenizer": (_no_tokenizer, "has no tokenizer"),
    "missing folder": (_missing_folder, "does not exist"),
    "nonexistent hub id": (_nonexistent_hub_id, "HF_HUB_OFFLINE=1"),
}


def _argv(command: str, model: str, world: dict[str, Path], out: Path) -> list[str]:
    tofu = str(world["data"] / "tofu")
    if command == "eval":
        return [
            "eval",
            "--model",
            model,
            "--out",
            str(out),
            "--data",
            str(world["data"]),
            *FAST_EVAL,
        ]
    common = ["--model", model, "--out", str(out), "--no-progress"]
    if command == "unlearn":
        return ["unlearn", "--method", "npo", *common, "--data", tofu]
    if command == "finetune":
        return ["finetune", *common, "--data", tofu]
    return ["run", *common, "--data", str(world["data"])]


def _earlier_results(out: Path) -> None:
    (out / "earlier").mkdir(parents=True)
    (out / "earlier" / "results.json").write_text('{"scores": {"forget/rougeL": 0.5}}\n')


def _fails_cleanly(argv: list[str], capsys: pytest.CaptureFixture[str], words: str) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    assert words in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("command", ["eval", "unlearn", "finetune", "run"])
@pytest.mark.parametrize("damage", list(BAD_MODELS))
def test_a_model_that_cannot_load_is_one_line_at_load(
    command: str,
    damage: str,
    world: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A tripwire: the error must fire at load, before any training step.
    from forgetbench.train import stages, unlearn

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("training started with a model that does not load")

    monkeypatch.setattr(stages, "train_loop", no_training)
    monkeypatch.setattr(unlearn, "train_loop", no_training, raising=False)
    make, words = BAD_MODELS[damage]
    model = make(world, tmp_path)
    out = tmp_path / "out"
    _earlier_results(out)
    before = snapshot(out, Path(model), world["data"])
    line = _fails_cleanly(_argv(command, model, world, out), capsys, words)
    assert model in line  # names the model
    assert snapshot(out, Path(model), world["data"]) == before


@pytest.mark.parametrize("mia", ["true", "false"])
def test_nan_weights_are_refused_naming_the_model(
    mia: str, world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    _earlier_results(out)
    before = snapshot(out, world["nan"])
    argv = [
        "eval", "--model", str(world["nan"]), "--data", str(world["data"]), "--out", str(out),
        *FAST_EVAL, f"eval.mia={mia}",
    ]  # fmt: skip
    line = _fails_cleanly(argv, capsys, "produces non-finite log-probabilities (NaN)")
    assert str(world["nan"]) in line
    assert snapshot(out, world["nan"]) == before  # no NaN scores written


def test_the_healthy_model_evaluates(
    world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The control: the same world and options with the undamaged model exit 0."""
    argv = [
        "eval", "--model", str(world["good"]), "--data", str(world["data"]),
        "--out", str(tmp_path / "out"), *FAST_EVAL, "--json",
    ]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err


def test_eval_on_a_terminal_says_which_task_it_is_on(
    world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    argv = [
        "eval", "--model", str(world["good"]), "--data", str(world["data"]),
        "--out", str(tmp_path / "out"), *FAST_EVAL,
    ]  # fmt: skip
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(argv) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("eval forget01: task")]
    assert lines and lines[0].startswith("eval forget01: task 1/") and "s so far" in lines[-1]
    # Its result is a table, not JSON (--json gives that), and the miniature's files given as
    # --data without --benchmark are recorded as what they are: TOFU-layout data.
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert "{" not in out and f"candidate: {world['good']}" in out
    utility = f"{summary['scores']['model_utility']:.4g}"
    assert any("model_utility" in row and utility in row for row in out.splitlines())
    assert summary["benchmark"] == "tofu"


def test_a_remote_code_model_with_trust_gets_past_the_check(world, tmp_path) -> None:
    """With model.trust_remote_code=true the refusal is lifted; here the code file itself is
    missing, which is still one ModelError naming the model, not a traceback."""
    from forgetbench.modeling.loading import check_model_source, load_model

    model = _remote_code(world, tmp_path)
    check_model_source(model, trust_remote_code=True)
    with pytest.raises(ModelError, match="cannot load"):
        load_model(model, trust_remote_code=True)


@pytest.mark.parametrize(
    ("bad", "kind"), [(float("nan"), "NaN"), (float("inf"), "NaN"), (float("-inf"), "inf")]
)
def test_token_statistics_refuse_non_finite_log_probs(bad: float, kind: str) -> None:
    from forgetbench.eval.outputs.statistics import token_statistics

    logits = torch.zeros(2, 3, 5)  # (R, T, V)
    labels = torch.tensor([[1, 2, 3], [4, 0, 0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    token_statistics(logits, labels, mask)  # finite: fine
    logits[0, 1, 2] = bad  # the logit of a scored answer token
    with pytest.raises(ModelError, match=rf"produces non-finite log-probabilities \({kind}\)"):
        token_statistics(logits, labels, mask)
    # Damage outside the answer tokens (prompt or padding) is not scored and not an error.
    logits = torch.zeros(2, 3, 5)
    logits[1, 2, :] = float("nan")
    token_statistics(logits, labels, mask)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["eval.max_length=8"], "leaves no room for its answer within max_length=8 tokens"),
        (["eval.max_length=100000"], "eval.max_length=100000 is longer than the model's context"),
        # The case: a format's long prompt (a comprehension passage) was a ValueError
        # traceback; TOFU's questions and MIA fit in 200 tokens, the passages do not.
        (["eval.max_length=200", "eval.formats=true"], "within max_length=200 tokens"),
    ],
)
def test_eval_max_length_is_applied_or_refused_in_one_line(
    options: list[str], words: str, world: dict[str, Path], tmp_path: Path, capsys
) -> None:
    """eval.max_length reaches the scorers: too short for a prompt, or past the model's
    context, is one line, exit 2, and no summary; the control above runs with the default."""
    out = tmp_path / "out"
    # A setting in `options` replaces FAST_EVAL's: one setting is given once.
    fast = [
        o for o in FAST_EVAL if o.partition("=")[0] not in {x.partition("=")[0] for x in options}
    ]
    argv = [
        "eval", "--model", str(world["good"]), "--data", str(world["data"]), "--out", str(out),
        *fast, *options,
    ]  # fmt: skip
    _fails_cleanly(argv, capsys, words)
    assert not (out / "summary.json").exists()


def test_eval_max_length_reaches_every_scored_task(world: dict[str, Path]) -> None:
    """Set, eval.max_length bounds every scored text (TOFU's questions, MIA, the formats); unset,
    TOFU's questions keep the training length and the others 512, as before it existed."""
    from transformers import AutoTokenizer

    from forgetbench.config import load_config
    from forgetbench.eval.requests import Score
    from forgetbench.eval.runner import scored_length
    from forgetbench.eval.tasks import TASKS, EvalSetup
    from forgetbench.modeling.loading import load_model
    from forgetbench.train.mini import TEMPLATE

    model, _ = load_model(str(world["good"]))
    tokenizer = AutoTokenizer.from_pretrained(world["good"])

    def lengths(*overrides: str) -> dict[str, set[int | None]]:
        eval_config = load_config(None, list(overrides)).eval
        setup = EvalSetup(
            root=world["data"], tofu=world["data"] / "tofu", split="forget01", benchmark="mini",
            eval_config=eval_config, template=TEMPLATE, tokenizer=tokenizer,
            max_length=scored_length(model, eval_config, 96),
        )  # fmt: skip
        found: dict[str, set[int | None]] = {}
        for name in ("tofu", "mia", "formats"):
            task = TASKS.get(name)(setup)
            for subset, docs in task.subsets.items():
                for request in task.requests(subset, docs[0]):
                    if isinstance(request, Score):
                        found.setdefault(name, set()).add(request.max_length)
        return found

    assert lengths("eval.max_length=200") == {"tofu": {200}, "mia": {200}, "formats": {200}}
    assert lengths() == {"tofu": {96}, "mia": {512}, "formats": {512}}
