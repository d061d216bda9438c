"""RMU (representation misdirection for unlearning): scramble one layer's activations on forget
data, keep them on retain data.

Li et al. 2024, "The WMDP Benchmark: Measuring and Reducing Malicious Use With Unlearning" (ICML),
Sec. 5 and Algorithm 1. With h(t) the output of decoder block `layer` at token t (read by a
forward hook on the block, as the WMDP code and open-unlearning; for the last block this is before
the model's final norm, unlike HF's `hidden_states[-1]`), u a fixed random
unit vector (entries drawn uniformly from [0, 1), then normalised) and c the steering coefficient:

    L_forget = E_{x in F}[ (1/|x|) sum_t || h_updated(t) - c * u ||_2^2 ]
    L_retain = E_{x in R}[ (1/|x|) sum_t || h_updated(t) - h_frozen(t) ||_2^2 ]
    minimise  L_forget + alpha * L_retain

updating only some parameters (the WMDP code: the MLP down-projection of layers 5, 6, 7 while
steering layer 7). Large c makes the forget activations' norm blow up so later layers cannot read
them; the retain term pins everything else to the frozen model.

Hyperparameters come as a named `preset`, each named for its source (`RMU_PRESETS`); any option
set explicitly overrides the preset's value:

- `wmdp_defaults` (default): the argparse defaults of the WMDP repository's `rmu/unlearn.py` —
  c 20, alpha 100, steer layer 7, update `mlp.down_proj` (`--param_ids 6`) of layers 5, 6, 7.
- `wmdp_zephyr`: the WMDP repository's Zephyr-7B run, `run_rmu_zephyr.ipynb`
  (`--steering_coeffs 6.5,6.5 --alpha 1200,1200`), same layers — the run the released
  `cais/Zephyr_RMU` is attributed to.
- `open_unlearning_tofu`: open-unlearning's `configs/trainer/RMU.yaml` — c 2, alpha 1, steer
  `model.layers.7`, train every parameter, answer tokens only.

`hidden_reduction`: "mean" (all presets) averages the squared error over the H hidden units, as
the WMDP code (`F.mse_loss`) and open-unlearning (`mse_loss(...).mean(dim=2)`) do; "sum" is the
paper's squared L2 norm — the same objective times H, so c and alpha carry over but the gradient
scale does not. Token averaging is per sample then over the batch (the paper's 1/|x| inside the
expectation; also what open-unlearning's `compute_activation_loss` intends — at B > 1 it divides
a [B] tensor by a [B, 1] one, which broadcasts to [B, B] and averages sum_i / n_j over all pairs,
a bug we do not copy; `unlearn.loss_reduction` does not apply here); `tokens` picks which tokens count: "all" real tokens (WMDP,
which trains on raw documents; its code also averages over padding, which we exclude) or "answer"
tokens (open-unlearning on QA data: `labels != -100`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor

from forgetbench.errors import ConfigError
from forgetbench.methods._terms import require
from forgetbench.methods.base import (
    METHODS,
    Parts,
    UnlearnInputs,
    check_choice,
    check_nonnegative,
    check_positive,
    require_inputs,
)

HIDDEN_REDUCTIONS = ("sum", "mean")


def rmu_control_vector(hidden_size: int, *, seed: int) -> Tensor:  # -> (H,)
    """The paper's u: i.i.d. U[0, 1) entries, normalised to unit length; fixed for the whole run
    and reproducible from `seed` without touching the global RNG."""
    generator = torch.Generator().manual_seed(seed)
    u = torch.rand(hidden_size, generator=generator)
    return u / u.norm()


def masked_token_sq_distance(
    hidden: Tensor, target: Tensor, mask: Tensor, *, hidden_reduction: str = "sum"
) -> Tensor:  # (B, T, H), (B, T, H) or (H,), (B, T) -> scalar
    """Per-token squared distance (summed or averaged over H), averaged over each sample's masked
    tokens, then over the batch."""
    if hidden.dim() != 3 or mask.shape != hidden.shape[:2]:
        raise ValueError(
            f"rmu: hidden states must be (B, T, H) with a (B, T) mask, got "
            f"{tuple(hidden.shape)} and {tuple(mask.shape)}"
        )
    if hidden_reduction not in HIDDEN_REDUCTIONS:
        raise ValueError(f"rmu: hidden_reduction must be 'sum' or 'mean', got {hidden_reduction!r}")
    squared = (hidden.float() - target.float()).pow(2)  # (B, T, H); target broadcasts
    per_token = squared.sum(dim=-1) if hidden_reduction == "sum" else squared.mean(dim=-1)
    mask = mask.bool()
    counts = mask.sum(dim=1)
    require((counts > 0).all(), "rmu: a sample has no token selected by its hidden-state mask")
    return ((per_token * mask).sum(dim=1) / counts).mean()


def rmu_loss(
    forget_hidden: Tensor,  # (B_f, T_f, H) current model, block `layer`, forget batch
    forget_mask: Tensor,  # (B_f, T_f) bool
    retain_hidden: Tensor,  # (B_r, T_r, H) current model, retain batch
    ref_retain_hidden: Tensor,  # (B_r, T_r, H) frozen model, retain batch
    retain_mask: Tensor,  # (B_r, T_r) bool
    control_vector: Tensor,  # (H,) unit vector u
    *,
    steering_coeff: float,
    alpha: float,
    hidden_reduction: str = "sum",
) -> tuple[Tensor, Tensor, Tensor]:  # -> (L_forget + alpha * L_retain, L_forget, L_retain)
    """RMU's objective and its two terms (returned for logging)."""
    forget = masked_token_sq_distance(
        forget_hidden,
        steering_coeff * control_vector,
        forget_mask,
        hidden_reduction=hidden_reduction,
    )
    retain = masked_token_sq_distance(
        retain_hidden, ref_retain_hidden.detach(), retain_mask, hidden_reduction=hidden_reduction
    )
    return forget + alpha * retain, forget, retain


