"""A method's loss for the training loop: exactly the forward passes its `required_inputs()`
name (the model's, and a frozen copy of the start model's where it reads full outputs), its
constants, its state across steps (`StatefulMethodLoss`) and, for a two-task method, the loop's
two-gradient step hook. Asked by protocol (methods/base.py), never by name."""

from __future__ import annotations

import copy
from typing import Any

import torch

from forgetbench.device import to_model_device
from forgetbench.errors import ConfigError
from forgetbench.methods._terms import answer_token_logprobs
from forgetbench.methods.base import (
    HiddenStateMethod,
    Parts,
    PreparedMethod,
    SelectiveMethod,
    StatefulMethod,
    TwoTaskMethod,
    UnlearnInputs,
    UnlearnMethod,
)
from forgetbench.methods.plugins import broken_plugin, is_builtin, plugin_call
from forgetbench.modeling.forward import forward_logits, hidden_states_at
from forgetbench.modeling.lora import AdaptersDisabled, is_lora
from forgetbench.train.items import SCORED_KINDS
from forgetbench.train.sharding import shard_model, sharding_requested
from forgetbench.train.two_task import TwoTaskStep

FROZEN_MODEL_FIELDS = {"ref_retain_logits", "ref_retain_hidden", "ref_forget_logits"}


class MethodLoss:
    """`loss_fn(model, batch)` for the training loop: runs exactly the forward passes the method's
    inputs need and returns (loss, named parts). `constants` are the method's `prepare` fields,
    the same at every step."""

    def __init__(
        self,
        method: UnlearnMethod,
        *,
        frozen: Any = None,
        constants: dict[str, torch.Tensor] | None = None,
    ) -> None:
        self.method = method
        self.needs = set(method.required_inputs())
        self.frozen = frozen
        self.constants = constants or {}

    def inputs(self, model: Any, batch: dict[str, Any]) -> UnlearnInputs:
        # The loop's data loader already sends batches to the accelerator's device; a caller
        # outside it (a two-task step, a test) may not, and every field must be on the model's.
        batch = to_model_device(batch, model)
        fields: dict[str, Any] = {}
        needs = self.needs
        if needs & {"forget_logps", "forget_mask", "forget_logits", "forget_targets"}:
            # The full distributions a method reads (forget_logits, retain_logits) come from the
            # padded batch: its padded positions' logits are the model's, not packing's zeros.
            full = bool(needs & {"forget_logits", "forget_targets"})
            logits = forward_logits(model, batch["forget"], padded=full)
            labels = batch["forget"]["labels"]
            fields["forget_logps"], fields["forget_mask"] = answer_token_logprobs(logits, labels)
            # Shifted like forget_logps: row t predicts token t+1.
            fields["forget_logits"] = logits[:, :-1, :]
            fields["forget_targets"] = labels[:, 1:].masked_fill(~fields["forget_mask"], 0)
        if "ref_forget_logits" in needs:
            with torch.no_grad():
                ref = forward_logits(self.frozen, batch["forget"], padded=True)
            fields["ref_forget_logits"] = ref[:, :-1, :]
        if needs & {"retain_logps", "retain_mask", "retain_logits"}:
            full = "retain_logits" in needs
            logits = forward_logits(model, batch["retain"], padded=full)
            fields["retain_logps"], fields["retain_mask"] = answer_token_logprobs(
                logits, batch["retain"]["labels"]
            )
            fields["retain_logits"] = logits
            fields["retain_label_mask"] = batch["retain"]["labels"] != -100
            fields["retain_attention_mask"] = batch["retain"]["attention_mask"].bool()
        if "ref_retain_logits" in needs:
            with torch.no_grad():
                fields["ref_retain_logits"] = forward_logits(
                    self.frozen, batch["retain"], padded=True
                )
        if needs & {"refusal_logps", "refusal_mask"}:
            fields["refusal_logps"], fields["refusal_mask"] = answer_token_logprobs(
                forward_logits(model, batch["refusal"]), batch["refusal"]["labels"]
            )
        if needs & {"alternate_logps", "alternate_mask"}:
            fields["alternate_logps"], fields["alternate_mask"] = answer_token_logprobs(
                forward_logits(model, batch["alternate"]), batch["alternate"]["labels"]
            )
        for kind in SCORED_KINDS:
            if f"ref_{kind}_logps" in needs:
                fields[f"ref_{kind}_logps"] = batch[f"ref_{kind}_logps"]
        if "forget_hidden" in needs:
            if not isinstance(self.method, HiddenStateMethod):
                raise TypeError(f"{self.method.name} needs hidden states but names no layer")
            layer = self.method.hidden_layer
            answer_only = self.method.hidden_tokens == "answer"

            def token_mask(part: dict[str, Any]) -> torch.Tensor:
                return part["labels"] != -100 if answer_only else part["attention_mask"].bool()

            fields["forget_hidden"] = hidden_states_at(model, batch["forget"], layer)
            fields["forget_hidden_mask"] = token_mask(batch["forget"])
            fields["retain_hidden"] = hidden_states_at(model, batch["retain"], layer)
            fields["retain_hidden_mask"] = token_mask(batch["retain"])
            with torch.no_grad():
                fields["ref_retain_hidden"] = hidden_states_at(self.frozen, batch["retain"], layer)
        fields.update(self.constants)
        return UnlearnInputs(
            **{k: v for k, v in fields.items() if k in needs or k.endswith("_mask")}
        )

    def __call__(self, model: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, Parts]:
        inputs = self.inputs(model, batch)
        output = plugin_call(self.method, "loss", lambda: self.method.loss(inputs))
        return checked_output(self.method, "loss", output, 2)


