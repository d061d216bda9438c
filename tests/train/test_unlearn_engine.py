"""Issue 14: the unlearning engine's data draws and NGDiff's step, on the toy world (seconds)."""

from __future__ import annotations

import json

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods._terms import answer_token_logprobs
from forgetbench.methods.base import build_method
from forgetbench.methods.refusals import REFUSALS
from forgetbench.modeling import PromptTemplate, build_tiny_model, collate, forward_logits
from forgetbench.records import QARecord
from forgetbench.train.loop import LoopConfig, train_loop
from forgetbench.train.two_task import TwoTaskStep
from forgetbench.train.unlearn import (
    MethodLoss,
    build_items,
    collate_items,
    draw_pairings,
    with_reference_logps,
)
from toy import toy_qa, toy_tokenizer

TEMPLATE = PromptTemplate("question_answer")


def _split() -> tuple[list[QARecord], list[QARecord]]:
    records = [QARecord(q, a) for q, a in toy_qa()]
    return records[:6], records[6:]  # 6 forget, 10 retain


def _plan(*, seed: int = 0, epochs: int = 3, refusals: tuple[str, ...] = REFUSALS):
    forget, retain = _split()
    return build_items(
        forget,
        retain,
        toy_tokenizer(),
        TEMPLATE,
        refusals=refusals,
        seed=seed,
        max_length=128,  # the toy tokenizer spends ~1 token per character
        epochs=epochs,
    )


def _texts(items) -> list[tuple[list[int], list[int], list[int]]]:
    return [(i.forget.input_ids, i.retain.input_ids, i.refusal.input_ids) for i in items]


def test_partners_and_refusals_are_redrawn_every_epoch():
    # TOFU's TextForgetDatasetQA and open-unlearning's ForgetRetainDataset draw a fresh retain
    # partner (and TOFU a fresh refusal) on every access: two epochs pair differently.
    plan = _plan()
    assert len(plan) == 3 and all(len(items) == 6 for items in plan)
    first, second = _texts(plan[0]), _texts(plan[1])
    assert [f for f, _, _ in first] == [f for f, _, _ in second]  # the forget set, in order
    assert [r for _, r, _ in first] != [r for _, r, _ in second]  # retain partners redrawn
    assert [k for _, _, k in first] != [k for _, _, k in second]  # refusals redrawn
    # epoch 1's items are exactly draw_pairings(seed, epoch=1)'s retain records and refusals
    partners, answers = draw_pairings(6, 10, len(REFUSALS), seed=0, epoch=1)
    forget, retain = _split()
    decode = toy_tokenizer().decode
    for item, p, a in zip(plan[1], partners, answers, strict=True):
        assert retain[p].question in decode(item.retain.input_ids)
        assert REFUSALS[a] in decode(item.refusal.input_ids)
    # each distinct text is encoded once and shared between epochs
    assert plan[0][0].forget is plan[2][0].forget


def test_draws_are_a_function_of_seed_and_epoch():
    assert _texts(_plan(seed=0)[2]) == _texts(_plan(seed=0)[2])  # a rerun or a resume
    assert _texts(_plan(seed=0, epochs=1)[0]) == _texts(_plan(seed=0, epochs=5)[0])
    assert _texts(_plan(seed=0)[1]) != _texts(_plan(seed=1)[1])
    assert draw_pairings(6, 10, 100, seed=3, epoch=2) == draw_pairings(6, 10, 100, seed=3, epoch=2)
    assert draw_pairings(6, 10, 100, seed=3, epoch=2) != draw_pairings(6, 10, 100, seed=3, epoch=1)


