"""One device policy, checked without a GPU: the CPU suite must catch a tensor that reaches a model
on another device (what crashed every reference-model method on CUDA). The models here sit on
`meta`, a device that is not the default one; a forward pre-hook on every module compares each
input tensor's device with the module's parameters'."""

from __future__ import annotations

import pytest
import torch
import torch.fx.experimental._config
from torch.overrides import TorchFunctionMode

from forgetbench.device import (
    configure,
    default_device,
    place_model,
    precision,
    precision_key,
    resolve_device,
)
from forgetbench.errors import ConfigError
from forgetbench.methods.base import (
    DepthScaledMethod,
    build_method,
    get_method,
    trained_method_names,
)
from forgetbench.methods.refusals import REFUSALS
from forgetbench.modeling.builtin import build_tiny_model
from forgetbench.modeling.templates import PromptTemplate
from forgetbench.records import QARecord
from forgetbench.train.items import (
    REFERENCE_FIELDS,
    build_items,
    collate_items,
    with_reference_logps,
)
from forgetbench.train.method_loss import method_loss
from toy import toy_qa, toy_tokenizer

TEMPLATE = PromptTemplate("question_answer")


class DeviceGuard:
    """Forward pre-hooks on every module of `models`: an input tensor on another device than the
    module's parameters is recorded (and the call goes on, so one run lists every offender)."""

    def __init__(self, *models: torch.nn.Module) -> None:
        self.mismatches: list[str] = []
        self.handles = [
            module.register_forward_pre_hook(self._check, with_kwargs=True)
            for model in models
            for module in model.modules()
            if next(module.parameters(recurse=False), None) is not None
        ]
        self.calls = 0

    def _check(self, module, args, kwargs):
        self.calls += 1
        device = next(module.parameters(recurse=False)).device
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor) and value.device != device:
                self.mismatches.append(f"{type(module).__name__}: {value.device} != {device}")

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


_READS = (torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__bool__, torch.Tensor.cpu)


class Recorded(TorchFunctionMode):
    """Meta tensors hold no numbers, so a step on `meta` cannot decide a check (`if torch.any(...)`)
    or log a loss part by itself. The same step runs first on the CPU, recording every value it
    reads out of a tensor, in order; on `meta` the same reads return those values, so the meta
    run takes exactly the CPU run's path through the code."""

    def __init__(self, values: list | None = None) -> None:
        super().__init__()
        self.replay = values is not None
        self.values = values if values is not None else []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in _READS:
            return func(*args, **kwargs)
        if not self.replay:
            value = func(*args, **kwargs)
            self.values.append(value)
            return value
        value = self.values.pop(0)
        return value if args[0].device.type == "meta" else func(*args, **kwargs)


def _plan(alternates: bool):
    records = [QARecord(q, a, perturbed_answers=(a[::-1],)) for q, a in toy_qa()]
    return build_items(
        records[:4], records[4:10], toy_tokenizer(), TEMPLATE, refusals=REFUSALS, seed=0,
        max_length=128, epochs=1, alternates=alternates,
    )  # fmt: skip


def _step(method, model, tokenizer):
    """One unlearning step as the engine builds it: reference log-probs, the frozen reference
    model and constants from `method_loss`, the batch as the data loader collates it (CPU)."""
    needs = set(method.required_inputs())
    plan = with_reference_logps(
        model,
        _plan(alternates=bool(needs & {"alternate_logps"})),
        pad_id=tokenizer.pad_token_id,
        fields=needs & REFERENCE_FIELDS,
    )
    loss, hook = method_loss(method, model)
    guard = DeviceGuard(model, *([loss.frozen] if loss.frozen is not None else []))
    batch = collate_items(plan[0][:3], pad_id=tokenizer.pad_token_id)
    assert batch["forget"]["input_ids"].device.type == "cpu"
    try:
        if hook is None:
            value, _ = loss(model, batch)
        else:
            value, _ = method.task_losses(loss.inputs(model, batch))
    finally:
        guard.close()
    return value, guard


def _method(name: str, layers: int):
    cls = get_method(name)
    options = cls.options_for_depth(layers) if isinstance(cls, DepthScaledMethod) else {}
    return build_method(name, options)


