"""Registry, the shared method contract, and one generic check over every registered method."""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
import torch

from forgetbench.errors import ConfigError, UnknownNameError
from forgetbench.methods import (
    METHODS,
    TwoTaskMethod,
    UnlearnInputs,
    UnlearnMethod,
    build_method,
    get_method,
    method_names,
)
from forgetbench.methods.base import INPUT_FIELDS, StatefulMethod, trained_method_names
from forgetbench.registry import Registry

# --- Registry -----------------------------------------------------------------------------------


def test_registry_round_trip_and_sorted_names():
    reg: Registry = Registry("widget")

    @reg.register("small_widget")
    def small() -> int:
        return 1

    @reg.register("a_widget")
    class AWidget:
        pass

    assert reg.get("small_widget") is small
    assert reg.get("a_widget") is AWidget
    assert reg.names() == ("a_widget", "small_widget")
    assert "a_widget" in reg and len(reg) == 2


def test_registry_did_you_mean():
    reg: Registry = Registry("widget")
    reg.register("gadget")(dict)
    with pytest.raises(UnknownNameError, match="unknown widget 'gadgte'; did you mean 'gadget'"):
        reg.get("gadgte")


def test_registry_rejects_bad_names_duplicates_and_instances():
    reg: Registry = Registry("widget")
    with pytest.raises(ValueError, match="snake_case"):
        reg.register("GradAscent")
    reg.register("one")(dict)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("one")(list)
    with pytest.raises(TypeError, match="not an instance"):
        reg.register("two")({"a": 1})


# --- Method registry ----------------------------------------------------------------------------


def test_method_names_are_the_registry_in_registration_order():
    # SPEC §2's order, as forgetbench.methods imports them: the default study's rows follow it.
    assert method_names() == (
        "grad_ascent", "grad_diff", "kl", "idk", "dpo", "npo", "simnpo", "ngdiff", "rmu",
        "altpo", "ce_u", "icu", "pdu", "satimp", "undial", "wga",
    )  # fmt: skip
    assert METHODS.names() == tuple(sorted(method_names()))
    # The default study's: every one that trains (icu only instructs RWKU's evaluation).
    assert trained_method_names() == tuple(n for n in method_names() if n != "icu")


def test_unknown_method_suggests_the_closest():
    with pytest.raises(UnknownNameError) as info:
        get_method("nop")
    message = str(info.value)
    assert "unknown method 'nop'; did you mean 'npo'?" in message
    assert (
        "known: altpo, ce_u, dpo, grad_ascent, grad_diff, icu, idk, kl, ngdiff, npo, pdu, rmu, "
        "satimp, simnpo, undial, wga" in message
    )


def test_build_method_applies_yaml_style_options():
    method = build_method("npo", {"beta": 1, "retain_loss": "kl"})  # int accepted for a float
    assert method.beta == 1.0 and isinstance(method.beta, float)
    assert method.retain_loss == "kl"
    rmu = build_method("rmu", {"layer": 2, "update_layers": [0, 1, 2]})  # list -> tuple
    assert rmu.update_layers == (0, 1, 2)


def test_build_method_errors_name_the_option():
    with pytest.raises(ConfigError, match=r"unknown option 'npo.betta' \(did you mean 'beta'\?\)"):
        build_method("npo", {"betta": 0.1})
    with pytest.raises(ConfigError, match="npo.beta must be a number, got 'high'"):
        build_method("npo", {"beta": "high"})
    with pytest.raises(ConfigError, match="npo.beta must be > 0, got -1"):
        build_method("npo", {"beta": -1})
    with pytest.raises(ConfigError, match="rmu.layer must be an integer, got 2.5"):
        build_method("rmu", {"layer": 2.5})


# --- Every method -------------------------------------------------------------------------------

B, T, V, H = 2, 5, 6, 4


