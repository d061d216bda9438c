import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import finetune_script
import pytest
import torch
from safetensors.torch import load_file

from launch import launch_two_cpu_processes

SCRIPT = Path(__file__).with_name("finetune_script.py")


def _losses(folder: Path) -> list[float]:
    return [
        json.loads(line)["loss"] for line in (folder / "train_log.jsonl").read_text().splitlines()
    ]


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "model" / "model.safetensors")


def _checkpoint_step(folder: Path) -> int:
    try:
        return json.loads((folder / "checkpoint" / "state.json").read_text())["position"]["step"]
    except (OSError, ValueError):  # not written yet, or caught between its two renames
        return 0


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> tuple[Path, Path, int, str]:
    """One process (one interpreter start: CI time) runs a whole finetune, then the same with a
    checkpoint every step and a second's pause after each, killed (SIGKILL) once the checkpoint
    of step 3 is on disk: (whole run, killed run, return code, stderr)."""
    root = tmp_path_factory.mktemp("one-process")
    whole, killed = root / "uninterrupted", root / "killed"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), whole, "4", "then", killed, "4", "1", "1.0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None and _checkpoint_step(killed) < 3:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate()
    return whole, killed, process.returncode, stderr


@pytest.fixture(scope="module")
def uninterrupted(one_process) -> Path:
    whole, _killed, _code, stderr = one_process
    assert (whole / "model").is_dir(), stderr
    return whole


@pytest.fixture(scope="module")
def launched(two_process_launch) -> tuple[Path, Path, Path, subprocess.CompletedProcess]:
    """Three runs in the session's two-process launch (tests/conftest.py), one after the other
    in each process: a plain one (`same`), one with per-process noise and a checkpoint every
    step (`whole`), and the same stopped after step 5 (`stopped`), which ends the launch as a
    kill would. (The launch's processes evaluate first: tests/eval/test_eval_distributed.py.)"""
    root = two_process_launch
    record = json.loads((root / "launch.json").read_text())
    done = subprocess.CompletedProcess([], record["returncode"], "", record["stderr"])
    return root / "same", root / "whole", root / "stopped", done


def test_loss_falls_and_the_log_has_one_line_per_step(uninterrupted):
    losses = _losses(uninterrupted)
    # 16 examples, effective batch 8 -> 2 steps per epoch, 6 epochs
    assert len(losses) == 12
    assert losses[-1] < 0.7 * losses[0]
    row = json.loads((uninterrupted / "train_log.jsonl").read_text().splitlines()[0])
    assert {"step", "epoch", "loss", "lr", "tokens_per_s", "elapsed_s"} <= set(row)


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_weights(uninterrupted, one_process):
    _whole, killed, code, stderr = one_process
    assert code == -signal.SIGKILL, stderr
    assert not (killed / "model").exists(), "the run finished before it could be killed"
    state = json.loads((killed / "checkpoint" / "state.json").read_text())
    assert 3 <= state["position"]["step"] < 12
    # Resumed in this process (what is tested is what the killed one left, not a second
    # interpreter: 3 s of CPU less), with one thread as the killed one had: bitwise the same.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        finetune_script.run([str(killed), "4", "1"])
    finally:
        torch.set_num_threads(threads)
    assert _losses(killed) == pytest.approx(_losses(uninterrupted), rel=1e-6)
    expected, got = _weights(uninterrupted), _weights(killed)
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=0)


@pytest.mark.slow
def test_two_processes_train_the_same_model_as_one(uninterrupted, launched):
    # One process: per-device batch 4 x 2 accumulation steps. Two processes: 4 each, no
    # accumulation. Same effective batch, same data order, same schedule -> same curve.
    same, _whole, _stopped, done = launched
    assert (same / "model").is_dir(), done.stderr[-3000:]
    assert _losses(same) == pytest.approx(_losses(uninterrupted), rel=1e-4)
    expected, got = _weights(uninterrupted), _weights(same)
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_two_processes_stopped_after_a_checkpoint_resume_to_the_same_numbers(launched):
    # --rank-noise puts each process's own RNG into its loss: the resumed run matches only if
    # every process got its RNG back, not just the main one.
    _same, whole, stopped, killed = launched
    assert (whole / "model").is_dir(), killed.stderr[-3000:]
    assert killed.returncode != 0 and not (stopped / "model").exists()
    checkpoint = stopped / "checkpoint"
    state = json.loads((checkpoint / "state.json").read_text())
    # 2 steps per epoch: step 5 is one micro-batch into the third epoch
    assert state["position"] == {"step": 5, "epoch": 2, "batches_done": 1}
    assert state["processes"] == 2
    assert {"random_states_0.pkl", "random_states_1.pkl"} <= {p.name for p in checkpoint.iterdir()}
    resumed = launch_two_cpu_processes(SCRIPT, str(stopped), "4", "1", "--rank-noise", timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "warning" not in resumed.stderr.lower(), resumed.stderr[-3000:]
    assert len(_losses(stopped)) == 12
    assert _losses(stopped) == pytest.approx(_losses(whole), rel=0, abs=1e-6)
    expected, got = _weights(whole), _weights(stopped)
    for name, tensor in expected.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=1e-6)