@pytest.mark.parametrize("name", trained_method_names())
def test_every_methods_step_keeps_each_tensor_on_its_models_device(name):
    # A boolean mask's selection has a data-dependent size, which `meta` can only assume: every
    # element selected (the toy batch's masks select every row they are asked about).
    tokenizer = toy_tokenizer()
    cpu_model = build_tiny_model(tokenizer, scale="tiny", seed=0)
    with Recorded() as record:
        cpu_value, _ = _step(_method(name, 3), cpu_model, tokenizer)
    model = place_model(build_tiny_model(tokenizer, scale="tiny", seed=0), "meta")
    with (
        Recorded(list(record.values)),
        torch.fx.experimental._config.patch(meta_nonzero_assume_all_nonzero=True),
    ):
        value, guard = _step(_method(name, 3), model, tokenizer)
    assert guard.calls > 0
    assert guard.mismatches == []
    assert value.device.type == "meta" and cpu_value.device.type == "cpu"


def test_the_guard_catches_a_reference_model_left_on_another_device():
    # The crash of the first GPU run: the frozen model on the CPU, the trained model elsewhere.
    tokenizer = toy_tokenizer()
    model = place_model(build_tiny_model(tokenizer, scale="tiny", seed=0), "meta")
    loss, _ = method_loss(build_method("kl"), model)
    loss.frozen = build_tiny_model(tokenizer, scale="tiny", seed=0).eval()  # left on the CPU
    batch = collate_items(_plan(False)[0][:2], pad_id=tokenizer.pad_token_id)
    # forward_logits sends the batch to each model's own device, so the two models' logits meet
    # on different devices inside the KL term.
    with pytest.raises(RuntimeError, match="meta"):
        loss(model, batch)


def test_auto_is_the_cpu_here_and_a_missing_gpu_is_refused_by_name():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device("CPU") == torch.device("cpu")
    with pytest.raises(ConfigError, match=r"model.device=cuda:1 but this torch build sees no CUDA"):
        resolve_device("cuda:1")
    with pytest.raises(ConfigError, match="model.device must be auto, cpu, cuda or cuda:N"):
        resolve_device("gpu")