@dataclass(frozen=True)
class RMUPreset:
    """One published RMU configuration, with where each number comes from."""

    layer: int
    steering_coeff: float
    alpha: float
    update_layers: tuple[int, ...]
    update_params: tuple[str, ...]
    train_params: str
    hidden_reduction: str
    tokens: str
    source: str


_WMDP_LAYERS = (5, 6, 7)  # `--layer_ids 5,6,7`
# `--param_ids 6`: parameter 6 of a Llama/Mistral decoder block (q, k, v, o, gate, up, down).
_WMDP_PARAMS = ("mlp.down_proj",)
RMU_PRESETS: dict[str, RMUPreset] = {
    "wmdp_defaults": RMUPreset(
        layer=7,
        steering_coeff=20.0,
        alpha=100.0,
        update_layers=_WMDP_LAYERS,
        update_params=_WMDP_PARAMS,
        train_params="selected",
        hidden_reduction="mean",
        tokens="all",
        source="centerforaisafety/wmdp rmu/unlearn.py argparse defaults: --steering_coeffs 20,20 "
        "--alpha 100,100 --layer_id 7 --layer_ids 5,6,7 --param_ids 6 (loop: --lr 5e-5 "
        "--batch_size 4 --max_num_batches 80)",
    ),
    "wmdp_zephyr": RMUPreset(
        layer=7,
        steering_coeff=6.5,
        alpha=1200.0,
        update_layers=_WMDP_LAYERS,
        update_params=_WMDP_PARAMS,
        train_params="selected",
        hidden_reduction="mean",
        tokens="all",
        source="centerforaisafety/wmdp run_rmu_zephyr.ipynb (Zephyr-7B): --steering_coeffs "
        "6.5,6.5 --alpha 1200,1200 with the script's layer defaults (loop: --lr 5e-5 "
        "--batch_size 4 --max_num_batches 150)",
    ),
    "open_unlearning_tofu": RMUPreset(
        layer=7,
        steering_coeff=2.0,
        alpha=1.0,
        update_layers=_WMDP_LAYERS,  # unused: train_params="all"
        update_params=_WMDP_PARAMS,
        train_params="all",
        hidden_reduction="mean",
        tokens="answer",
        source="locuslab/open-unlearning configs/trainer/RMU.yaml: steering_coeff 2, alpha 1, "
        "gamma 1, module_regex model\\.layers\\.7, trainable_params_regex ['.*'], "
        "retain_loss_type EMBED_DIFF; mask labels != -100 (src/trainer/unlearn/rmu.py)",
    ),
}
TRAIN_PARAMS = ("selected", "all")
TOKENS = ("all", "answer")
# Options that describe the model rather than the method (the steered layer must exist in it).
# When a user names a preset, a model's default options keep only these (study/unlearn.py).
MODEL_OPTIONS = frozenset({"layer", "update_layers"})