class StatefulMethodLoss(MethodLoss):
    """`MethodLoss` for a `StatefulMethod`: holds the method's state (a dict of floats), passes it
    to every step, and updates it after each optimizer step from the step's micro-batch numbers
    (the loop's `StatefulLoss`, which checkpoints and restores it)."""

    def __init__(self, method: StatefulMethod, **kwargs: Any) -> None:
        super().__init__(method, **kwargs)  # type: ignore[arg-type]
        self.state = dict(method.initial_state())
        self._observed: list[dict[str, torch.Tensor]] = []

    def __call__(self, model: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, Parts]:
        inputs = self.inputs(model, batch)
        output = plugin_call(
            self.method,
            "stateful_loss",
            lambda: self.method.stateful_loss(inputs, self.state),  # type: ignore[attr-defined]
        )
        loss, parts, observed = checked_output(self.method, "stateful_loss", output, 3)
        self._observed.append({k: v.detach().float() for k, v in observed.items()})
        return loss, {**parts, **self.state}  # the state this step used, in the log

    def end_step(self, reduce: Any, *, epoch: int) -> None:
        names = list(self._observed[0])
        means = [reduce(torch.stack([o[k] for o in self._observed]).mean()) for k in names]
        # The state is host floats (checkpointed as JSON): one read for all of them.
        observed = dict(zip(names, torch.stack(means).tolist(), strict=True))
        self._observed = []
        self.state = dict(
            self.method.next_state(self.state, observed, epoch=epoch)  # type: ignore[attr-defined]
        )

    def state_dict(self) -> dict[str, Any]:
        return {"method_state": dict(self.state)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # Every checkpoint of this run folder has one (the folder's key covers the method and
        # its options); a missing one leaves the initial state rather than failing the resume.
        saved = state.get("method_state")
        if saved is not None:
            self.state = {k: float(v) for k, v in saved.items()}


def checked_output(method: UnlearnMethod, part: str, output: Any, length: int) -> Any:
    """A plugin's `part` output checked against the contract: a scalar tensor to minimise and
    its named parts as floats or scalar tensors (a stateful loss adds its observed tensors). Without this a
    Python float fails inside the loop as forgetbench's own error."""
    if is_builtin(type(method)):
        return output
    shape = "(scalar tensor, {name: number})" if length == 2 else (
        "(scalar tensor, {name: number}, {name: tensor})"
    )  # fmt: skip
    if not (isinstance(output, tuple) and len(output) == length):
        raise broken_plugin(method, f"{part}() returned {_kind(output)}, not a tuple {shape}")
    loss, parts = output[0], output[1]
    if not (isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.is_floating_point()):
        raise broken_plugin(
            method,
            f"{part}() returned {_kind(loss)} as its loss, not a scalar float tensor "
            "(return the tensor the loss was computed as, not its .item())",
        )
    if not isinstance(parts, dict):
        raise broken_plugin(method, f"{part}() returned {_kind(parts)} as its parts, not a dict")
    for name, value in parts.items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        scalar = isinstance(value, torch.Tensor) and value.dim() == 0 and value.is_floating_point()
        if not (number or scalar):
            raise broken_plugin(
                method,
                f"{part}() returned {_kind(value)} for part '{name}', not a float or a scalar "
                "float tensor (the parts go into the run's log; a detached scalar tensor is read "
                "once a step, without the wait .item() costs on a GPU)",
            )
    return output


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} ({value.dtype})"
    return f"{type(value).__name__} {value!r}"[:120]


def method_loss(method: UnlearnMethod, model: Any) -> tuple[MethodLoss, TwoTaskStep | None]:
    """What the loop trains `model` with for `method`: the loss (with a frozen reference copy of
    the start model on the model's own device, when the method reads its full outputs, and the
    method's constants on that device) and, for a two-task method, its step hook."""
    needs = set(method.required_inputs())
    frozen = None
    if needs & FROZEN_MODEL_FIELDS and is_lora(model):
        frozen = AdaptersDisabled(model)  # the start model is the base weights: no second copy
    elif needs & FROZEN_MODEL_FIELDS:
        frozen = copy.deepcopy(model).eval()  # a copy of a placed model sits on its device
        frozen.requires_grad_(False)
        if sharding_requested():  # sharded as the trained model is: never a full copy each
            shard_model(frozen, role="reference model")
    constants = (
        to_model_device(method.prepare(model), model) if isinstance(method, PreparedMethod) else {}
    )
    if isinstance(method, SelectiveMethod):
        method.select_trainable(model)
        if is_lora(model):
            _keep_adapters_only(method, model)
    loss = (
        StatefulMethodLoss(method, frozen=frozen, constants=constants)
        if isinstance(method, StatefulMethod)
        else MethodLoss(method, frozen=frozen, constants=constants)
    )
    # A two-task update is not the gradient of one loss: the loop calls the two-gradient step
    # hook instead of backward/step, with the same AdamW, schedule, clipping and checkpoints.
    hook = TwoTaskStep(method, loss.inputs) if isinstance(method, TwoTaskMethod) else None
    return loss, hook


def _keep_adapters_only(method: UnlearnMethod, model: Any) -> None:
    """With LoRA only adapters may train (the base weights are also the reference model): of the
    parameters a selective method chose, keep the adapters'."""
    chosen = 0
    for name, parameter in model.named_parameters():
        parameter.requires_grad = parameter.requires_grad and "lora_" in name
        chosen += parameter.requires_grad
    if not chosen:
        raise ConfigError(
            f"{method.name} trains only some modules, and with unlearn.lora none of them carries "
            "an adapter",
            f"put the adapters on them (unlearn.lora_targets, e.g. the module names {method.name} "
            "updates), or unlearn without LoRA",
        )
