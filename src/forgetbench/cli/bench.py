"""`forgetbench bench`: speed benchmarks of training, the evaluation and the whole study (times
and peak memory; not tests)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from forgetbench.cli.config import resolve_config
from forgetbench.cli.usage import UsageError
from forgetbench.config import RunConfig
from forgetbench.errors import UnknownNameError
from forgetbench.study.given import given_data, given_model, trains_given_model

# The study layer and the report are imported inside the commands: they import torch,
# transformers and the metrics (scipy), which `forgetbench --help` never needs.


def bench(args: argparse.Namespace) -> dict[str, Any]:
    from forgetbench.report.console import print_rows
    from forgetbench.study.bench import bench_training

    if args.target not in ("train", "eval", "study"):
        raise UnknownNameError("benchmark target", args.target, ("train", "eval", "study"))
    if args.steps < 0:
        raise UsageError(
            f"forgetbench bench train --steps {args.steps}: a number of optimizer steps is 0 or "
            "more",
            "pass --steps N with N >= 1, or 0 (the default) for the whole split",
        )
    if args.steps and args.target != "train":
        raise UsageError(
            f"forgetbench bench {args.target} does not use --steps: only 'bench train' of a "
            "given model times a number of optimizer steps",
            "drop --steps",
        )
    config = resolve_config(args)
    if not args.out:
        raise UsageError("forgetbench bench: --out is required", "pass a scratch run folder")
    if args.target == "eval":
        return _bench_eval(args, config)
    if args.target == "study":
        from forgetbench.study.bench import bench_study
        from forgetbench.study.pool import quiet_transformers

        quiet_transformers()
        result = bench_study(Path(args.out), config, progress=not args.json)
        if not args.json:
            print_rows(result["stages"] + result["jobs"], title=f"study, scale {config.scale}")
            shares = ", ".join(f"{k} {v:.0%}" for k, v in result["shares"].items())
            print(f"wall {result['wall_seconds']:.1f} s on {result['workers']} workers; {shares}")
        return result
    if trains_given_model(config):
        return _bench_throughput(args, config)
    if args.steps:
        raise UsageError(
            "forgetbench bench train: --steps times a given model",
            "pass --model (with --data) or model.size=1b|8b|..., or drop --steps",
        )
    result = bench_training(
        Path(args.out), scale=config.scale, seed=config.seed, progress=not args.json
    )
    if not args.json:
        print_rows(result["stages"], title=f"training benchmark, scale {config.scale}")
        print(
            f"total {result['total_seconds']:.1f} s, peak memory {result['peak_rss_mib']:.0f} MiB; "
            f"finetuned ROUGE-L on full {result['finetuned_full_rougeL']:.3f}, "
            f"retain model on forget10 {result['retain_forget10_rougeL']:.3f}"
        )
    return result


def _profile(args: argparse.Namespace) -> bool | None:
    return {"on": True, "off": False}.get(getattr(args, "profile", "auto"))


def profile_line(profile: dict[str, Any]) -> str:
    """One line of a `forgetbench.profiling` summary."""
    if not profile["profiled_steps"]:
        return f"profile: {profile['note']}"
    top = profile["top"][0]["name"] if profile["top"] else "-"
    said = [f"{profile['seconds_per_step'] * 1e3:.1f} ms/step"]
    if profile["device_busy_share"] is not None:
        said += [
            f"GPU busy {profile['device_busy_share']:.0%}",
            f"GPU {profile['device_seconds_per_step'] * 1e3:.1f} ms vs launching "
            f"{profile['launch_seconds_per_step'] * 1e3:.1f} ms a step",
            f"{profile['kernels_per_step']:g} kernels",
            f"{profile['host_syncs_per_step']:g} host syncs",
        ]
    said += [f"{profile['host_reads_per_step']:g} host reads a step", f"top: {top[:60]}"]
    return f"profile (steps {profile['skipped_steps'] + 1}-" + (
        f"{profile['skipped_steps'] + profile['profiled_steps']}): " + ", ".join(said)
    )


def _bench_throughput(args: argparse.Namespace, config: RunConfig) -> dict[str, Any]:
    """forgetbench's training loop and HF's Trainer on the same model, data and recipe."""
    from forgetbench.study.bench import BENCH_TRAIN_FILE, bench_train_throughput
    from forgetbench.study.pool import quiet_transformers
    from forgetbench.train.throughput import TrainersDiffer

    quiet_transformers()
    out = Path(args.out)
    report = bench_train_throughput(
        config, out, steps=args.steps, progress=not args.json, profile=_profile(args)
    )
    if not args.json:
        from forgetbench.report.console import print_rows

        rows = [
            {
                "trainer": name,
                "steady s": run["steady_seconds"],
                "real tokens/s": run["tokens_per_s"]["real"],
                "padded tokens/s": run["tokens_per_s"]["padded"],
                "TFLOP/s": round(run["flop_per_s"] / 1e12, 3),
                "of peak": f"{run['share_of_peak']:.1%}",
                "peak GPU MiB": run["peak_gpu_mib"] or "-",
                "peak RSS MiB": run["peak_rss_mib"],
                "last loss": run["losses"][-1],
            }
            for name, run in (
                ("forgetbench", report["forgetbench"]),
                ("HF Trainer", report["hf_trainer"]),
            )
        ]
        print_rows(rows, title=f"training throughput, {report['steps']} steps: {report['model']}")
        print(
            f"{report['n_params'] / 1e6:.1f}M parameters on {report['device']} "
            f"({report['compute_dtype']}); matmul peak "
            f"{report['matmul_peak_flop_per_s'] / 1e12:.3f} TFLOP/s; padding "
            f"{report['padding']['share']:.1%} of the batches' tokens; largest loss difference "
            f"{report['max_loss_diff']:.2e} at step {report['max_loss_diff_step']} "
            f"(tolerance {report['loss_tolerance']:g}); report: {out / BENCH_TRAIN_FILE}"
        )
        for name in ("forgetbench", "hf_trainer"):
            if "profile" in report[name]:
                print(f"{name} {profile_line(report[name]['profile'])}")
    if not report["losses_agree"]:
        raise TrainersDiffer(
            f"forgetbench's loop and HF's Trainer lose {report['max_loss_diff']:.3g} apart at step "
            f"{report['max_loss_diff_step']}, beyond {report['loss_tolerance']:g}",
            f"the recipes differ; the per-step losses are in {out / BENCH_TRAIN_FILE}",
        )
    return report


def _bench_eval(args: argparse.Namespace, config: RunConfig) -> dict[str, Any]:
    """The fast evaluation backend against the naive one on one model: a given one (--model and
    --data), or the built-in study's finetuned model at --scale, trained in --out or reused."""
    from forgetbench.eval.bench import PathsDiffer
    from forgetbench.report.console import print_rows
    from forgetbench.study.bench import BENCH_EVAL_FILE, bench_eval
    from forgetbench.study.pool import quiet_transformers

    quiet_transformers()
    out = Path(args.out)
    if (given_model(config) is None) != (given_data(config) is None):
        raise UsageError(
            "forgetbench bench eval: --model and --data go together",
            "pass both, or neither for the built-in study's finetuned model at --scale",
        )
    report = bench_eval(config, out, progress=not args.json, profile=_profile(args))
    saved = out / BENCH_EVAL_FILE
    model_dir = report["model"]
    if not args.json:
        rows = [
            {
                "path": name,
                "seconds": p["seconds"],
                "scoring s": p["scoring_seconds"],
                "generation s": p["generation_seconds"],
                "questions/s": p["questions_per_s"],
                "answer tokens/s": p["answer_tokens_per_s"],
                "model tokens": p["model_tokens"]["total"],
                "padding": f"{p['padding_share']['total']:.1%}",
                "GFLOP/s": round(p["flop_per_s"] / 1e9, 2),
                "of peak": f"{report['fraction_of_peak'][name]:.1%}",
                "peak RSS MiB": p["peak_rss_mib"],
            }
            for name, p in report["paths"].items()
        ]
        print_rows(rows, title=f"TOFU evaluation, {report['questions']} questions: {model_dir}")
        print(
            f"matmul peak {report['matmul_peak_flop_per_s'] / 1e9:.0f} GFLOP/s; "
            f"speedup {report['speedup']}x (scoring {report['scoring_speedup']}x, "
            f"generation {report['generation_speedup']}x); max abs difference "
            f"{report['max_abs_diff']:.2e} at {report['max_abs_diff_at'] or '-'}; "
            f"identical: {str(report['identical']).lower()}; report: {saved}"
        )
        for phase, profile in report["paths"]["fast"].get("profile", {}).items():
            print(f"fast {phase} {profile_line(profile)}")
    if not report["identical"]:
        raise PathsDiffer(
            f"fast and naive evaluation differ beyond {report['tolerance']:g} "
            f"({report['mismatch_count']} values; first {report['mismatches'][0]})",
            f"the fast path is wrong; the full report is in {saved}",
        )
    return report
