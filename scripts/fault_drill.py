"""Process faults at the tiny scale, measured through the command line as a user meets them; the
numbers in docs/faults.md come from one run of this script.

    python scripts/fault_drill.py WORK_DIR [--only kill,concurrent,sigint] > drill.json

- kill: `finetune --scale tiny` and `unlearn --method npo` each killed with SIGKILL mid-training,
  then rerun; the weights (every safetensors file, tensor by tensor) and a `forgetbench eval` of
  the result are compared with an uninterrupted run in another folder.
- concurrent: two `run --scale tiny` started together into one fresh FORGETBENCH_CACHE: exit
  codes, wall times, their result rows compared, leftovers (temp files, unfinished entries).
- sigint: `run --scale tiny` into a fresh cache interrupted with SIGINT to its process group (what
  Ctrl-C sends) once unlearning started; exit code, what is on disk, then the rerun: what it
  reused and whether its rows equal the concurrent runs'.

Every command runs in its own session so a signal reaches it and its worker processes only. The
work is heavy (about 20 minutes on 2 cores): on a shared machine run it under the heavy-job lock.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RECORDS = {"models": "stage.json", "unlearn": "unlearn.json", "evaluations": "summary.json"}


def record_of(entry: Path) -> str:
    """The file whose presence means the entry finished (a tokenizer's: tokenizer.json; a
    relearning curve's: relearn_full.json)."""
    if entry.name.startswith("tokenizer-"):
        return "tokenizer.json"
    if (entry / "relearn_full.json").is_file():
        return "relearn_full.json"
    return RECORDS[entry.parent.name]


# Names only an unfinished write leaves: atomic writes' temp files, checkpoint saves, the cache's
# links, set-aside copies. (A relearning curve's scratch models: `evaluations/*/relearn-*`.)
TEMP_MARKS = (".tmp", ".link-", ".checkpoint.tmp", ".checkpoint.old", ".corrupt-")


def forgetbench(*argv: str, env: dict[str, str], log: Path) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    handle = log.open("w")
    return subprocess.Popen(
        # eval shows no progress bar and has no --no-progress
        [
            sys.executable,
            "-m",
            "forgetbench.cli",
            *argv,
            *(["--no-progress"] * (argv[0] != "eval")),
        ],
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: a signal reaches it and its workers
    )


def finish(process: subprocess.Popen, what: str) -> float:
    started = time.perf_counter()
    code = process.wait()
    if code != 0:
        raise SystemExit(f"{what} exited {code}")
    return time.perf_counter() - started


def wait_for_steps(root: Path, pattern: str, steps: int, process: subprocess.Popen) -> Path:
    """Poll until a train log matching `pattern` under `root` has `steps` lines."""
    while True:
        for log in root.glob(pattern):
            if len(log.read_bytes().splitlines()) >= steps:
                return log
        if process.poll() is not None:
            raise SystemExit(f"the run ended ({process.returncode}) before step {steps}")
        time.sleep(0.02)


def tensor_digests(folder: Path) -> dict[str, str]:
    """sha256 of every safetensors file's tensors (name, dtype, shape, bytes) under `folder`."""
    import torch
    from safetensors import safe_open

    digests = {}
    for path in sorted(folder.rglob("*.safetensors")):
        if "work" in path.relative_to(folder).parts:
            continue  # a resume checkpoint, gone once the stage finished
        digest = hashlib.sha256()
        with safe_open(str(path), "pt") as tensors:
            for name in sorted(tensors.keys()):
                tensor = tensors.get_tensor(name).contiguous()
                digest.update(f"{name}|{tensor.dtype}|{list(tensor.shape)}".encode())
                digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
        digests[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return digests


def numbers(value: Any, prefix: str = "") -> dict[str, float]:
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in numbers(item, f"{prefix}/{key}").items()
        }
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in numbers(item, f"{prefix}[{i}]").items()
        }
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {prefix: float(value)}
    return {}


