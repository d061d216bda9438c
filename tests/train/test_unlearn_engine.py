"""The unlearning engine's data draws (partners, refusals and alternates redrawn per epoch, the
reference log-probs that score them) and the inputs a method reads (RMU's tokens and trainable
parameters, presets), on the toy world (seconds). The steps that are not one loss's gradient
(NGDiff, PDU) are tests/train/test_method_steps.py."""

from __future__ import annotations

import json

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods._terms import answer_token_logprobs
from forgetbench.methods.base import build_method
from forgetbench.methods.refusals import REFUSALS
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.encoding import collate
from forgetbench.modeling.forward import forward_logits
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import QARecord
from forgetbench.train.items import (
    build_items,
    collate_items,
    draw_pairings,
    with_reference_logps,
)
from forgetbench.train.loop_config import LoopConfig
from forgetbench.train.method_loss import MethodLoss
from toy import toy_plan, toy_qa, toy_split, toy_tokenizer

TEMPLATE = PromptTemplate("question_answer")


def _texts(items) -> list[tuple[list[int], list[int], list[int]]]:
    return [(i.forget.input_ids, i.retain.input_ids, i.refusal.input_ids) for i in items]


def test_partners_and_refusals_are_redrawn_every_epoch():
    # TOFU's TextForgetDatasetQA and open-unlearning's ForgetRetainDataset draw a fresh retain
    # partner (and TOFU a fresh refusal) on every access: two epochs pair differently.
    plan = toy_plan()
    assert len(plan) == 3 and all(len(items) == 6 for items in plan)
    first, second = _texts(plan[0]), _texts(plan[1])
    assert [f for f, _, _ in first] == [f for f, _, _ in second]  # the forget set, in order
    assert [r for _, r, _ in first] != [r for _, r, _ in second]  # retain partners redrawn
    assert [k for _, _, k in first] != [k for _, _, k in second]  # refusals redrawn
    # epoch 1's items are exactly draw_pairings(seed, epoch=1)'s retain records and refusals
    partners, answers = draw_pairings(6, 10, len(REFUSALS), seed=0, epoch=1)
    forget, retain = toy_split()
    decode = toy_tokenizer().decode
    for item, p, a in zip(plan[1], partners, answers, strict=True):
        assert retain[p].question in decode(item.retain.input_ids)
        assert REFUSALS[a] in decode(item.refusal.input_ids)
    # each distinct text is encoded once and shared between epochs
    assert plan[0][0].forget is plan[2][0].forget


def test_draws_are_a_function_of_seed_and_epoch():
    assert _texts(toy_plan(seed=0)[2]) == _texts(toy_plan(seed=0)[2])  # a rerun or a resume
    assert _texts(toy_plan(seed=0, epochs=1)[0]) == _texts(toy_plan(seed=0, epochs=5)[0])
    assert _texts(toy_plan(seed=0)[1]) != _texts(toy_plan(seed=1)[1])
    assert draw_pairings(6, 10, 100, seed=3, epoch=2) == draw_pairings(6, 10, 100, seed=3, epoch=2)
    assert draw_pairings(6, 10, 100, seed=3, epoch=2) != draw_pairings(6, 10, 100, seed=3, epoch=1)


