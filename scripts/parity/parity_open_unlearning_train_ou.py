"""open-unlearning's side of scripts/parity/parity_open_unlearning_train.py: run ONLY by
open-unlearning's own interpreter (its virtual environment, transformers 4.45), never imported by
forgetbench.

    OU_PYTHON scripts/parity/parity_open_unlearning_train_ou.py SPEC.json

SPEC.json (written by the forgetbench side) names open-unlearning's checkout, the model folder, a
.pt file of batches and the cases to run; this script imports open-unlearning's trainer classes
(`src/trainer`), builds each trainer with the method_args open-unlearning's own
`configs/trainer/<Handler>.yaml` gives (merged over the files it lists under `defaults`, as hydra
composes them), and
- "loss" cases: calls the trainer's `compute_loss(model, inputs)` on each saved batch;
- "train" cases: runs the trainer's `train()` (HF's Trainer loop) over the saved micro-batches in
  their saved order, recording every micro-batch's `compute_loss` value,
then writes SPEC's `result` JSON. The only things changed from open-unlearning's run are the
ones a CPU-only, fixed-order comparison needs, each listed at its line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import yaml


def method_args(ou_root: Path, handler_file: str) -> dict:
    """The trainer file's method_args over those of the files its `defaults` list (hydra's
    order: defaults first, the file itself last)."""
    path = ou_root / "configs" / "trainer" / f"{handler_file}.yaml"
    config = yaml.safe_load(path.read_text()) or {}
    merged: dict = {}
    for parent in config.get("defaults", []):
        if isinstance(parent, str) and parent != "_self_":
            merged.update(method_args(ou_root, parent))
    merged.update(config.get("method_args") or {})
    return merged


def load_model(path: str):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        path, torch_dtype=torch.float32, attn_implementation="sdpa"
    )
    return model.eval()


def inputs_for(case: dict, batch: dict) -> dict:
    forget = {k: batch["forget"][k] for k in ("input_ids", "attention_mask", "labels")}
    inputs = {"forget": forget, "retain": batch["retain"]}
    if case.get("chosen"):  # DPO: the chosen answer is a refusal (IdkDPO) or an alternate (AltPO)
        inputs["forget"] = {"original": forget, "alternate": batch[case["chosen"]]}
    return inputs


def build_trainer(spec: dict, case: dict, model, cls, data: dict | None = None, **training):
    from transformers import TrainingArguments

    args = method_args(Path(spec["ou_root"]), case["file"])
    args.update(case.get("override", {}))
    # The composed run has no retain_loss_eps for PDU (???): its run.sh sets it; CPU only, no
    # tensorboard, fp32 (bf16 needs a GPU here).
    targs = TrainingArguments(
        output_dir=spec["work"],
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        remove_unused_columns=False,
        **training,
    )
    return cls(model=model, args=targs, **(data or {}), **args), args


def control_vector(trainer, spec: dict, args: dict) -> None:
    # open-unlearning draws torch.rand(1, 1, H) / norm x steering_coeff on first use; both tools
    # get forgetbench's unit vector u instead, scaled by open-unlearning's own coefficient.
    u = torch.tensor(spec["control_vector"], dtype=torch.float32)
    trainer.control_vec = (u / u.norm() * float(args["steering_coeff"])).view(1, 1, -1)


def run_loss_cases(spec: dict, registry: dict) -> dict:
    batches = torch.load(spec["batches"])
    model = load_model(spec["model"])
    reference = load_model(spec["reference"]) if spec.get("reference") else None
    out = {}
    for case in spec["loss_cases"]:
        trainer, args = build_trainer(spec, case, model, registry[case["handler"]])
        if reference is not None:  # in place of the trainer's deep copy of the model
            trainer.ref_model = reference
            if case["handler"] == "RMU":
                trainer.ref_module = trainer._get_matching_module(reference, args["module_regex"])
        if case["handler"] == "RMU":
            control_vector(trainer, spec, args)
        values = {}
        for size, batch in batches.items():
            loss = trainer.compute_loss(model, inputs_for(case, batch))
            values[size] = float(loss.detach())
        out[case["name"]] = {"values": values, "method_args": args}
    return out


def run_train_cases(spec: dict, registry: dict) -> dict:
    from torch.utils.data import SequentialSampler

    out = {}
    for case in spec["train_cases"]:
        micro = torch.load(case["batches"])  # forgetbench's micro-batches, in its order
        model = load_model(spec["model"])
        base = registry[case["handler"]]
        seen: list[float] = []

        class Recorded(base):  # type: ignore[misc, valid-type]
            record = seen

            # forgetbench's order rather than HF's seeded RandomSampler.
            def _get_train_sampler(self):
                return SequentialSampler(self.train_dataset)

            def compute_loss(self, model, inputs, return_outputs=False):
                loss = super().compute_loss(model, inputs, return_outputs)
                self.record.append(float(loss[0] if return_outputs else loss))
                return loss

        loop = case["loop"]
        trainer, args = build_trainer(
            spec, case, model, Recorded,
            data={"train_dataset": [inputs_for(case, b) for b in micro],
                  # each row is one collated micro-batch
                  "data_collator": lambda rows: rows[0]},
            per_device_train_batch_size=1,
            gradient_accumulation_steps=loop["accumulation"],
            learning_rate=loop["lr"],
            weight_decay=loop["weight_decay"],
            max_grad_norm=loop["max_grad_norm"],
            # load_trainer_args' floor(warmup_epochs x examples / (batch x cuda devices)):
            # computed here with one device, as its division by torch.cuda.device_count() (0 on
            # a CPU) cannot run.
            warmup_steps=loop["warmup_steps"],
            lr_scheduler_type="linear",
            num_train_epochs=1,
            max_steps=loop["steps"],
            # paged_adamw_32bit is bitsandbytes' CUDA optimizer; on the CPU HF's torch AdamW
            # (same betas, eps and decoupled decay).
            optim="adamw_torch",
            logging_steps=1,
            seed=0,
            eval_strategy="no",
            do_eval=False,
            dataloader_num_workers=0,
        )  # fmt: skip
        trainer.train()
        accumulation = loop["accumulation"]
        steps = [
            sum(seen[i : i + accumulation]) / accumulation
            for i in range(0, len(seen), accumulation)
        ]
        logged = [row["loss"] for row in trainer.state.log_history if "loss" in row]
        torch.save(
            {k: v.detach().clone() for k, v in model.state_dict().items()}, case["final_weights"]
        )
        out[case["name"]] = {"micro": seen, "steps": steps, "hf_logged": logged,
                             "method_args": args}  # fmt: skip
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    sys.path.insert(0, str(Path(spec["ou_root"]) / "src"))
    torch.manual_seed(0)
    from trainer import TRAINER_REGISTRY  # open-unlearning's registry of its trainer classes

    result = {}
    if spec.get("loss_cases"):
        result["loss"] = run_loss_cases(spec, TRAINER_REGISTRY)
    if spec.get("train_cases"):
        result["train"] = run_train_cases(spec, TRAINER_REGISTRY)
    Path(spec["result"]).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