def test_configure_reaches_processes_it_starts_and_sets_the_precision_key():
    assert configure("cpu", "float32") == torch.device("cpu")
    assert default_device() == torch.device("cpu") and precision_key() == {}
    configure("cpu", "bfloat16", mixed_precision="bf16", gradient_checkpointing=True)
    assert precision().dtype == "bfloat16"
    assert precision_key() == {
        "dtype": "bfloat16", "mixed_precision": "bf16", "gradient_checkpointing": True
    }  # fmt: skip
    import subprocess
    import sys

    seen = subprocess.run(
        [sys.executable, "-c", "from forgetbench.device import precision; print(precision())"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "dtype='bfloat16'" in seen and "gradient_checkpointing=True" in seen
    with pytest.raises(ConfigError, match="model.mixed_precision=fp16 needs a CUDA GPU"):
        configure("cpu", mixed_precision="fp16")


def test_a_cli_command_refuses_a_gpu_it_does_not_have(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from forgetbench.cli import main

    code = main(["config", "model.device=cuda"])  # before any work: the config is only printed
    err = capsys.readouterr().err
    assert code == 2 and "model.device=cuda but this torch build sees no CUDA GPU" in err


@pytest.mark.parametrize("backend_name", ["fast", "naive"])
def test_every_kind_of_evaluation_request_keeps_each_tensor_on_the_models_device(backend_name):
    # Scoring (a shared prompt, one answer, no EOS, a whole document) and greedy generation, as
    # every evaluation task asks them, through the backend `forgetbench eval` uses and the
    # reference one `bench eval` checks it against.
    from forgetbench.eval.backend import FastBackend, NaiveBackend, serve
    from forgetbench.eval.requests import Generate, Score

    tokenizer = toy_tokenizer()
    qa = toy_qa()
    prompts = [TEMPLATE.prompt(q) for q, _ in qa]
    answers = [TEMPLATE.answer(a) for _, a in qa]
    requests = [
        Score(prompts[0], (answers[0], answers[1], answers[2])),
        Generate(prompts[1], 4),
        Score(prompts[2], (answers[2],), add_eos=False),
        Score("", (f"{qa[3][0]} {qa[3][1]}",), add_eos=False, max_length=None),
        Generate(prompts[4], 3),
    ]

    def answer(model):
        backend = (
            FastBackend(model, tokenizer, batch_size=2)
            if backend_name == "fast"
            else NaiveBackend(model, tokenizer)
        )
        guard = DeviceGuard(model)
        try:
            return serve(backend, requests), guard
        finally:
            guard.close()

    with Recorded() as record:
        expected, _ = answer(build_tiny_model(tokenizer, scale="tiny", seed=2).eval())
    model = place_model(build_tiny_model(tokenizer, scale="tiny", seed=2), "meta").eval()
    with (
        Recorded(list(record.values)),
        torch.fx.experimental._config.patch(meta_nonzero_assume_all_nonzero=True),
    ):
        responses, guard = answer(model)
    assert guard.calls > 0 and guard.mismatches == []
    generated = [r for q, r in zip(requests, responses, strict=True) if isinstance(q, Generate)]
    assert generated == [
        r for q, r in zip(requests, expected, strict=True) if isinstance(q, Generate)
    ]


def test_lora_unlearning_references_the_base_weights_without_a_copy_and_saves_them_merged(
    tmp_path,
):
    # With LoRA a method's reference is the same model with its adapters off: its outputs are the
    # start model's, its parameters the trained model's own tensors (no second copy); a snapshot
    # saved mid-run is the base with the adapters folded in, loadable by plain transformers.
    from forgetbench.modeling.forward import forward_logits
    from forgetbench.modeling.loading import load_model, save_model
    from forgetbench.modeling.lora import apply_lora, lora_targets

    tokenizer = toy_tokenizer()
    start = build_tiny_model(tokenizer, scale="tiny", seed=0).eval()
    model = apply_lora(build_tiny_model(tokenizer, scale="tiny", seed=0))
    assert lora_targets(start) == ["q_proj", "v_proj"]
    loss, _ = method_loss(_method("kl", 3), model)
    reference = loss.frozen
    assert {id(p) for p in reference.parameters()} == {id(p) for p in model.parameters()}
    batch = collate_items(_plan(False)[0][:3], pad_id=tokenizer.pad_token_id)
    with torch.no_grad():  # make the adapters non-zero, as training would
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.add_(0.05 * torch.randn_like(p))
    trained = forward_logits(model, batch["retain"])
    torch.testing.assert_close(
        forward_logits(reference, batch["retain"]), forward_logits(start, batch["retain"])
    )
    assert not torch.allclose(trained, forward_logits(start, batch["retain"]))
    save_model(model, tokenizer, tmp_path / "snapshot")
    merged, _ = load_model(tmp_path / "snapshot", device="cpu")
    torch.testing.assert_close(
        forward_logits(merged, batch["retain"]), trained, rtol=1e-4, atol=1e-4
    )


def test_lora_targets_follow_the_architecture():
    from transformers import GPT2Config, GPT2LMHeadModel

    from forgetbench.errors import ConfigError as Refused
    from forgetbench.modeling.lora import apply_lora, lora_targets

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    assert lora_targets(gpt2) == ["c_attn"]
    adapted = apply_lora(gpt2)
    assert any("c_attn.lora_A" in n for n, _ in adapted.named_parameters())
    with pytest.raises(Refused, match="no module named q_proj"):
        apply_lora(
            GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64)),
            target_modules=["q_proj"],
        )


def test_a_lora_unlearning_run_trains_adapters_only_and_publishes_merged_models(tmp_path):
    from forgetbench.modeling.loading import load_model, save_model
    from forgetbench.train.loop_config import LoopConfig
    from forgetbench.train.unlearn import run_unlearning

    tokenizer = toy_tokenizer()
    start_dir = save_model(
        build_tiny_model(tokenizer, scale="tiny", seed=0), tokenizer, tmp_path / "start"
    )
    records = [QARecord(q, a) for q, a in toy_qa()]
    config = LoopConfig(lr=5e-3, epochs=2, batch_size=2, per_device_batch_size=2, warmup_epochs=0)
    run = dict(
        model_dir=start_dir, forget=records[:4], retain=records[4:10], method=build_method("npo"),
        config=config, template=TEMPLATE, refusals=REFUSALS, split="forget10", max_length=128,
        progress=False,
    )  # fmt: skip
    full = run_unlearning(tmp_path / "full", **run)
    lora = run_unlearning(tmp_path / "lora", **run, lora={"rank": 4, "alpha": 8})
    assert full.model_dir.parent.name != lora.model_dir.parent.name  # LoRA is in the key
    assert [s for s, _ in lora.snapshots] == [0, 2, 4]
    start = dict(load_model(start_dir, device="cpu")[0].named_parameters())
    for _, folder in lora.snapshots[1:]:
        model, _ = load_model(folder, device="cpu")  # plain transformers weights: merged
        moved = {n for n, p in model.named_parameters() if not torch.equal(p, start[n])}
        # only the adapted projections moved: LoRA adapts q_proj and v_proj, nothing else trains
        assert moved and all(n.endswith(("q_proj.weight", "v_proj.weight")) for n in moved)
    assert lora.losses[-1] < lora.losses[0]  # NPO's loss falls as the forget answers lose mass


def test_a_selective_method_with_lora_trains_only_the_adapters_on_its_modules():
    # RMU updates mlp.down_proj of chosen blocks; with LoRA the base weights stay frozen (they are
    # also the reference model), so only adapters on those modules may train — and without any
    # there, the refusal says how to put them there.
    from forgetbench.modeling.lora import apply_lora

    tokenizer = toy_tokenizer()
    method = _method("rmu", 3)
    model = apply_lora(build_tiny_model(tokenizer, seed=0), target_modules=["down_proj", "q_proj"])
    method_loss(method, model)
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n and "down_proj" in n for n in trained)
    with pytest.raises(ConfigError, match="none of them carries an adapter"):
        method_loss(method, apply_lora(build_tiny_model(tokenizer, seed=0)))


