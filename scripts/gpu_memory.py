"""Peak GPU memory of one unlearning step of every method on a realistic model shape.

    python scripts/gpu_memory.py --size 8b --lora --dtype bfloat16 --length 512 --batch 4

Random weights (memory and speed do not depend on them) in the built-in Llama's block shapes;
each method's step is built by the engine exactly as `forgetbench unlearn` builds it (frozen
reference or adapters-off reference, reference log-probs, constants), run forward and backward,
and its peak `torch.cuda.max_memory_allocated` printed as one JSON line per method, with
`seconds` (building the step and the first one) and `step_seconds` (the mean of --timed-steps
warm steps after it: forward, backward and the AdamW update).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time

import torch


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="8b")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--methods", default="")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument(
        "--timed-steps", type=int, default=1, help="warm steps timed after the first"
    )
    parser.add_argument("--device", default="cuda", help="cpu checks the script, not memory")
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA GPU"}))
        return 1

    from forgetbench.device import DTYPES, place_model
    from forgetbench.methods.base import (
        DepthScaledMethod,
        build_method,
        get_method,
        trained_method_names,
    )
    from forgetbench.modeling.builtin import LLAMA_SHAPES, build_tiny_model
    from forgetbench.modeling.encoding import Encoded
    from forgetbench.modeling.lora import apply_lora
    from forgetbench.train.items import (
        REFERENCE_FIELDS,
        UnlearnItem,
        collate_items,
        with_reference_logps,
    )
    from forgetbench.train.loop import enable_gradient_checkpointing
    from forgetbench.train.method_loss import method_loss
    from forgetbench.train.unlearn import lora_for_method

    class Tokenizer:  # what build_tiny_model reads: a 32k vocabulary, as Llama-2's
        bos_token_id, eos_token_id, pad_token_id = 1, 2, 0

        def __len__(self) -> int:
            return 32000

    tokenizer = Tokenizer()
    layers = LLAMA_SHAPES[args.size].layers if args.size in LLAMA_SHAPES else 4
    generator = torch.Generator().manual_seed(0)

    def encoded() -> Encoded:
        ids = torch.randint(3, 32000, (args.length,), generator=generator).tolist()
        prompt = args.length // 4
        return Encoded(ids, [-100] * prompt + ids[prompt:], prompt)

    items = [
        [
            UnlearnItem(encoded(), encoded(), encoded(), alternate=encoded())
            for _ in range(args.batch)
        ]
    ]
    # ICU-like methods unlearn by an instruction, not a training step: nothing to measure.
    names = [n for n in args.methods.split(",") if n] or list(trained_method_names())
    for name in names:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        cls = get_method(name)
        options = cls.options_for_depth(layers) if isinstance(cls, DepthScaledMethod) else {}
        method = build_method(name, options)
        needs = set(method.required_inputs())
        with torch.device(args.device):
            default = torch.get_default_dtype()
            torch.set_default_dtype(DTYPES[args.dtype])
            try:
                model = build_tiny_model(tokenizer, size=args.size, seed=0)
            finally:
                torch.set_default_dtype(default)
        model = place_model(model, args.device)
        weights = torch.cuda.memory_allocated() if cuda else 0
        plan = with_reference_logps(model, items, pad_id=0, fields=needs & REFERENCE_FIELDS)
        if args.lora:
            model = apply_lora(model, **lora_for_method(method, model, {}))
        if args.gradient_checkpointing:
            enable_gradient_checkpointing(model)
        model.train()
        loss, hook = method_loss(method, model)
        batch = collate_items(plan[0], pad_id=0)
        row: dict[str, object] = {
            "method": name,
            "size": args.size,
            "dtype": args.dtype,
            "lora": args.lora,
            "length": args.length,
            "batch": args.batch,
        }
        # AdamW's two moments are part of a step's memory: one real optimizer step.
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)

        # The first step gives the peak memory; then --timed-steps warm steps (kernels chosen,
        # optimizer state allocated) give the step time, to the end of their GPU work.
        try:
            times = []
            for index in range(1 + args.timed_steps):
                step_started = time.perf_counter()
                if hook is None:
                    value, _ = loss(model, batch)
                    value.backward()
                else:
                    value, retain_loss = method.task_losses(loss.inputs(model, batch))
                    (value + retain_loss).backward()
                optimizer.step()
                optimizer.zero_grad()
                if cuda:
                    torch.cuda.synchronize()
                if index == 0:
                    peak = torch.cuda.max_memory_allocated() if cuda else 0
                    row.update(
                        loss=float(value.detach()),
                        weights_gib=round(weights / 2**30, 2),
                        peak_gib=round(peak / 2**30, 2),
                        seconds=round(time.perf_counter() - started, 1),
                    )
                else:
                    times.append(time.perf_counter() - step_started)
            row["step_seconds"] = round(sum(times) / len(times), 3) if times else None
        except torch.cuda.OutOfMemoryError:
            row["peak_gib"] = "out of memory"
        print(json.dumps(row), flush=True)
        del model, loss, hook, batch, plan, optimizer
        gc.collect()
    return 0


if __name__ == "__main__":
    sys.exit(main())
