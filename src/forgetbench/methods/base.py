"""What every unlearning method shares: its inputs, its contract, its registry.

A method is a frozen config dataclass registered by name. The training engine (the only code that
runs a model) fills an `UnlearnInputs` with the tensors the method's `required_inputs()` names and
calls `method.loss(inputs)`; the method turns them into one scalar through its module's pure loss
function. So every formula is testable on hand-written tensors, and a method that needs a frozen
reference model says so by naming `ref_*` fields rather than by owning a model.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
import sys
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from torch import Tensor

from forgetbench.errors import ConfigError, did_you_mean
from forgetbench.methods._terms import LOSS_REDUCTIONS, batch_nll, next_token_kl
from forgetbench.registry import Registry

# A loss's named parts, for the log: 0-d tensors (detached), which the training loop reads once
# per optimizer step so that logging never waits on the device mid-step, or plain floats.
Parts = dict[str, "Tensor | float"]


@dataclass(frozen=True)
class UnlearnInputs:
    """Tensors the engine computes for one step; each method reads only the fields it needs.

    Shapes: B samples, T tokens, V vocabulary, H hidden size. Per-token log-probs come from
    `_terms.answer_token_logprobs(logits, labels)`: position t is log p(label t+1 | prefix), 0 where
    the mask is False (prompt and padding). Everything is optional; a missing field a method needs
    is an error naming the method and the field.
    """

    # Forget batch, current model: log-probs of the true answer and its answer-token mask.
    forget_logps: Tensor | None = None  # (B, T-1) float
    forget_mask: Tensor | None = None  # (B, T-1) bool
    # Same forget batch under the frozen reference (start) model, computed once before unlearning
    # and cached: NPO and DPO need only these sequence-level numbers, never a second model copy.
    ref_forget_logps: Tensor | None = None  # (B, T-1) float, masked by forget_mask
    # Full next-token logits on the forget batch, *shifted* to line up with forget_logps: row t is
    # the distribution over token t+1, whose id is forget_targets[:, t] (0 where forget_mask is
    # False). For methods that reshape the whole distribution (UNDIAL, CE-U, PDU); the frozen
    # model's come from the engine's frozen copy, as ref_retain_logits do.
    forget_logits: Tensor | None = None  # (B, T-1, V)
    forget_targets: Tensor | None = None  # (B, T-1) long
    ref_forget_logits: Tensor | None = None  # (B, T-1, V), no grad
    # Retain batch, current model.
    retain_logps: Tensor | None = None  # (B, T-1) float
    retain_mask: Tensor | None = None  # (B, T-1) bool
    # Full next-token logits on the retain batch, for KL(ref || current) (method `kl`, or
    # `retain_loss="kl"`): the only inputs that need the frozen model's full distribution.
    retain_logits: Tensor | None = None  # (B, T, V)
    ref_retain_logits: Tensor | None = None  # (B, T, V), no grad
    retain_label_mask: Tensor | None = None  # (B, T) bool, labels != IGNORE_INDEX
    retain_attention_mask: Tensor | None = None  # (B, T) bool, real (non-padding) tokens
    # Forget questions answered with a refusal string ("I don't know ..."), current model and
    # reference (the reference's are precomputable: each epoch's refusals are drawn before training
    # from (seed, epoch), and the start model scores exactly the refusal that epoch uses).
    refusal_logps: Tensor | None = None  # (B, T-1) float
    refusal_mask: Tensor | None = None  # (B, T-1) bool
    ref_refusal_logps: Tensor | None = None  # (B, T-1) float, masked by refusal_mask
    # Forget questions answered with an *alternate* answer: a plausible but false one (AltPO). On
    # TOFU-layout data these are the forget split's perturbed answers, one drawn per sample and
    # epoch from (seed, epoch) (train/unlearn.py `draw_alternates`); reference precomputed.
    alternate_logps: Tensor | None = None  # (B, T-1) float
    alternate_mask: Tensor | None = None  # (B, T-1) bool
    ref_alternate_logps: Tensor | None = None  # (B, T-1) float, masked by alternate_mask
    # RMU: the output of decoder block `rmu.layer` itself (a forward hook on the block, as the
    # WMDP code; for the last block not HF's `hidden_states[-1]`, which is after the final norm).
    forget_hidden: Tensor | None = None  # (B, T, H), current model on the forget batch
    retain_hidden: Tensor | None = None  # (B, T, H), current model on the retain batch
    ref_retain_hidden: Tensor | None = None  # (B, T, H), frozen model on the retain batch
    forget_hidden_mask: Tensor | None = None  # (B, T) bool: tokens the forget term averages over
    retain_hidden_mask: Tensor | None = None  # (B, T) bool: tokens the retain term averages over
    control_vector: Tensor | None = None  # (H,) the fixed random *unit* vector u (see rmu.py)


INPUT_FIELDS: frozenset[str] = frozenset(f.name for f in dataclasses.fields(UnlearnInputs))


@runtime_checkable
class UnlearnMethod(Protocol):
    """The contract of every registered method config.

    `needs` names the `UnlearnInputs` fields the method uses with its default options;
    `required_inputs()` is the same set for this instance's options (e.g. `retain_loss="kl"`
    swaps retain log-probs for retain logits). `loss` returns the scalar to minimise and its named
    parts for logging (`Parts`: detached 0-d tensors, never `.item()`, which would stop the
    device mid-step).
    """

    name: ClassVar[str]
    needs: ClassVar[frozenset[str]]

    def required_inputs(self) -> frozenset[str]: ...

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]: ...


# Optional parts of the contract. The engine asks for each by protocol, never by method name, so a
# method that needs a frozen buffer, a subset of trainable parameters or hidden states declares it
# here and touches no engine file.


@runtime_checkable
class PreparedMethod(Protocol):
    """Constants fixed for the whole run, computed once from the start model (RMU's control
    vector): `prepare(model)` returns `UnlearnInputs` fields the engine passes to every step."""

    def prepare(self, model: Any) -> dict[str, Tensor]: ...


@runtime_checkable
class SelectiveMethod(Protocol):
    """A method that trains only some parameters: `select_trainable(model)` sets
    `requires_grad` on the model's parameters (and raises ConfigError if it matches none)."""

    def select_trainable(self, model: Any) -> None: ...


