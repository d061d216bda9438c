"""The methods whose step through the shared loop is not one loss's gradient, on the toy world
(seconds): NGDiff's two-task step (its GeN learning-rate gain, both tasks' gradients accumulated)
and PDU's dual variable carried across steps, each killed and resumed to the same weights."""

from __future__ import annotations

import json

import pytest
import torch

from forgetbench.methods.base import build_method
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.train.items import collate_items
from forgetbench.train.loop import train_loop
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.method_loss import MethodLoss
from forgetbench.train.two_task import TwoTaskStep
from toy import toy_plan, toy_tokenizer

# --- NGDiff through the shared loop ---------------------------------------------------------


def _train(method_name: str, out, *, lr: float, epochs: int, checkpoint_every: int = 0, **kw):
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    method = build_method(method_name, kw.pop("options", {}))
    plan = toy_plan(epochs=epochs)
    loss = MethodLoss(method)
    hook = TwoTaskStep(method, loss.inputs) if method_name == "ngdiff" else None
    config = LoopConfig(
        lr=lr,
        epochs=epochs,
        batch_size=kw.pop("batch_size", 2),
        per_device_batch_size=kw.pop("per_device_batch_size", 2),
        weight_decay=0.0,
        warmup_epochs=0.0,
        checkpoint_every=checkpoint_every,
    )
    result = train_loop(
        model,
        lambda epoch: plan[epoch],
        loss_fn=None if hook else loss,
        step_hook=hook,
        collate_fn=lambda b: collate_items(b, pad_id=tokenizer.pad_token_id),
        config=config,
        out_dir=out,
        progress=False,
        **kw,
    )
    return model, result


def _displacement(model) -> torch.Tensor:
    start = build_tiny_model(toy_tokenizer(), scale="tiny", seed=0).state_dict()
    return torch.cat([(p - start[n]).flatten() for n, p in model.state_dict().items()])


def test_one_ngdiff_step_at_llm_lr_moves_the_weights_as_far_as_adamw(tmp_path):
    # lr 1e-5 (TOFU's): AdamW moves every coordinate by ~lr on its first step. The old plain
    # step w - lr * d, |d| <= 2, could move the whole model by at most 2e-5 in L2 norm.
    lr = 1e-5

    def one_step(name):
        return _train(name, tmp_path / name, lr=lr, epochs=1, on_step=_stop_after(1))

    with pytest.raises(_Stop):
        one_step("ngdiff")
    ngdiff = json.loads((tmp_path / "ngdiff" / "train_log.jsonl").read_text().splitlines()[0])
    assert 0.95 <= ngdiff["lr_gain"] <= 1.1  # one GeN fit: at most 10% up, 5% down
    model = _last_model["model"]
    moved = _displacement(model)
    with pytest.raises(_Stop):
        one_step("grad_diff")
    reference = _displacement(_last_model["model"])
    assert moved.abs().max().item() == pytest.approx(lr, rel=0.15)
    assert moved.norm().item() > 100 * 2 * lr  # far beyond the old step's bound
    assert moved.norm().item() == pytest.approx(reference.norm().item(), rel=0.2)


def test_ngdiff_raises_the_forget_loss_and_lowers_the_retain_loss(tmp_path):
    _, result = _train("ngdiff", tmp_path, lr=3e-3, epochs=4)
    rows = [json.loads(line) for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert len(rows) == result.steps == 4 * 3
    assert rows[-1]["forget_nll"] > rows[0]["forget_nll"] + 0.5
    assert rows[-1]["retain_nll"] < rows[0]["retain_nll"]
    assert {"lr_gain", "forget_nll", "retain_nll", "lr"} <= set(rows[0])


def test_ngdiff_accumulates_both_task_gradients(tmp_path):
    # effective batch 6 = 3 micro-batches of 2: one optimizer step per epoch
    _, result = _train("ngdiff", tmp_path, lr=3e-3, epochs=2, batch_size=6, per_device_batch_size=2)
    assert result.steps == 2


def test_a_killed_ngdiff_run_resumes_to_the_same_weights(tmp_path):
    whole, _ = _train("ngdiff", tmp_path / "whole", lr=3e-3, epochs=3, checkpoint_every=1)
    with pytest.raises(_Stop):
        _train(
            "ngdiff",
            tmp_path / "killed",
            lr=3e-3,
            epochs=3,
            checkpoint_every=1,
            on_step=_stop_after(5),
        )
    state = json.loads((tmp_path / "killed" / "checkpoint" / "state.json").read_text())
    assert state["position"]["step"] == 5 and state["extra"]["gain"] != 1.0
    resumed, result = _train("ngdiff", tmp_path / "killed", lr=3e-3, epochs=3, checkpoint_every=1)
    assert result.steps == 9
    for name, tensor in whole.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[name], tensor, rtol=0, atol=0)
    logs = [
        [
            json.loads(line)["loss"]
            for line in (tmp_path / d / "train_log.jsonl").read_text().splitlines()
        ]
        for d in ("whole", "killed")
    ]
    assert logs[0] == logs[1]