def test_each_epochs_reference_logps_score_that_epochs_refusal():
    # NPO/DPO compare with the start model's log-prob of the very text each epoch trains on.
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    plan = with_reference_logps(
        model,
        _plan(epochs=2),
        pad_id=tokenizer.pad_token_id,
        fields={"ref_forget_logps", "ref_refusal_logps"},
        batch_size=4,
    )
    changed = 0
    with torch.no_grad():
        for items in plan:
            for item in items:
                for kind in ("forget", "refusal"):
                    encoded = getattr(item, kind)
                    batch = collate([encoded], pad_id=tokenizer.pad_token_id)
                    logps, _ = answer_token_logprobs(forward_logits(model, batch), batch["labels"])
                    torch.testing.assert_close(
                        torch.tensor(getattr(item, f"ref_{kind}_logps")),
                        logps[0, : len(encoded.input_ids) - 1],
                        rtol=1e-5,
                        atol=1e-5,
                    )
        for a, b in zip(plan[0], plan[1], strict=True):
            if a.refusal.input_ids != b.refusal.input_ids:
                changed += 1
                assert a.ref_refusal_logps != b.ref_refusal_logps
            assert a.ref_forget_logps == b.ref_forget_logps
    assert changed > 0
    batch = collate_items(plan[1][:3], pad_id=tokenizer.pad_token_id)
    width = batch["refusal"]["input_ids"].shape[1] - 1
    assert batch["ref_refusal_logps"].shape == (3, width)


# --- NGDiff through the shared loop ---------------------------------------------------------


def _train(method_name: str, out, *, lr: float, epochs: int, checkpoint_every: int = 0, **kw):
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    method = build_method(method_name, kw.pop("options", {}))
    plan = _plan(epochs=epochs)
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


# --- RMU presets and options in the engine --------------------------------------------------


def test_a_named_preset_replaces_the_models_tuned_values_but_keeps_its_layer():
    from forgetbench.config import load_config
    from forgetbench.study.unlearn import resolve_method
    from forgetbench.train.mini import mini_unlearn_defaults

    loop, options = mini_unlearn_defaults("rmu", layers=4)

    def resolved(*overrides):
        config = load_config(overrides=["unlearn.method=rmu", *overrides])
        return resolve_method(config, "rmu", loop, options)[1]

    tuned = resolved()  # the miniature's own values
    assert (tuned.layer, tuned.steering_coeff, tuned.alpha) == (2, 5.0, 10.0)
    zephyr = resolved("method.preset=wmdp_zephyr")
    assert (zephyr.layer, zephyr.update_layers) == (2, (1, 2))  # must exist in the model
    assert (zephyr.steering_coeff, zephyr.alpha) == (6.5, 1200.0)
    assert resolved("method.preset=wmdp_zephyr", "method.alpha=3").alpha == 3.0


def test_rmu_tokens_and_trainable_parameters_follow_the_options():
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    batch = collate_items(_plan(epochs=1)[0][:2], pad_id=tokenizer.pad_token_id)
    for tokens, expected in (
        ("all", batch["forget"]["attention_mask"].bool()),
        ("answer", batch["forget"]["labels"] != -100),  # open-unlearning's mask
    ):
        method = build_method("rmu", {"layer": 1, "update_layers": [0, 1], "tokens": tokens})
        constants = method.prepare(model)
        inputs = MethodLoss(method, frozen=model, constants=constants).inputs(model, batch)
        assert torch.equal(inputs.forget_hidden_mask, expected)
        assert torch.equal(inputs.control_vector, constants["control_vector"])
    build_method("rmu", {"layer": 1, "update_layers": [1]}).select_trainable(model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable == ["model.layers.1.mlp.down_proj.weight"]
    everything = build_method("rmu", {"preset": "open_unlearning_tofu", "layer": 1})
    model.requires_grad_(True)
    everything.select_trainable(model)
    assert all(p.requires_grad for p in model.parameters())


def test_a_method_that_selects_no_parameter_is_refused_by_name():
    model = build_tiny_model(toy_tokenizer(), scale="tiny", seed=0)
    beyond = build_method("rmu", {"layer": 40, "update_layers": [40]})  # the model has fewer
    with pytest.raises(ConfigError, match=r"rmu: no parameter matches update_layers=\[40\]"):
        beyond.select_trainable(model)
