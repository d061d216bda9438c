"""Utility through lm-evaluation-harness, offline: a local multiple-choice task (YAML + JSONL
written to a temp folder) run on a tiny Llama saved with save_pretrained. Spies on lm-eval's HF
backend check that batch size, dtype and the chat template reach the model, not just the call."""

from __future__ import annotations

import copy
import importlib.util
import os
import socket
import sys

import pytest

from forgetbench.errors import ConfigError, DataError
from forgetbench.eval.lmeval import _unknown, lm_eval_utility
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.loading import save_model
from lm_eval_tasks import QUESTIONS, local_source, multiple_choice_task, write_questions
from toy import toy_tokenizer

HAVE_LM_EVAL = importlib.util.find_spec("lm_eval") is not None
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
# acc and acc_norm, each aggregated by the mean, higher better.
METRICS = """\
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
"""


@pytest.fixture
def lm_eval_installed():
    if not HAVE_LM_EVAL:
        reason = (
            "lm-eval is not installed (pip install 'forgetbench[lmeval]'; the dev extra has it)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"CI installs the dev extra, which includes lm-eval: {reason}")
        pytest.skip(reason)


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test: the offline path must not even try."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args[1:] or kwargs}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(chat model dir, base model dir, task folder): same weights, with and without a template."""
    root = tmp_path_factory.mktemp("lmeval")
    tokenizer = copy.deepcopy(toy_tokenizer())  # the toy tokenizer is cached: never mutate it
    model = build_tiny_model(tokenizer, seed=0)
    base = save_model(model, tokenizer, root / "base")
    tokenizer.chat_template = CHAT_TEMPLATE
    chat = save_model(model, tokenizer, root / "chat")
    tasks = root / "tasks"
    tasks.mkdir()
    local = local_source(write_questions(tasks / "facts.jsonl"))
    (tasks / "toy_facts_mc.yaml").write_text(multiple_choice_task("toy_facts_mc", local, METRICS))
    # The same task reading from the Hub (an id nobody has cached), as MMLU does.
    hub = "dataset_path: forgetbench-tests/no-such-dataset"
    (tasks / "hub_facts_mc.yaml").write_text(multiple_choice_task("hub_facts_mc", hub, METRICS))
    return chat, base, tasks


@pytest.fixture
def spy(monkeypatch):
    """Records what lm-eval's HFLM is built with, the batch shapes it runs, the chat calls."""
    from lm_eval.models.huggingface import HFLM

    seen: dict[str, list] = {"init": [], "shapes": [], "chat": []}
    init, call, chat = HFLM.__init__, HFLM._model_call, HFLM.apply_chat_template

    def spy_init(self, *args, **kwargs):
        seen["init"].append(kwargs)
        init(self, *args, **kwargs)

    def spy_call(self, inps, *args, **kwargs):
        seen["shapes"].append(tuple(inps.shape))
        return call(self, inps, *args, **kwargs)

    def spy_chat(self, chat_history, *args, **kwargs):
        rendered = chat(self, chat_history, *args, **kwargs)
        seen["chat"].append(rendered)
        return rendered

    monkeypatch.setattr(HFLM, "__init__", spy_init)
    monkeypatch.setattr(HFLM, "_model_call", spy_call)
    monkeypatch.setattr(HFLM, "apply_chat_template", spy_chat)
    return seen


def _accuracies_ok(scores: dict[str, float]) -> None:
    assert set(scores) == {"toy_facts_mc/acc", "toy_facts_mc/acc_norm"}
    assert all(0.0 <= v <= 1.0 for v in scores.values())
    # 5 questions: accuracy is a multiple of 1/5.
    assert scores["toy_facts_mc/acc"] * 5 == pytest.approx(round(scores["toy_facts_mc/acc"] * 5))


@pytest.mark.slow
@pytest.mark.usefixtures("lm_eval_installed", "no_network")
def test_local_task_with_chat_template_honours_batch_size(world, spy):
    chat, _, tasks = world
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_DATASETS_OFFLINE"] == "1"
    scores = lm_eval_utility(
        str(chat),
        ["toy_facts_mc"],
        batch_size=2,
        apply_chat_template=True,
        include_path=str(tasks),
        device="cpu",
    )
    _accuracies_ok(scores)
    (init,) = spy["init"]
    assert init["batch_size"] == 2 and init["dtype"] == "float32" and init["device"] == "cpu"
    assert init["pretrained"] == str(chat) and init["trust_remote_code"] is False
    # 5 questions x 4 choices = 20 requests (fewer rows where lm-eval's logits cache folds
    # one-token choices that share a prompt), run at most 2 rows per forward pass.
    rows = [s[0] for s in spy["shapes"]]
    assert max(rows) == 2 and 5 <= sum(rows) <= 20
    # Every question went through the tokenizer's chat template.
    assert len(spy["chat"]) == len(QUESTIONS)
    assert all(p.startswith("<|user|>Question: ") for p in spy["chat"])


@pytest.mark.slow
@pytest.mark.usefixtures("lm_eval_installed", "no_network")
def test_local_task_without_chat_template_with_limit(world, spy):
    _, base, tasks = world
    scores = lm_eval_utility(
        str(base),
        ["toy_facts_mc"],
        batch_size=3,
        apply_chat_template=False,
        limit=2,
        include_path=str(tasks),
        device="cpu",
    )
    assert set(scores) == {"toy_facts_mc/acc", "toy_facts_mc/acc_norm"}
    assert all(v in (0.0, 0.5, 1.0) for v in scores.values())  # 2 documents
    assert spy["init"][0]["batch_size"] == 3
    rows = [s[0] for s in spy["shapes"]]  # 2 documents x 4 choices = 8 requests
    assert max(rows) == 3 and 2 <= sum(rows) <= 8
    assert spy["chat"] == []


@pytest.mark.slow
@pytest.mark.usefixtures("lm_eval_installed", "no_network")
def test_hub_task_offline_is_one_line_data_error(world):
    _, base, tasks = world
    with pytest.raises(DataError, match="could not fetch a task's data") as err:
        lm_eval_utility(
            str(base),
            ["hub_facts_mc"],
            batch_size=1,
            apply_chat_template=False,
            include_path=str(tasks),
            device="cpu",
        )
    assert "\n" not in str(err.value) and "HF_DATASETS_OFFLINE" in str(err.value)


@pytest.mark.usefixtures("lm_eval_installed")
def test_chat_template_requested_but_missing_is_one_line_error(world):
    _, base, tasks = world
    with pytest.raises(ConfigError, match="has no chat template") as err:
        lm_eval_utility(
            str(base),
            ["toy_facts_mc"],
            batch_size=1,
            apply_chat_template=True,
            include_path=str(tasks),
        )
    assert "\n" not in str(err.value)


def test_missing_lm_eval_is_one_line_config_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # `import lm_eval` now raises ImportError
    with pytest.raises(ConfigError) as err:
        lm_eval_utility(str(tmp_path), ["mmlu"], batch_size=4, apply_chat_template=False)
    message = str(err.value)
    assert "\n" not in message
    assert "pip install 'forgetbench[lmeval]'" in message


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tasks": [], "batch_size": 1}, "no lm-eval tasks"),
        ({"tasks": ["mmlu"], "batch_size": 0}, "batch_size must be an integer >= 1 or auto, got 0"),
        ({"tasks": ["mmlu"], "batch_size": "big"}, "batch_size must be an integer >= 1 or auto"),
        ({"tasks": ["mmlu"], "batch_size": 1, "limit": 0}, "limit must be >= 1"),
        ({"tasks": ["mmlu"], "batch_size": 1, "dtype": "float33"}, "did you mean 'float32'"),
    ],
)
def test_bad_options_are_config_errors_before_anything_loads(tmp_path, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        lm_eval_utility(str(tmp_path), apply_chat_template=False, **kwargs)


def test_unknown_task_names(tmp_path):
    yaml_file = tmp_path / "mine.yaml"
    yaml_file.write_text("task: mine\n")
    known = ["mmlu", "mmlu_anatomy", "hellaswag"]
    assert _unknown(["mmlu", "mmlu_*", str(yaml_file)], known) == []
    assert _unknown(["mmlx", "arc_*"], known) == ["mmlx", "arc_*"]