def test_rmu_with_lora_and_no_targets_adapts_exactly_the_modules_rmu_updates(tmp_path):
    # The architecture's default targets (q_proj, v_proj) carry none of RMU's modules; with no
    # targets given, the adapters go on the down-projections of RMU's update layers.
    from forgetbench.modeling.loading import load_model, save_model
    from forgetbench.train.loop_config import LoopConfig
    from forgetbench.train.unlearn import run_unlearning

    tokenizer = toy_tokenizer()
    base = build_tiny_model(tokenizer, scale="tiny", seed=0)
    start_dir = save_model(base, tokenizer, tmp_path / "start")
    method = _method("rmu", base.config.num_hidden_layers)
    records = [QARecord(q, a) for q, a in toy_qa()]
    config = LoopConfig(lr=5e-3, epochs=1, batch_size=2, per_device_batch_size=2, warmup_epochs=0)
    result = run_unlearning(
        tmp_path / "lora", model_dir=start_dir, forget=records[:4], retain=records[4:10],
        method=method, config=config, template=TEMPLATE, refusals=REFUSALS, split="forget10",
        max_length=128, progress=False, lora={"rank": 4, "alpha": 8, "target_modules": None},
    )  # fmt: skip
    start = dict(load_model(start_dir, device="cpu")[0].named_parameters())
    model, _ = load_model(result.model_dir, device="cpu")
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, start[n])}
    expected = {f"model.layers.{i}.mlp.down_proj.weight" for i in method.update_layers}
    assert moved == expected


def test_a_stage_cost_is_filled_when_its_block_ends_and_has_no_memory_key_on_the_cpu():
    from forgetbench.device import StageCost, stage_cost

    with stage_cost() as cost:
        sum(range(10_000))
    assert cost.seconds > 0 and cost.peak_gpu_mib is None
    assert list(cost.record()) == ["seconds"]
    assert StageCost(2.0, 512.5).record() == {"seconds": 2.0, "peak_gpu_mib": 512.5}
    with pytest.raises(ValueError), stage_cost() as failed:
        raise ValueError
    assert failed.seconds == 0.0  # a failed stage records nothing