class _Stop(Exception):
    pass


_last_model: dict = {}


def _stop_after(steps: int):
    def on_step(step, model):
        _last_model["model"] = model
        if step >= steps:
            raise _Stop

    return on_step


# --- A method with state across steps (PDU's dual variable) ----------------------------------


def _train_pdu(out, *, epochs: int = 3, on_step=None, batch_size: int = 2):
    from forgetbench.train.method_loss import StatefulMethodLoss

    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    # eps above the random model's retain NLL at first? No: far below, so lambda grows.
    method = build_method(
        "pdu",
        {"retain_weight": 1.0, "dual_step_size": 0.1, "retain_eps": 0.5, "dual_warmup_epochs": 1},
    )
    plan = toy_plan(epochs=epochs)
    result = train_loop(
        model,
        lambda epoch: plan[epoch],
        loss_fn=StatefulMethodLoss(method),
        collate_fn=lambda b: collate_items(b, pad_id=tokenizer.pad_token_id),
        config=LoopConfig(
            lr=3e-3, epochs=epochs, batch_size=batch_size, per_device_batch_size=2,
            weight_decay=0.0, warmup_epochs=0.0, checkpoint_every=1,
        ),
        out_dir=out,
        progress=False,
        on_step=on_step,
    )  # fmt: skip
    rows = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    return model, result, rows


def test_the_dual_variable_follows_the_retain_loss_from_the_log(tmp_path):
    _, result, rows = _train_pdu(tmp_path)
    assert len(rows) == result.steps == 9  # 6 forget questions, batch 2, 3 epochs
    duals = [r["dual"] for r in rows]  # the lambda each step used
    assert duals[:4] == [1.0] * 4  # warm-up epoch (steps 1-3) and the first step after it
    # from epoch 2 on: lambda_{k+1} = max(0, lambda_k + 0.1 * (retain NLL_k - 0.5)); one
    # micro-batch per step, so the update reads exactly the logged retain NLL
    for before, after in zip(rows[3:], rows[4:], strict=False):
        expected = max(0.0, before["dual"] + 0.1 * (before["retain_nll"] - 0.5))
        assert after["dual"] == pytest.approx(expected, rel=1e-6)
    assert duals[-1] > 1.0  # the random model's retain NLL is far above 0.5: lambda grows


def test_the_dual_update_averages_the_steps_micro_batches(tmp_path):
    # effective batch 6 = 3 micro-batches: one update per epoch from their mean retain NLL
    _, result, rows = _train_pdu(tmp_path, batch_size=6)
    assert result.steps == 3
    assert [r["dual"] for r in rows][:2] == [1.0, 1.0]
    assert rows[2]["dual"] > 1.0


def test_a_killed_pdu_run_resumes_with_its_dual_variable(tmp_path):
    whole, _, whole_rows = _train_pdu(tmp_path / "whole")
    with pytest.raises(_Stop):
        _train_pdu(tmp_path / "killed", on_step=_stop_after(6))
    state = json.loads((tmp_path / "killed" / "checkpoint" / "state.json").read_text())
    assert state["position"]["step"] == 6
    assert state["extra"]["method_state"]["dual"] == pytest.approx(whole_rows[6]["dual"])
    resumed, result, rows = _train_pdu(tmp_path / "killed")
    assert result.steps == 9
    assert [r["dual"] for r in rows] == [r["dual"] for r in whole_rows]
    for name, tensor in whole.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[name], tensor, rtol=0, atol=0)