@runtime_checkable
class HiddenStateMethod(Protocol):
    """A method whose inputs include hidden states (`forget_hidden` ...): the output of decoder
    block `hidden_layer`, averaged over `hidden_tokens` ("all" real tokens or "answer" tokens)."""

    @property
    def hidden_layer(self) -> int: ...

    @property
    def hidden_tokens(self) -> str: ...


@runtime_checkable
class DepthScaledMethod(Protocol):
    """A method (class) with options that depend on the model's depth, for models whose depth
    its published presets (written for 7B models) do not fit: `options_for_depth(layers)`."""

    @classmethod
    def options_for_depth(cls, layers: int) -> dict[str, Any]: ...


@runtime_checkable
class TwoTaskMethod(Protocol):
    """A method whose update is not the gradient of one scalar (NGDiff): the engine back-propagates
    each task loss separately, asks the method to combine the two gradients into the direction
    the optimizer steps on, and (with `auto_lr`) fits the step size on `objective` along the
    optimizer's step (see ngdiff.py and train/two_task.py)."""

    auto_lr: bool
    trial_multipliers: tuple[float, ...]
    lr_update_every: int

    def task_losses(self, inputs: UnlearnInputs) -> tuple[Tensor, Tensor]: ...

    def combine_gradients(
        self, forget_grads: Sequence[Tensor], retain_grads: Sequence[Tensor]
    ) -> list[Tensor]: ...

    def objective(
        self, forget_loss: Tensor, retain_loss: Tensor, *, forget_norm: float, retain_norm: float
    ) -> Tensor: ...

    def fit_scale(self, trial_losses: Sequence[float], *, gain: float) -> float: ...