def test_each_epochs_reference_logps_score_that_epochs_refusal():
    # NPO/DPO compare with the start model's log-prob of the very text each epoch trains on.
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    plan = with_reference_logps(
        model,
        toy_plan(epochs=2),
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
    batch = collate_items(toy_plan(epochs=1)[0][:2], pad_id=tokenizer.pad_token_id)
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


# --- Alternate answers (altpo) and forget logits (ce_u, pdu, undial): inputs beyond log-probs --


def _with_alternates(records: list[QARecord]) -> list[QARecord]:
    # Three plausible-but-false answers per question: the answer with another city.
    return [
        QARecord(
            r.question,
            r.answer,
            perturbed_answers=tuple(
                r.answer.replace(r.answer.split()[-1], f"{c}.") for c in cities
            ),
            index=i,
        )
        for i, (r, cities) in enumerate(
            zip(records, [("Oslo", "Lima", "Riga")] * len(records), strict=True)
        )
    ]


def test_alternates_are_drawn_per_epoch_without_changing_any_other_draw():
    forget, retain = toy_split()
    forget = _with_alternates(forget)
    common = dict(refusals=REFUSALS, seed=0, max_length=128, epochs=3)
    plain = build_items(forget, retain, toy_tokenizer(), TEMPLATE, **common)
    with_alt = build_items(forget, retain, toy_tokenizer(), TEMPLATE, alternates=True, **common)
    assert all(i.alternate is None for e in plain for i in e)
    # the same forget texts, retain partners and refusals as without alternates
    assert [_texts(e) for e in plain] == [_texts(e) for e in with_alt]
    decoded = [
        [toy_tokenizer().decode(i.alternate.input_ids, skip_special_tokens=True) for i in e]
        for e in with_alt
    ]
    for epoch in decoded:
        for text, record in zip(epoch, forget, strict=True):
            assert any(text.endswith(a) for a in record.perturbed_answers), text
    assert decoded[0] != decoded[1]  # redrawn every epoch, from (seed, epoch)
    again = build_items(forget, retain, toy_tokenizer(), TEMPLATE, alternates=True, **common)
    assert [[i.alternate.input_ids for i in e] for e in again] == [
        [i.alternate.input_ids for i in e] for e in with_alt
    ]


def test_reference_logps_of_the_alternates_and_the_batch_fields_line_up():
    forget, retain = toy_split()
    plan = build_items(
        _with_alternates(forget), retain, toy_tokenizer(), TEMPLATE, refusals=REFUSALS, seed=0,
        max_length=128, epochs=1, alternates=True,
    )  # fmt: skip
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    plan = with_reference_logps(
        model,
        plan,
        pad_id=tokenizer.pad_token_id,
        fields={"ref_alternate_logps", "ref_forget_logps"},
    )
    batch = collate_items(plan[0][:3], pad_id=tokenizer.pad_token_id)
    inputs = MethodLoss(build_method("altpo")).inputs(model.eval(), batch)
    # the start model scores each alternate as the batch does
    torch.testing.assert_close(
        inputs.ref_alternate_logps * inputs.alternate_mask,
        inputs.alternate_logps.detach() * inputs.alternate_mask,
        rtol=1e-5,
        atol=1e-5,
    )


def test_forget_logits_are_shifted_like_the_forget_logps():
    forget, retain = toy_split()
    tokenizer = toy_tokenizer()
    model = build_tiny_model(tokenizer, scale="tiny", seed=0).eval()
    frozen = build_tiny_model(tokenizer, scale="tiny", seed=1).eval()
    plan = build_items(forget, retain, tokenizer, TEMPLATE, refusals=REFUSALS, seed=0,
                       max_length=128)  # fmt: skip
    batch = collate_items(plan[0][:4], pad_id=tokenizer.pad_token_id)
    inputs = MethodLoss(build_method("undial"), frozen=frozen).inputs(model, batch)
    b, t, v = inputs.forget_logits.shape
    assert (b, t) == inputs.forget_logps.shape == inputs.forget_targets.shape
    picked = torch.log_softmax(inputs.forget_logits, -1).gather(
        -1, inputs.forget_targets[..., None]
    )
    torch.testing.assert_close(picked[..., 0] * inputs.forget_mask, inputs.forget_logps)
    # the frozen model's logits come from the frozen copy, not the trained model
    assert inputs.ref_forget_logits.shape == (b, t, v)
    assert not torch.allclose(inputs.ref_forget_logits, inputs.forget_logits)


def test_a_method_that_needs_alternates_refuses_records_without_them(tmp_path):
    from forgetbench.errors import DataError
    from forgetbench.train.unlearn import run_unlearning

    forget, retain = toy_split()
    with pytest.raises(DataError, match="altpo trains toward alternate answers, but 6 of the 6"):
        run_unlearning(
            tmp_path, model_dir=tmp_path / "absent", forget=forget, retain=retain,
            method=build_method("altpo"), config=LoopConfig(lr=1e-3, epochs=1),
            template=TEMPLATE, refusals=REFUSALS, split="forget01",
        )  # fmt: skip


def test_forget_records_for_alternates_come_from_the_perturbed_split(tmp_path):
    from forgetbench.errors import DataError
    from forgetbench.study.unlearn import forget_records

    rows = [{"question": q, "answer": a} for q, a in toy_qa()[:2]]
    perturbed = [
        {**r, "paraphrased_answer": r["answer"], "perturbed_answer": ["x.", "y."]} for r in rows
    ]
    (tmp_path / "forget01.json").write_text(json.dumps(rows))
    (tmp_path / "forget01_perturbed.json").write_text(json.dumps(perturbed))
    assert forget_records(tmp_path, "forget01", build_method("npo"))[0].perturbed_answers == ()
    records = forget_records(tmp_path, "forget01", build_method("altpo"))
    assert [r.perturbed_answers for r in records] == [("x.", "y.")] * 2
    perturbed[1]["question"] = "Another question?"
    (tmp_path / "forget01_perturbed.json").write_text(json.dumps(perturbed))
    with pytest.raises(DataError, match="forget01_perturbed row 1 is not forget01 row 1"):
        forget_records(tmp_path, "forget01", build_method("altpo"))