def largest_difference(a: dict[str, float], b: dict[str, float]) -> float:
    if a.keys() != b.keys():
        return float("inf")
    gaps = [abs(a[k] - b[k]) for k in a if not (a[k] != a[k] and b[k] != b[k])]  # NaN == NaN
    return max(gaps, default=0.0)


def evaluate(model: Path, data: Path, out: Path, env: dict[str, str]) -> dict[str, Any]:
    started = time.perf_counter()
    run = forgetbench(
        "eval", "--model", str(model), "--data", str(data), "--split", "forget10",
        "--out", str(out), env=env, log=out.with_suffix(".log"),
    )  # fmt: skip
    finish(run, f"eval of {model}")
    logs = {
        name: json.loads((out / name).read_text())
        for name in ("eval_log_aggregated.json", "extra_log.json")
    }
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "scores": json.loads((out / "summary.json").read_text())["scores"],
        "logs": logs,
    }


def compare_evaluations(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    scores_a, scores_b = numbers(a["scores"]), numbers(b["scores"])
    logs_a, logs_b = numbers(a["logs"]), numbers(b["logs"])
    return {
        "scores": len(scores_a),
        "scores_identical": a["scores"] == b["scores"],
        "scores_largest_difference": largest_difference(scores_a, scores_b),
        "per_question_numbers": len(logs_a),
        "per_question_logs_identical": a["logs"] == b["logs"],
        "per_question_largest_difference": largest_difference(logs_a, logs_b),
    }


def kill_and_resume(
    work: Path, env: dict[str, str], *, command: list[str], log_pattern: str, kill_at: int,
    model_glob: str,
) -> dict[str, Any]:  # fmt: skip
    """`command` uninterrupted in work/whole; killed at step `kill_at`, then rerun, in work/killed."""
    whole, killed = work / "whole", work / "killed"
    started = time.perf_counter()
    finish(forgetbench(*command, "--out", str(whole), env=env, log=work / "whole.log"), "whole")
    whole_seconds = time.perf_counter() - started

    first = forgetbench(*command, "--out", str(killed), env=env, log=work / "killed.log")
    train_log = wait_for_steps(killed, log_pattern, kill_at, first)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    state = train_log.parent / "checkpoint" / "state.json"
    checkpoint = json.loads(state.read_text())["position"] if state.is_file() else None
    logged = len(train_log.read_bytes().splitlines())
    started = time.perf_counter()
    rerun = forgetbench(*command, "--out", str(killed), env=env, log=work / "rerun.log")
    rerun_seconds = finish(rerun, "rerun")
    rerun_log = (work / "rerun.log").read_text()

    (model_a,), (model_b,) = whole.glob(model_glob), killed.glob(model_glob)
    run_a, run_b = model_a.parent, model_b.parent
    weights_a, weights_b = tensor_digests(run_a), tensor_digests(run_b)
    files_a = {p: hashlib.sha256((run_a / p).read_bytes()).hexdigest() for p in weights_a}
    files_b = {p: hashlib.sha256((run_b / p).read_bytes()).hexdigest() for p in weights_b}
    losses = [
        [json.loads(line)["loss"] for line in (run / "work" / "train_log.jsonl").read_text().splitlines()]
        for run in (run_a, run_b)
    ]  # fmt: skip
    eval_a = evaluate(model_a, whole / "data", work / "eval-whole", env)
    eval_b = evaluate(model_b, killed / "data", work / "eval-killed", env)
    return {
        "uninterrupted_seconds": round(whole_seconds, 1),
        "killed_at_logged_step": logged,
        "killed_process_exit": first.returncode,
        "resumed_from_checkpoint": checkpoint,
        "rerun_seconds": round(rerun_seconds, 1),
        "rerun_warnings": [line for line in rerun_log.splitlines() if "warning" in line.lower()],
        "safetensors_files": len(weights_a),
        "tensor_hashes_equal": weights_a == weights_b,
        "file_hashes_equal": files_a == files_b,
        "model_sha256": files_a.get("model/model.safetensors"),
        "train_log_steps": [len(x) for x in losses],
        "train_losses_identical": losses[0] == losses[1],
        "evaluation_seconds": eval_a["seconds"],
        **compare_evaluations(eval_a, eval_b),
    }


def leftovers(*roots: Path) -> list[str]:
    """Paths an interrupted or torn write would leave: temp names, and cache entries (or entries
    linked from an output folder) without their record."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            scratch = path.name.startswith("relearn-") and path.parent.parent.name == "evaluations"
            if scratch or any(mark in path.name for mark in TEMP_MARKS):
                found.append(str(path))
            if path.name == "checkpoint" and path.parent.name == "work":
                record = RECORDS.get(path.parent.parent.parent.name)
                if record and (path.parent.parent / record).is_file():
                    found.append(f"{path} (a finished stage's checkpoint)")
        for kind in RECORDS:
            for entry in (root / kind).glob("*") if (root / kind).is_dir() else []:
                if (
                    entry.is_dir()
                    and not entry.is_symlink()
                    and not (entry / record_of(entry)).is_file()
                ):
                    found.append(f"{entry} (no {record_of(entry)})")
    return sorted(found)


def unfinished(root: Path) -> list[str]:
    """Entries an interrupted run leaves without their record (work to resume, not damage)."""
    return [
        f"{kind}/{entry.name}"
        for kind in RECORDS
        for entry in sorted((root / kind).glob("*")) if (root / kind).is_dir()
        if entry.is_dir() and not (entry / record_of(entry)).is_file()
    ]  # fmt: skip


def damaged_records(root: Path) -> list[str]:
    """Finished entries whose files do not match their record (a half-written final name)."""
    from forgetbench.train.integrity import read_record, stage_problem

    found = []
    for kind in ("models", "unlearn"):
        for record_path in sorted(root.glob(f"{kind}/*/{RECORDS[kind]}")):
            record, problem = read_record(record_path)
            problem = problem or stage_problem(record_path.parent, record)
            if problem:
                found.append(f"{record_path.parent}: {problem}")
    for summary in sorted(root.glob("evaluations/*/summary.json")):
        if read_record(summary)[1]:
            found.append(f"{summary}: {read_record(summary)[1]}")
    return found


def rows_of(out: Path) -> list[dict[str, Any]]:
    return json.loads((out / "results.json").read_text())["rows"]


def compare_rows(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    numbers_a = numbers(a)
    return {
        "rows": [len(a), len(b)],
        "numbers_per_run": len(numbers_a),
        "identical": a == b,
        "largest_difference": largest_difference(numbers_a, numbers(b)),
    }


def concurrent(work: Path, env: dict[str, str]) -> dict[str, Any]:
    cache = work / "cache"
    env = {**env, "FORGETBENCH_CACHE": str(cache)}
    started = time.perf_counter()
    runs = [
        forgetbench("run", "--scale", "tiny", "--out", str(work / name), env=env, log=work / f"{name}.log")
        for name in ("a", "b")
    ]  # fmt: skip
    ended = {}
    while len(ended) < len(runs):
        for index, run in enumerate(runs):
            if index not in ended and run.poll() is not None:
                ended[index] = time.perf_counter() - started
        time.sleep(0.5)
    return {
        "exit_codes": [run.returncode for run in runs],
        "wall_seconds": [round(ended[i], 1) for i in range(len(runs))],
        **compare_rows(rows_of(work / "a"), rows_of(work / "b")),
        "cache_entries": {
            kind: len(list((cache / kind).glob("*/"))) for kind in ("data", *RECORDS)
        },
        "leftovers": leftovers(cache, work / "a", work / "b"),
        "damaged": damaged_records(cache),
    }


def interrupted(work: Path, env: dict[str, str], reference: Path | None) -> dict[str, Any]:
    cache = work / "cache"
    env = {**env, "FORGETBENCH_CACHE": str(cache)}
    out = work / "run"
    started = time.perf_counter()
    first = forgetbench(
        "run", "--scale", "tiny", "--out", str(out), env=env, log=work / "first.log"
    )
    # Interrupt once the first unlearning runs have trained a few steps: reference models
    # finished, methods half-done, evaluations under way.
    wait_for_steps(cache, "unlearn/*/work/train_log.jsonl", 8, first)
    sent = time.perf_counter()
    os.killpg(first.pid, signal.SIGINT)
    code = first.wait()
    exit_seconds = time.perf_counter() - sent
    tail = (work / "first.log").read_text().strip().splitlines()[-3:]
    state = {
        "exit_code": code,
        "seconds_before_sigint": round(sent - started, 1),
        "seconds_to_exit": round(exit_seconds, 1),
        "last_lines": tail,
        "results_json_written": (out / "results.json").exists(),
        "finished_entries": {
            kind: len(list(cache.glob(f"{kind}/*/{record}"))) for kind, record in RECORDS.items()
        },
        "unfinished_entries": unfinished(cache),
        "temp_files": [p for p in leftovers(cache, out) if "(no " not in p],
        "damaged": damaged_records(cache),
    }
    stamps = {p: p.stat().st_mtime_ns for p in cache.glob("*/*/work/train_log.jsonl")}
    finished = {
        p for p in stamps if (p.parent.parent / RECORDS[p.parent.parent.parent.name]).is_file()
    }
    rerun_started = time.perf_counter()
    rerun = forgetbench(
        "run", "--scale", "tiny", "--out", str(out), env=env, log=work / "rerun.log"
    )
    rerun_seconds = finish(rerun, "the rerun after SIGINT")
    after = {p: p.stat().st_mtime_ns for p in cache.glob("*/*/work/train_log.jsonl")}
    resumed = [
        str(p.parent.parent.relative_to(cache)) for p in stamps if p not in finished
        if (p.parent / "train_log.jsonl").is_file()
    ]  # fmt: skip
    state.update(
        rerun_seconds=round(rerun_seconds, 1),
        rerun_seconds_total=round(time.perf_counter() - rerun_started, 1),
        finished_trainings_reused=sum(after[p] == stamps[p] for p in finished),
        finished_trainings=len(finished),
        unfinished_trainings_continued=resumed,
        leftovers_after_rerun=leftovers(cache, out),
        damaged_after_rerun=damaged_records(cache),
    )
    if reference is not None:
        state["against_the_concurrent_runs"] = compare_rows(rows_of(reference), rows_of(out))
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path)
    parser.add_argument("--only", default="kill,concurrent,sigint")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    off = {**env, "FORGETBENCH_CACHE": "off"}  # kill: each folder trains its own stages
    report: dict[str, Any] = {}
    if "kill" in parts:
        report["finetune_kill"] = kill_and_resume(
            args.work / "finetune", off, command=["finetune", "--scale", "tiny"],
            log_pattern="models/finetune-*/work/train_log.jsonl", kill_at=200,
            model_glob="models/finetune-*/model",
        )  # fmt: skip
        print(json.dumps(report), file=sys.stderr, flush=True)
        report["unlearn_npo_kill"] = kill_and_resume(
            args.work / "unlearn", off,
            command=["unlearn", "--scale", "tiny", "--method", "npo", "--split", "forget10"],
            log_pattern="unlearn/npo-*/work/train_log.jsonl", kill_at=12,
            model_glob="unlearn/npo-*/model",
        )  # fmt: skip
        print(json.dumps(report), file=sys.stderr, flush=True)
    if "concurrent" in parts:
        report["concurrent"] = concurrent(args.work / "concurrent", env)
        print(json.dumps(report), file=sys.stderr, flush=True)
    if "sigint" in parts:
        reference = args.work / "concurrent" / "a"
        report["sigint"] = interrupted(
            args.work / "sigint", env, reference if (reference / "results.json").is_file() else None
        )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