@runtime_checkable
class StatefulMethod(Protocol):
    """A method whose loss depends on a small state that evolves during the run (PDU's dual
    variable). Methods are frozen configs, so the engine owns the state: it starts from
    `initial_state()`, passes it to every step as `stateful_loss(inputs, state)` (which also
    returns the per-micro-batch numbers the update reads), and after each optimizer step replaces
    it by `next_state(state, observed, epoch=...)`, where `observed` holds those numbers averaged
    over the step's micro-batches (and over processes). The state is a dict of floats: it goes
    into every checkpoint, so a resumed run continues with the same state, and it is a pure
    function of the run's trajectory, so a rerun reproduces it. `loss(inputs)` is the loss at the
    initial state."""

    def initial_state(self) -> dict[str, float]: ...

    def stateful_loss(
        self, inputs: UnlearnInputs, state: dict[str, float]
    ) -> tuple[Tensor, Parts, dict[str, Tensor]]: ...

    def next_state(
        self, state: dict[str, float], observed: dict[str, float], *, epoch: int
    ) -> dict[str, float]: ...


@runtime_checkable
class InstructedMethod(Protocol):
    """A method with no gradient (RWKU's in-context unlearning, icu): the engine trains nothing
    for it (its run is the start model), and the evaluation puts `instruction(subject)` before
    each prompt about `subject`."""

    def instruction(self, subject: str) -> str: ...


def trains(method: object) -> bool:
    """Whether `method` (a config or its class) changes weights: all but instructed ones."""
    return not callable(getattr(method, "instruction", None))


def trained_method_names() -> tuple[str, ...]:
    """The registered methods that train, in registration order: the default study's."""
    return tuple(name for name in method_names() if trains(get_method(name)))


METHODS: Registry[type] = Registry("method")


def _load_all() -> None:
    # Method modules register themselves on import; the package imports them all.
    importlib.import_module("forgetbench.methods")


def get_method(name: str) -> type:
    """The config class registered as `name`; unknown names fail with a suggestion."""
    _load_all()
    return METHODS.get(name)


def method_names() -> tuple[str, ...]:
    """Every registered method, in registration order: forgetbench.methods imports its modules
    in SPEC §2's order, which is the default study's and so its results' and report's."""
    _load_all()
    return METHODS.in_registration_order()


def method_summary(name: str) -> str:
    """One line on what method `name` does: the first sentence of its module's docstring, which
    every method file opens with (for `unlearn --help` and `run --help`)."""
    module = sys.modules[get_method(name).__module__]
    paragraph = " ".join((module.__doc__ or "").strip().split("\n\n")[0].split())
    sentence = re.split(r"(?<=[.!?])\s", paragraph, maxsplit=1)[0]
    return sentence or name


def build_method(name: str, options: Mapping[str, Any] | None = None) -> UnlearnMethod:
    """`build_method("npo", {"beta": 0.05})`: the config with overrides applied and validated.

    Values may come straight from YAML or `method.beta=0.05` overrides: ints are accepted for
    floats and lists for tuples; unknown keys fail with the known ones and a suggestion.
    """
    cls = get_method(name)
    options = dict(options or {})
    hints = typing.get_type_hints(cls)
    known = method_options(name)
    for key in options:
        if key not in known:
            raise ConfigError(
                f"unknown option '{name}.{key}'{did_you_mean(key, known)}",
                f"options of {name}: {', '.join(known) or '(none)'}",
            )
    kwargs = {key: _coerce(name, key, value, hints[key]) for key, value in options.items()}
    return cls(**kwargs)


def method_options(name: str) -> list[str]:  # its `method.*`
    return [f.name for f in dataclasses.fields(get_method(name))]


