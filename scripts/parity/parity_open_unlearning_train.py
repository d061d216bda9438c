"""Parity harness: forgetbench's unlearning losses and training loop vs open-unlearning's trainers.

Two checks, forgetbench under `--preset open_unlearning` (the options that preset gives each method)
and open-unlearning (OU) from its own checkout and virtual environment, run as a subprocess
(`scripts/parity/parity_open_unlearning_train_ou.py`, which imports OU's trainer classes and
builds each with the method_args of OU's own `configs/trainer/<Handler>.yaml`):

1. Loss on one batch: the first 8 forget items of forgetbench's unlearning plan (each with its
   retain partner, refusal and alternate answer; unequal answer lengths) at B = 1 (the first item)
   and B = 8. Same finetuned weights, a copy as the reference model, the same RMU control vector
   (forgetbench's u, scaled by each tool's steering coefficient). forgetbench's value is the
   engine's own `MethodLoss`; OU's is its trainer's `compute_loss(model, inputs)` on the same
   tensors (saved once to a .pt file both sides read).
2. A --steps run of each --train-methods method under the preset's loop (AdamW, weight decay,
   warm-up, HF's linear schedule, clipping, 8 x 4 accumulation), from the same weights and in the
   same micro-batch order: forgetbench's `train_loop` runs first and every micro-batch it collates
   is saved; OU's trainer `train()` (HF 4.45's loop) then runs over exactly those micro-batches in
   that order. Compared: each step's mean micro-batch loss, and the final weights.

    .venv/bin/python scripts/parity/parity_open_unlearning_train.py \
        --model RUN/models/finetune-*/model --data RUN/data --out /tmp/parity-train \
        [--methods npo rmu ...] [--lr 1e-5 1e-3]

Adaptations (why each): OU's `load_trainer_args` divides by torch.cuda.device_count(), zero on a
CPU, so the warm-up steps are passed as its formula gives them for one device; its optimizer
`paged_adamw_32bit` is bitsandbytes' CUDA one, so HF's `adamw_torch` runs instead (same betas, eps,
decoupled decay); fp32 instead of bf16. The model folder is read by transformers 4.45 directly
(only the weights and config are loaded; no tokenizer is needed as the batches are token ids).
Exits 1 if any compared number differs by more than its tolerance. The loss rows KNOWN_DIFFERENCES
names (OU bugs and positions forgetbench does not copy, docs/methods.md) must instead equal OU's
formula written here (`as_open_unlearning`); a training run of such a method (undial, pdu) fails by
design. Results: docs/parity.md, "Training".

Longer than 400 lines: one harness whose two checks share the prepared plan, the preset's methods
and the way open-unlearning's side is asked (`run_ou`); open-unlearning's formulas where
forgetbench differs on purpose are their own module, `ou_formulas.py`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import torch
from ou_formulas import KNOWN_DIFFERENCES, as_open_unlearning
from reference_code import open_unlearning_options

# forgetbench method -> (OU handler class, OU trainer file, which answer DPO prefers, overrides of
# that file's method_args that the run needs).
CASES: dict[str, tuple[str, str, str | None, dict[str, Any]]] = {
    "grad_ascent": ("GradAscent", "GradAscent", None, {}),
    "grad_diff": ("GradDiff", "GradDiff", None, {}),
    "kl": ("GradDiff", "GradDiff", None, {"retain_loss_type": "KL"}),
    "npo": ("NPO", "NPO", None, {}),
    "dpo": ("DPO", "DPO", "refusal", {}),  # experiment unlearn/tofu/idk: refusals are chosen
    "altpo": ("DPO", "DPO", "alternate", {}),  # community/methods/AltPO: alternates are chosen
    "simnpo": ("SimNPO", "SimNPO", None, {}),
    "wga": ("WGA", "WGA", None, {}),
    "satimp": ("SatImp", "SatImp", None, {}),
    "ce_u": ("CEU", "CEU", None, {}),
    "undial": ("UNDIAL", "UNDIAL", None, {}),
    "rmu": ("RMU", "RMU", None, {}),  # module_regex set per --rmu-layers
    # community/methods/PDU/run.sh's TOFU run: pref 100, eps 0.3, eta 5.
    "pdu": ("PDU", "PDU", None, {"alpha": 100.0, "retain_loss_eps": 0.3, "dual_step_size": 5.0}),
}


def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Model, tokenizer, template, and the unlearning plan (every forget item with its retain
    partner, refusal and alternate) with the start model's reference log-probs."""
    from forgetbench.data.tofu import load_tofu
    from forgetbench.eval.runner import tofu_root
    from forgetbench.methods import build_method
    from forgetbench.methods.refusals import load_refusals
    from forgetbench.modeling.loading import load_model
    from forgetbench.modeling.templates import resolve_template
    from forgetbench.study.unlearn import forget_records, retain_split_for
    from forgetbench.train.items import REFERENCE_FIELDS, build_items, with_reference_logps

    model, tokenizer = load_model(str(args.model))
    model.eval()
    template = resolve_template("auto", tokenizer, str(args.model))
    tofu = tofu_root(args.data)
    forget = forget_records(tofu, args.split, build_method("altpo", {}))  # with alternates
    retain = load_tofu(tofu, retain_split_for(args.split))
    # Enough epochs of pairings for the training runs' steps x batch items.
    need = max(8, args.steps * args.batch_size)
    epochs = -(-need // len(forget))
    plan = build_items(
        forget, retain, tokenizer, template, refusals=load_refusals(None), seed=0,
        max_length=512, epochs=epochs, alternates=True,
    )  # fmt: skip
    pad = tokenizer.pad_token_id
    items = with_reference_logps(model, plan, pad_id=pad, fields=REFERENCE_FIELDS)
    state = {"model": model, "tokenizer": tokenizer, "template": template.name,
             "items": [item for epoch in items for item in epoch]}  # fmt: skip
    if args.reference:
        # Another start model as the reference (the finetuned model's own pretrained parent):
        # at a copy every log-ratio and KL is 0, which hides how a method reads its reference.
        reference, _ = load_model(str(args.reference))
        state["reference"] = reference.eval().requires_grad_(False)
        items = with_reference_logps(reference, plan, pad_id=pad, fields=REFERENCE_FIELDS)
        state["reference_items"] = [item for epoch in items for item in epoch]
    return state


def preset_method(name: str, overrides: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The loop and method `--preset open_unlearning` gives `name` (as `resolve_method` builds
    them: the preset's options, then the method's own default reduction, `tokens`)."""
    from forgetbench.methods import build_method
    from forgetbench.train.presets import unlearn_preset

    loop, options = unlearn_preset("open_unlearning", name)
    return loop, build_method(name, {**options, **(overrides or {})})


def plain(batch: dict[str, Any]) -> dict[str, Any]:
    """The tensors OU reads: input ids, attention mask and labels of each answer kind."""
    keep = ("input_ids", "attention_mask", "labels")
    return {
        kind: {k: batch[kind][k].clone() for k in keep}
        for kind in ("forget", "retain", "refusal", "alternate")
        if kind in batch
    }


def forgetbench_losses(
    state: dict[str, Any],
    methods: list[str],
    rmu_layers: list[int],
    batches: dict[str, Any],
    frozen: Any,
) -> dict[str, dict[str, float]]:
    from forgetbench.train.method_loss import MethodLoss

    model = state["model"]
    out: dict[str, dict[str, float]] = {}
    for name, overrides in expand(methods, rmu_layers):
        _, method = preset_method(name, overrides)
        constants = method.prepare(model) if hasattr(method, "prepare") else {}
        loss_fn = MethodLoss(method, frozen=frozen, constants=constants)
        values = {}
        for size, batch in batches.items():
            loss, _ = loss_fn(model, batch)
            values[size] = float(loss)
            if (name, size) in KNOWN_DIFFERENCES:
                values[f"{size}:ou_formula"] = as_open_unlearning(
                    name, method, overrides, state, frozen, batch
                )
        out[label(name, overrides)] = values
    return out


def expand(methods: list[str], rmu_layers: list[int]) -> list[tuple[str, dict[str, Any]]]:
    rows: list[tuple[str, dict[str, Any]]] = []
    for name in methods:
        if name == "rmu":
            rows += [(name, {"layer": layer, "seed": 0}) for layer in rmu_layers]
        else:
            rows.append((name, {}))
    return rows


def label(name: str, overrides: dict[str, Any]) -> str:
    return f"rmu@{overrides['layer']}" if name == "rmu" else name


def ou_case(name: str, overrides: dict[str, Any]) -> dict[str, Any]:
    handler, file, chosen, extra = CASES[name]
    extra = dict(extra)
    if name == "rmu":
        extra["module_regex"] = rf"model\.layers\.{overrides['layer']}"
    return {"name": label(name, overrides), "handler": handler, "file": file, "chosen": chosen,
            "override": extra}  # fmt: skip


def run_ou(args: argparse.Namespace, spec: dict[str, Any]) -> dict[str, Any]:
    spec_file = args.out / f"ou-spec-{spec['tag']}.json"
    spec_file.write_text(json.dumps(spec, indent=1))
    side = Path(__file__).with_name("parity_open_unlearning_train_ou.py")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads),
           "PYTHONPATH": "", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
    cmd = [str(args.ou_python), str(side), str(spec_file)]
    print("open-unlearning:", " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=True)
    return json.loads(Path(spec["result"]).read_text())


def train_forgetbench(
    state: dict[str, Any], name: str, lr: float, args: argparse.Namespace
) -> tuple[list[float], list[dict[str, Any]], dict[str, Any], Any]:
    """`args.steps` optimizer steps of the preset's loop (one epoch of steps x batch items), from
    the finetuned weights; returns the step losses, every micro-batch as collated, the loop, and
    the final model."""
    from forgetbench.modeling.loading import load_model
    from forgetbench.train.items import collate_items
    from forgetbench.train.loop import train_loop
    from forgetbench.train.method_loss import method_loss

    loop, method = preset_method(name)
    loop = replace(loop, lr=lr, epochs=1, seed=0)
    model, tokenizer = load_model(str(args.model))
    items = state["items"][: args.steps * loop.batch_size]
    loss_fn, hook = method_loss(method, model)
    seen: list[dict[str, Any]] = []

    def collate(rows: list[Any]) -> dict[str, Any]:
        batch = collate_items(rows, pad_id=tokenizer.pad_token_id)
        seen.append(plain(batch))
        return batch

    work = args.out / f"fb-train-{name}-lr{lr:g}"
    if work.exists():
        import shutil

        shutil.rmtree(work)  # a checkpoint there would resume instead of training
    result = train_loop(
        model, items, loss_fn=None if hook else loss_fn, step_hook=hook, collate_fn=collate,
        config=loop, out_dir=work, progress=False,
    )  # fmt: skip
    return result.losses, seen, loop, model


def evaluate_both(
    args: argparse.Namespace, tag: str, model: Any, tokenizer: Any, final: dict[str, Any]
) -> dict[str, Any]:
    """`forgetbench eval` (TOFU sets and MIA, as the evaluator parity) of both trained models:
    forgetbench's, and the same architecture holding open-unlearning's final weights."""
    from forgetbench.modeling.loading import save_model

    theirs = copy.deepcopy(model)
    missing, unexpected = theirs.load_state_dict(final, strict=False)
    # Only a tied output matrix may be absent from one side's state dict.
    if unexpected or any(not k.startswith("lm_head") for k in missing):
        raise SystemExit(f"open-unlearning's final weights do not fit: {missing} {unexpected}")
    scores = {}
    for who, trained in (("forgetbench", model), ("open_unlearning", theirs)):
        folder = args.out / f"final-{tag}" / who
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        save_model(trained, tokenizer, folder / "model")
        cmd = [
            str(Path(sys.executable).parent / "forgetbench"), "eval", "--model",
            str(folder / "model"), "--data", str(args.data), "--split", args.split,
            "--out", str(folder / "eval"), "eval.formats=false", "eval.lume=false",
        ]  # fmt: skip
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads)}
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        summary = json.loads((folder / "eval" / "summary.json").read_text())["scores"]
        scores[who] = {k: v for k, v in summary.items() if isinstance(v, int | float)}
    common = sorted(set(scores["forgetbench"]) & set(scores["open_unlearning"]))
    diffs = {k: abs(scores["forgetbench"][k] - scores["open_unlearning"][k]) for k in common}
    worst = max(diffs, key=lambda k: diffs[k])
    print(
        f"final evaluation: {len(common)} summary scores, max |diff| {diffs[worst]:.2e} ({worst})"
    )
    for k in ("forget/probability", "retain/probability", "model_utility", "forget/rougeL"):
        if k in diffs:
            print(f"  {k:24s} {scores['forgetbench'][k]:.6f} {scores['open_unlearning'][k]:.6f}")
    return {"scores": scores, "max_diff": diffs[worst], "worst": worst}


def main() -> int:
    ap = open_unlearning_options(
        __doc__, model="finetuned save_pretrained folder", tol="loss on one batch"
    )
    ap.add_argument("--methods", nargs="*", default=list(CASES), help="loss-on-one-batch methods")
    ap.add_argument(
        "--rmu-layers", nargs="*", type=int, help="RMU's block(s); default: middle, last"
    )
    ap.add_argument("--reference", type=Path, help="also: this model as the reference model")
    ap.add_argument("--train-methods", nargs="*", default=["grad_diff", "npo"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32, help="the preset's effective batch")
    ap.add_argument("--lr", nargs="*", type=float, help="training lr(s); default: the preset's")
    ap.add_argument("--eval", action="store_true", help="also evaluate both trained models")
    ap.add_argument("--train-tol", type=float, default=1e-3, help="step losses")
    args = ap.parse_args()
    unknown = sorted((set(args.methods) | set(args.train_methods)) - set(CASES))
    if unknown:
        print(
            f"--methods: {', '.join(unknown)} has no open-unlearning trainer; use {', '.join(CASES)}"
        )
        return 2
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    state = prepare(args)
    layers = state["model"].config.num_hidden_layers
    rmu_layers = (
        args.rmu_layers if args.rmu_layers is not None else sorted({layers // 2, layers - 1})
    )
    from forgetbench.methods.rmu import rmu_control_vector
    from forgetbench.train.items import collate_items

    pad = state["tokenizer"].pad_token_id
    report: dict[str, Any] = {"model": str(args.model), "template": state["template"]}
    status = 0

    for reference in ["copy"] + (["reference"] if args.reference else []) if args.methods else []:
        items = state["items"] if reference == "copy" else state["reference_items"]
        frozen = (
            copy.deepcopy(state["model"]).eval().requires_grad_(False)
            if reference == "copy"
            else state["reference"]
        )
        batches = {str(b): collate_items(items[:b], pad_id=pad) for b in (1, 8)}
        with torch.no_grad():
            ours = forgetbench_losses(state, args.methods, rmu_layers, batches, frozen)
        torch.save({k: plain(v) for k, v in batches.items()}, args.out / "batches.pt")
        spec = {
            "tag": f"loss-{reference}", "ou_root": str(args.ou_root),
            "model": str(args.model.resolve()),
            "reference": None if reference == "copy" else str(args.reference.resolve()),
            "batches": str(args.out / "batches.pt"), "work": str(args.out / "ou-work"),
            "result": str(args.out / f"ou-loss-{reference}.json"),
            "control_vector": rmu_control_vector(state["model"].config.hidden_size, seed=0).tolist(),
            "loss_cases": [ou_case(n, o) for n, o in expand(args.methods, rmu_layers)],
        }  # fmt: skip
        theirs = run_ou(args, spec)["loss"]
        print(
            f"\nreference model: {'a copy of the model' if reference == 'copy' else args.reference}"
        )
        print(
            f"{'method':12s} {'B':>2s} {'forgetbench':>14s} {'open-unlearning':>16s} {'|diff|':>10s}"
        )
        rows = []
        for name, values in ours.items():
            for size, value in values.items():
                if ":" in size:
                    continue
                other = theirs[name]["values"][size]
                diff = abs(value - other)
                known = (name.split("@")[0], size) in KNOWN_DIFFERENCES
                row = {"method": name, "B": int(size), "forgetbench": value,
                       "open_unlearning": other, "diff": diff, "known": known}  # fmt: skip
                flag = ""
                if known:
                    # The difference must be exactly the documented one: open-unlearning's
                    # formula, reproduced on our forward passes, gives open-unlearning's value.
                    row["ou_formula"] = values[f"{size}:ou_formula"]
                    row["ou_formula_diff"] = abs(row["ou_formula"] - other)
                    # Relative above 1: PDU's lambda of 100 multiplies float32 rounding.
                    bad = not row["ou_formula_diff"] <= args.tol * max(1.0, abs(other))
                    flag = f" (known; its formula here {row['ou_formula']:.6f}, off by {row['ou_formula_diff']:.1e})"
                else:
                    bad = not diff <= args.tol
                status |= bad
                print(
                    f"{name:12s} {size:>2s} {value:14.6f} {other:16.6f} {diff:10.2e}{' FAIL' if bad else ''}{flag}"
                )
                rows.append(row)
        report[f"loss_{reference}"] = {
            "rows": rows, "ou_method_args": {k: v["method_args"] for k, v in theirs.items()},
            "rmu_layers": rmu_layers, "blocks": layers,
        }  # fmt: skip

    report["train"] = []
    for lr in args.lr or [None]:
        for name in args.train_methods:
            loop, _ = preset_method(name)
            lr_used = lr if lr is not None else loop.lr
            losses, seen, loop, model = train_forgetbench(state, name, lr_used, args)
            tag = f"{name}-lr{lr_used:g}"
            torch.save(seen, args.out / f"micro-{tag}.pt")
            accumulation = loop.batch_size // loop.per_device_batch_size
            spec = {
                "tag": f"train-{tag}", "ou_root": str(args.ou_root),
                "model": str(args.model.resolve()), "work": str(args.out / f"ou-work-{tag}"),
                "result": str(args.out / f"ou-train-{tag}.json"),
                "train_cases": [{
                    **ou_case(name, {}), "batches": str(args.out / f"micro-{tag}.pt"),
                    "final_weights": str(args.out / f"ou-final-{tag}.pt"),
                    "loop": {"lr": lr_used, "accumulation": accumulation, "steps": args.steps,
                             "weight_decay": loop.weight_decay, "max_grad_norm": loop.max_grad_norm,
                             "warmup_steps": int(loop.warmup_epochs * len(seen) * loop.per_device_batch_size
                                                 // loop.batch_size)},
                }],
            }  # fmt: skip
            theirs = run_ou(args, spec)["train"][name]
            final = torch.load(args.out / f"ou-final-{tag}.pt")
            start = state["model"].state_dict()
            weights = max(
                float((p.detach() - final[k]).abs().max())
                for k, p in model.state_dict().items()
                if k in final
            )
            # How far training moved the weights: the scale the difference above is read against.
            moved = max(
                float((p.detach() - start[k]).abs().max()) for k, p in model.state_dict().items()
            )
            diffs = [abs(a - b) for a, b in zip(losses, theirs["steps"], strict=True)]
            worst = max(diffs)
            bad = not worst <= args.train_tol
            status |= bad
            print(f"\n{name} lr {lr_used:g}, {args.steps} steps of {loop.batch_size} "
                  f"({loop.per_device_batch_size} x {accumulation}), warm-up {spec['train_cases'][0]['loop']['warmup_steps']}:")  # fmt: skip
            print(f"{'step':>4s} {'forgetbench':>14s} {'open-unlearning':>16s} {'|diff|':>10s}")
            for i, (a, b) in enumerate(zip(losses, theirs["steps"], strict=True), start=1):
                print(f"{i:4d} {a:14.6f} {b:16.6f} {abs(a - b):10.2e}")
            print(
                f"max |diff| {worst:.2e}{' FAIL' if bad else ''}; final weights max |diff| "
                f"{weights:.2e} (moved from the start by up to {moved:.2e})"
            )
            if args.eval:
                evaluation = evaluate_both(args, tag, model, state["tokenizer"], final)
                report.setdefault("final_eval", {})[tag] = evaluation
            report["train"].append({
                "method": name, "lr": lr_used, "steps": args.steps, "forgetbench": losses,
                "open_unlearning": theirs["steps"], "hf_logged": theirs["hf_logged"],
                "max_diff": worst, "final_weights_max_diff": weights, "moved": moved, "loop": asdict(loop),
            })  # fmt: skip
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