def _all_inputs(seed: int = 0) -> UnlearnInputs:
    """Random but well-formed values for every field; each row has at least one answer token."""
    g = torch.Generator().manual_seed(seed)

    def logps() -> torch.Tensor:
        return (-torch.rand(B, T - 1, generator=g) * 3).requires_grad_(True)

    answer = torch.tensor([[False, True, True, False], [True, True, True, True]])
    label_mask = torch.tensor([[False, False, True, True, False], [False, True, True, True, True]])
    tokens = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])
    u = torch.rand(H, generator=g)
    return UnlearnInputs(
        forget_logps=logps(),
        forget_mask=answer,
        ref_forget_logps=-torch.rand(B, T - 1, generator=g) * 3,
        forget_logits=torch.randn(B, T - 1, V, generator=g).requires_grad_(True),
        forget_targets=torch.randint(0, V, (B, T - 1), generator=g),
        ref_forget_logits=torch.randn(B, T - 1, V, generator=g),
        retain_logps=logps(),
        retain_mask=answer.flip(0),
        retain_logits=torch.randn(B, T, V, generator=g).requires_grad_(True),
        ref_retain_logits=torch.randn(B, T, V, generator=g),
        retain_label_mask=label_mask,
        retain_attention_mask=tokens,
        refusal_logps=logps(),
        refusal_mask=answer,
        ref_refusal_logps=-torch.rand(B, T - 1, generator=g) * 3,
        alternate_logps=logps(),
        alternate_mask=answer.flip(0),
        ref_alternate_logps=-torch.rand(B, T - 1, generator=g) * 3,
        forget_hidden=torch.randn(B, T, H, generator=g).requires_grad_(True),
        retain_hidden=torch.randn(B, T, H, generator=g).requires_grad_(True),
        ref_retain_hidden=torch.randn(B, T, H, generator=g),
        forget_hidden_mask=tokens,
        retain_hidden_mask=tokens.flip(0),
        control_vector=u / u.norm(),
    )


def _only(inputs: UnlearnInputs, fields: frozenset[str]) -> UnlearnInputs:
    return UnlearnInputs(**{name: getattr(inputs, name) for name in fields})


@pytest.mark.parametrize("name", sorted(method_names()))
def test_method_contract(name: str):
    cls = get_method(name)
    assert dataclasses.is_dataclass(cls)
    assert cls.name == name
    assert cls.needs <= INPUT_FIELDS, f"{name}.needs names fields UnlearnInputs lacks"
    method = cls()
    assert isinstance(method, UnlearnMethod)
    assert method.required_inputs() == cls.needs
    assert isinstance(method, TwoTaskMethod) == (name == "ngdiff")
    assert isinstance(method, StatefulMethod) == (name == "pdu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        method.__setattr__(dataclasses.fields(cls)[0].name, None)
    assert cls.__module__.startswith("forgetbench.methods.")
    assert sys.modules[cls.__module__].__doc__.strip(), f"{name} module needs its paper docstring"


@pytest.mark.parametrize("name", sorted(trained_method_names()))
def test_loss_runs_on_exactly_the_required_inputs(name: str):
    method = get_method(name)()
    inputs = _only(_all_inputs(), method.required_inputs())
    loss, parts = method.loss(inputs)
    assert loss.dim() == 0 and math.isfinite(loss.item())
    # named parts stay on the device, detached, for the loop to read once per step
    assert parts and all(
        isinstance(v, torch.Tensor) and v.dim() == 0 and not v.requires_grad
        and math.isfinite(v.item())
        for v in parts.values()
    )  # fmt: skip
    loss.backward()
    grads = [
        getattr(inputs, f).grad
        for f in method.required_inputs()
        if getattr(inputs, f) is not None and getattr(inputs, f).requires_grad
    ]
    assert grads and any(g is not None and g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize("name", sorted(trained_method_names()))
def test_each_missing_input_is_named(name: str):
    method = get_method(name)()
    full = _only(_all_inputs(), method.required_inputs())
    for field in sorted(method.required_inputs()):
        broken = dataclasses.replace(full, **{field: None})
        with pytest.raises(ValueError, match=rf"'{name}' needs UnlearnInputs\.{field}\b"):
            method.loss(broken)


def test_loss_is_the_same_with_extra_inputs():
    # A method must ignore fields it does not need (the engine may fill more).
    full = _all_inputs()
    for name in trained_method_names():
        method = get_method(name)()
        alone, _ = method.loss(_only(full, method.required_inputs()))
        everything, _ = method.loss(full)
        assert alone.item() == pytest.approx(everything.item())