def _coerce(method: str, key: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        # `float | None` and friends: None (YAML null) means "not set", e.g. "take the preset's".
        if value is None:
            return None
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(method, key, value, inner)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint is float and not isinstance(value, float):
        raise ConfigError(f"{method}.{key} must be a number, got {value!r}")
    if hint is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{method}.{key} must be an integer, got {value!r}")
    if hint is bool and not isinstance(value, bool):
        raise ConfigError(f"{method}.{key} must be true or false, got {value!r}")
    if origin is tuple and isinstance(value, list | tuple):
        (item_hint, *_) = typing.get_args(hint) or (object,)
        return tuple(_coerce(method, key, v, item_hint) for v in value)
    if origin is tuple:
        raise ConfigError(f"{method}.{key} must be a list, got {value!r}")
    # Literal choices are checked by the config's __post_init__, which lists the allowed values.
    return value


RETAIN_LOSSES = ("nll", "kl")
# Which logit positions of a retain sequence the KL term averages over (see
# `_terms.next_token_kl`): "sequence" = the TOFU paper's equation (every real token, prompt
# included, padding excluded), "answer" = answer tokens only, "all" = the TOFU and
# open-unlearning code (every position of the padded batch).
KL_POSITIONS = ("sequence", "answer", "all")


def kl_inputs(kl_positions: str) -> frozenset[str]:
    """The `UnlearnInputs` fields `_terms.next_token_kl(positions=kl_positions)` reads."""
    logits = frozenset({"retain_logits", "ref_retain_logits"})
    if kl_positions == "sequence":
        return logits | {"retain_attention_mask"}
    if kl_positions == "answer":
        return logits | {"retain_label_mask"}
    return logits


def retain_inputs(loss: str, kl_positions: str = "sequence") -> frozenset[str]:
    """The `UnlearnInputs` fields `retain_regulariser(loss=..., kl_positions=...)` reads."""
    if loss == "kl":
        return kl_inputs(kl_positions)
    return frozenset({"retain_logps", "retain_mask"})


def retain_kl(inputs: UnlearnInputs, *, kl_positions: str) -> Tensor:
    """KL(ref || current) on the retain batch at `kl_positions` -> scalar."""
    return next_token_kl(
        inputs.retain_logits,
        inputs.ref_retain_logits.detach(),
        inputs.retain_label_mask,
        positions=kl_positions,
        attention_mask=inputs.retain_attention_mask,
    )


def retain_regulariser(
    inputs: UnlearnInputs, *, loss: str, kl_positions: str = "sequence", reduction: str
) -> tuple[Tensor, str]:
    """The retain term most methods add: the retain answers' NLL averaged by `reduction`
    (`"nll"`) or KL(ref || current) on the retain batch (`"kl"`, averaged as `kl_positions`
    says). Returns the term and its log name."""
    if loss == "kl":
        return retain_kl(inputs, kl_positions=kl_positions), "retain_kl"
    return batch_nll(inputs.retain_logps, inputs.retain_mask, reduction), "retain_nll"


def plus_retain_nll(
    total: Tensor,
    parts: Parts,
    inputs: UnlearnInputs,
    *,
    weight: float,
    reduction: str,
) -> Tensor:
    """`total` + `weight` x the retain answers' NLL, logged into `parts` as `retain_nll`:
    the optional retain term of the methods whose papers have none or make it a knob (`weight`
    0 leaves `total` as it is, and the method then needs no retain batch)."""
    if weight <= 0:
        return total
    retain, part = retain_regulariser(inputs, loss="nll", reduction=reduction)
    parts[part] = retain.detach()
    return total + weight * retain


def require_inputs(method: str, inputs: UnlearnInputs, fields: Iterable[str]) -> None:
    """Raise ValueError naming the first required field the engine left empty."""
    for field in sorted(fields):
        if getattr(inputs, field) is None:
            raise ValueError(
                f"method '{method}' needs UnlearnInputs.{field}, which the engine did not fill"
            )


# --- Validation helpers for __post_init__: each names `method.field` and the bad value. ---------


def check_positive(method: str, field: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{method}.{field} must be > 0, got {value}")


def check_nonnegative(method: str, field: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise ConfigError(f"{method}.{field} must be >= 0, got {value}")


def check_finite(method: str, field: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value)):
        raise ConfigError(f"{method}.{field} must be a finite number, got {value}")


def check_reduction(method: str, value: str) -> None:
    """`loss_reduction` is one of `_terms.LOSS_REDUCTIONS` (set through unlearn.loss_reduction)."""
    check_choice(method, "loss_reduction", value, LOSS_REDUCTIONS)


def check_choice(method: str, field: str, value: str, choices: Iterable[str]) -> None:
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(
            f"{method}.{field} must be one of {', '.join(choices)}, got {value!r}"
            f"{did_you_mean(str(value), choices)}"
        )
