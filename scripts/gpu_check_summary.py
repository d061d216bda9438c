"""Summarise a `scripts/gpu_check.sh` run: OUT/gpu_check.json (every step's figures) and, printed,
the speed targets' table with the measured column filled (docs/speed.md, "The GPU check").

usage: gpu_check_summary.py OUT   (reads OUT/steps.jsonl and OUT/logs/)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TARGETS = {
    "train": ">= 1.3x HF's Trainer, same per-step losses (bf16 tolerance), >= 35 % of bf16 peak",
    "unlearn": "npo <= 0.2 s; every method <= 40 GiB",
    "eval": "<= 20 s, GPU busy >= 60 %",
    "study": "<= 150 s by default; make demo's study <= 60 s",
}


def main(out: Path) -> None:
    logs = out / "logs"
    gpu = (logs / "gpu.txt").read_text().strip() if (logs / "gpu.txt").exists() else ""
    cpu = not gpu or "NVIDIA" not in gpu and "H100" not in gpu and "H200" not in gpu
    summary: dict[str, Any] = {"gpu": gpu, "cpu_dry_run": cpu, "steps": []}
    for line in (out / "steps.jsonl").read_text().splitlines():
        step = json.loads(line)
        step.update(_step_figures(step["step"], logs))
        summary["steps"].append(step)
    steps = {s["step"]: s for s in summary["steps"]}
    summary["table"] = _table(steps)
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
    print(f"GPU: {gpu or 'none'}")
    if cpu:
        print("CPU dry run: tiny shapes and data, float32; the figures are the CPU's, not targets'")
    print()
    print("| what | measured | target |\n|---|---|---|")
    for row in summary["table"]:
        print(f"| {row['what']} | {row['measured']} | {row['target']} |")
    levers = _levers(steps)
    summary["levers"] = levers
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=1))
    if levers:
        print("\n| lever (one setting turned) | measured |\n|---|---|")
        for row in levers:
            print(f"| {row['what']} | {row['measured']} |")


def _step_figures(name: str, logs: Path) -> dict[str, Any]:
    path = logs / f"{name}.log"
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    rows = [line for line in lines if line.startswith("{")]
    found: dict[str, Any] = {}
    busy = _busy(logs / f"{name}.smi")
    if busy is not None:
        found["gpu_busy"] = busy
    try:
        if name.startswith(("memory", "unlearn")):
            found["methods"] = [json.loads(line) for line in rows]
        elif (name.startswith("train_1b") or name in ("bench_train", "bench_eval")) and rows:
            result = json.loads(rows[-1])
            for run in ("forgetbench", "hf_trainer"):  # the per-step losses stay in the log
                if run in result:
                    result[run] = {k: v for k, v in result[run].items() if k != "losses"}
            found["result"] = {k: v for k, v in result.items() if k not in ("rows", "config")}
        elif name == "static_generations" and rows:
            found["result"] = json.loads(rows[-1])
        elif name.startswith("eval_1b") and rows:
            found["result"] = json.loads(rows[-1]).get("scores")
        elif name == "study_small" and (logs / "study_results.json").exists():
            from forgetbench.study.bench import study_profile

            results = json.loads((logs / "study_results.json").read_text())
            timings = results["timings"]
            # Where its workers ran: measured and chosen on a GPU machine, absent on the CPU.
            found["placement"] = results.get("placement")
            found["workers"] = results.get("workers")
            found["profile"] = {k: v for k, v in study_profile(timings).items() if k != "jobs"}
        elif name == "workers_gpu":
            found.update(_workers(logs))
    except (ValueError, KeyError) as exc:  # a step cut off mid-line: its log says the rest
        found["summary_error"] = repr(exc)
    if not found.get("result") and not found.get("methods"):
        found["tail"] = lines[-3:]
    return found


def _busy(path: Path) -> dict[str, float] | None:
    """nvidia-smi's SM utilisation samples (%): mean, and the middle half's range."""
    if not path.exists():
        return None
    values = sorted(float(v) for v in path.read_text().split() if v.replace(".", "").isdigit())
    if not values:
        return None
    q = len(values) // 4
    return {
        "mean": round(sum(values) / len(values), 1),
        "p25": values[q],
        "p75": values[-q - 1] if q else values[-1],
        "samples": len(values),
    }


def _workers(logs: Path) -> dict[str, Any]:
    runs: dict[int, list[float | None]] = {}
    for path in sorted(logs.glob("workers_gpu_*_*.log")):
        k = int(path.stem.split("_")[2])
        rows = [line for line in path.read_text(errors="replace").splitlines() if line[:1] == "{"]
        rate = json.loads(rows[-1])["forgetbench"]["tokens_per_s"]["padded"] if rows else None
        runs.setdefault(k, []).append(rate)
    found: dict[str, Any] = {"tokens_per_s_padded": {f"{k} at once": r for k, r in runs.items()}}
    done = {k: [x for x in r if x] for k, r in runs.items() if r and None not in r}
    if 1 in done and len(done) > 1:
        k = max(done)
        found["throughput_k_over_1"] = round(sum(done[k]) / done[1][0], 2)
    return found


def _table(steps: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    return [
        {"what": "bench train, 1B shape, bf16, one epoch", "measured": _train(steps.get("train_1b")),
         "target": TARGETS["train"]},
        {"what": "one LoRA unlearning step, 8B shape, bf16, 4 x 512 tokens",
         "measured": _unlearn(steps.get("unlearn_8b")), "target": TARGETS["unlearn"]},
        {"what": "forgetbench eval, 1B shape, bf16, full miniature's forget10",
         "measured": _eval(steps.get("eval_1b")), "target": TARGETS["eval"]},
        {"what": "forgetbench run --scale small --splits forget10, defaults",
         "measured": _study(steps.get("study_small"), steps.get("study_demo")),
         "target": TARGETS["study"]},
    ]  # fmt: skip


# Each lever's step: train_1b or eval_1b with one setting turned (scripts/gpu_check.sh, LEVERS).
LEVERS = {
    "train_1b_random": "bench train, 1B, train.group_by_length=false (random order)",
    "train_1b_no_liger": "bench train, 1B, model.liger_kernel=false",
    "train_1b_compile": "bench train, 1B, model.compile=true",
    "train_1b_padding_free": "bench train, 1B, model.padding_free=true (packed batches)",
    "eval_1b_static": "forgetbench eval, 1B, eval.cache_implementation=static (compiled)",
    "eval_1b_static_eager": "forgetbench eval, 1B, static cache, eval.compile_generation=false",
    "static_generations": "generated answers: static cache vs dynamic, bf16",
    "study_small_one": "forgetbench run --scale small --splits forget10 study.workers=1",
}


def _levers(steps: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    rows = []
    for name, what in LEVERS.items():
        step = steps.get(name)
        if step is None:
            continue
        if name.startswith("train"):
            measured = _train(step)
        elif name == "study_small_one":
            measured = _ran(step) or f"{step['seconds']:.0f} s; {_gpu_busy(step)}"
        elif name == "static_generations":
            r = step.get("result")
            measured = f"{r['differ']} of {r['compared']} differ" if r else _ran(step) or "failed"
        else:
            measured = _eval(step)
        rows.append({"what": what, "measured": measured})
    return rows


def _ran(step: dict[str, Any] | None) -> str | None:
    if step is None:
        return "not run"
    if step["exit"] == 124:
        return f"not done after {step['seconds']:.0f} s (its limit)"
    return None


def _gpu_busy(step: dict[str, Any]) -> str:
    busy = step.get("gpu_busy")
    if busy is None:
        return "GPU busy not sampled"
    return f"GPU busy {busy['mean']:.0f} % (middle half {busy['p25']:.0f}-{busy['p75']:.0f} %)"


def _train(step: dict[str, Any] | None) -> str:
    if _ran(step) or "result" not in (step or {}):
        return _ran(step) or f"failed (exit {step['exit']})"  # type: ignore[index]
    r = step["result"]  # type: ignore[index]
    ours, theirs = r["forgetbench"], r["hf_trainer"]
    said = (
        f"forgetbench {ours['tokens_per_s']['real']:,.0f} real tokens/s "
        f"({ours['share_of_peak']:.1%} of {r['matmul_peak_flop_per_s'] / 1e12:.3g} TFLOP/s); "
        f"HF's Trainer {theirs['tokens_per_s']['real']:,.0f} ({theirs['share_of_peak']:.1%}): "
        f"{r['speedup_vs_hf_trainer']:.2f}x; first step {ours['first_step_seconds']:.2f} s vs "
        f"{theirs['first_step_seconds']:.2f} s; {r['padding']['share']:.0%} padding; losses "
        f"{'agree' if r['losses_agree'] else 'DIFFER'} (max {r['max_loss_diff']:.1e})"
    )
    for name, run in (("ours", ours), ("HF", theirs)):
        profile = run.get("profile")
        if profile and profile.get("profiled_steps"):
            busy = profile["device_busy_share"]
            said += (
                f"; {name}: "
                + (f"GPU busy {busy:.0%}, " if busy is not None else "")
                + f"{profile['host_reads_per_step']:g} host reads/step"
                + (
                    f", {profile['host_syncs_per_step']:g} host syncs/step"
                    if profile.get("host_syncs_per_step") is not None
                    else ""
                )
            )
    if "padding_free" in r:
        said += f"; padding-free {'on' if r['padding_free'] else 'off'}"
    return said


def _unlearn(step: dict[str, Any] | None) -> str:
    if _ran(step):
        return _ran(step)  # type: ignore[return-value]
    rows = [m for m in step.get("methods", []) if "method" in m]  # type: ignore[union-attr]
    if not rows:
        return f"failed (exit {step['exit']})"  # type: ignore[index]
    times = ", ".join(f"{m['method']} {m.get('step_seconds')} s" for m in rows)
    peaks = [m["peak_gib"] for m in rows if isinstance(m.get("peak_gib"), int | float)]
    peaks = [p for p in peaks if p > 0]  # the CPU measures none
    peak = f"peak {min(peaks)}-{max(peaks)} GiB" if peaks else "peak not measured (CPU)"
    return f"{times}; {peak}"


def _eval(step: dict[str, Any] | None) -> str:
    if _ran(step):
        return _ran(step)  # type: ignore[return-value]
    state = "" if step["exit"] == 0 else f" (failed, exit {step['exit']})"  # type: ignore[index]
    return f"{step['seconds']:.1f} s{state}; {_gpu_busy(step)}"  # type: ignore[index]


def _study(step: dict[str, Any] | None, demo: dict[str, Any] | None) -> str:
    said = _ran(step) or (
        f"{step['seconds']:.0f} s"  # type: ignore[index]
        + ("" if step["exit"] == 0 else f" (failed, exit {step['exit']})")  # type: ignore[index]
    )
    if step is not None:
        said += f"; {_gpu_busy(step)}"
        placement = step.get("placement")
        if placement:
            said += (
                f"; placed {placement['gpu_workers']} GPU + {placement['cpu_workers']} CPU "
                f"workers (step {placement['measured']})"
            )
        elif step.get("workers") is not None:
            said += f"; {step['workers']} workers, placement not measured (no GPU)"
    demo_said = _ran(demo) or f"{demo['seconds']:.0f} s"  # type: ignore[index]
    return f"{said}; make demo's study {demo_said}"


if __name__ == "__main__":
    main(Path(sys.argv[1]))