@METHODS.register("rmu")
@dataclass(frozen=True)
class RMU:
    """Every option left unset (None) takes the value of `preset`; see `RMU_PRESETS` and
    docs/methods.md for the sources. The presets are for 7B models (32 blocks); a small model needs
    `layer`/`update_layers` inside its depth and a c comparable to its activation norms."""

    name: ClassVar[str] = "rmu"
    needs: ClassVar[frozenset[str]] = frozenset(
        {
            "forget_hidden",
            "forget_hidden_mask",
            "retain_hidden",
            "ref_retain_hidden",
            "retain_hidden_mask",
            "control_vector",
        }
    )
    model_options: ClassVar[frozenset[str]] = MODEL_OPTIONS

    preset: Literal["wmdp_defaults", "wmdp_zephyr", "open_unlearning_tofu"] = "wmdp_defaults"
    layer: int | None = (
        None  # decoder block whose own output is steered (modeling.forward.hidden_states_at)
    )
    steering_coeff: float | None = None  # c
    alpha: float | None = None  # retain weight
    update_layers: tuple[int, ...] | None = None  # blocks whose parameters train ("selected")
    update_params: tuple[str, ...] | None = None  # name fragments within those blocks
    train_params: Literal["selected", "all"] | None = None  # "all": every parameter trains
    hidden_reduction: Literal["sum", "mean"] | None = None
    tokens: Literal["all", "answer"] | None = None  # which tokens the two terms average over
    seed: int = 0  # seeds u (rmu_control_vector), independent of the data order seed

    def __post_init__(self) -> None:
        check_choice(self.name, "preset", self.preset, RMU_PRESETS)
        preset = RMU_PRESETS[self.preset]
        for field in dataclasses.fields(RMUPreset):
            if field.name != "source" and getattr(self, field.name) is None:
                # frozen dataclass: fill the unset options once, at construction
                object.__setattr__(self, field.name, getattr(preset, field.name))
        if isinstance(self.layer, bool) or not isinstance(self.layer, int) or self.layer < 0:
            raise ConfigError(f"rmu.layer must be an integer >= 0, got {self.layer}")
        check_positive(self.name, "steering_coeff", self.steering_coeff)
        check_nonnegative(self.name, "alpha", self.alpha)
        check_choice(self.name, "hidden_reduction", self.hidden_reduction, HIDDEN_REDUCTIONS)
        check_choice(self.name, "train_params", self.train_params, TRAIN_PARAMS)
        check_choice(self.name, "tokens", self.tokens, TOKENS)
        if self.train_params == "all":
            return
        if not self.update_layers:
            raise ConfigError("rmu.update_layers must name at least one layer, got []")
        for index in self.update_layers:
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise ConfigError(f"rmu.update_layers must be integers >= 0, got {index!r}")
            if index > self.layer:
                raise ConfigError(
                    f"rmu.update_layers must be <= rmu.layer ({self.layer}), got {index}",
                    "parameters after the steered layer cannot change its activations",
                )
        if not self.update_params:
            raise ConfigError("rmu.update_params must name at least one parameter, got []")

    def required_inputs(self) -> frozenset[str]:
        return self.needs

    @classmethod
    def options_for_depth(cls, layers: int) -> dict[str, Any]:
        """The middle block is steered, and trained with the block before (the WMDP code: block 7
        of 32, blocks 5-7)."""
        middle = max(0, layers // 2)
        return {"layer": middle, "update_layers": tuple(range(max(0, middle - 1), middle + 1))}

    @property
    def hidden_layer(self) -> int:
        return self.layer  # type: ignore[return-value]  # filled from the preset

    @property
    def hidden_tokens(self) -> str:
        # Every real token (WMDP, raw documents) or the answer tokens (open-unlearning on QA).
        return self.tokens  # type: ignore[return-value]

    def prepare(self, model: Any) -> dict[str, Tensor]:
        return {"control_vector": rmu_control_vector(model.config.hidden_size, seed=self.seed)}

    def select_trainable(self, model: Any) -> None:
        """Only the named parameters of `update_layers` train (unless `train_params="all"`)."""
        if self.train_params == "all":
            return
        wanted = [f"layers.{i}.{part}" for i in self.update_layers for part in self.update_params]  # type: ignore[union-attr]
        matched = 0
        for name, parameter in model.named_parameters():
            parameter.requires_grad = any(w in name for w in wanted)
            matched += parameter.requires_grad
        if not matched:
            raise ConfigError(
                f"{self.name}: no parameter matches update_layers={list(self.update_layers)} "  # type: ignore[arg-type]
                f"/ update_params={list(self.update_params)}",  # type: ignore[arg-type]
                "check the layer indices against the model's depth",
            )

    def loss(self, inputs: UnlearnInputs) -> tuple[Tensor, Parts]:
        require_inputs(self.name, inputs, self.required_inputs())
        total, forget, retain = rmu_loss(
            inputs.forget_hidden,
            inputs.forget_hidden_mask,
            inputs.retain_hidden,
            inputs.ref_retain_hidden,
            inputs.retain_hidden_mask,
            inputs.control_vector,
            steering_coeff=self.steering_coeff,
            alpha=self.alpha,
            hidden_reduction=self.hidden_reduction,
        )
        return total, {"rmu_forget": forget.detach(), "rmu_retain": retain.detach()}
