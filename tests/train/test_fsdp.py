"""`model.sharding=fsdp` for real: the command line under `torchrun --nproc_per_node 2` on the CPU
(gloo), against the same commands in one process without sharding. Two launches (CI time): one
runs every sharded command in each process (`cli_sequence.py`), the killed run last, and one
resumes it; the commands in one process run in this one."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from file_tree import run_folder
from forgetbench.cli import main
from forgetbench.methods.base import trained_method_names

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
SEQUENCE = HERE / "cli_sequence.py"
SHARDED = "model.sharding=fsdp"
QUIET = ["--json", "--no-progress"]
# The tiny study's NPO: 10 steps (2 epochs of 5), two examples per process and micro-batch. Two
# epochs show all a sharded run does (a checkpoint and snapshot at the epoch's end, and a resume
# into the next epoch); the five cost 15 steps more in each of four runs.
NPO = ["unlearn", "--scale", "tiny", "--method", "npo", "--split", "forget10", "unlearn.epochs=2",
       "unlearn.per_device_batch_size=2", *QUIET]  # fmt: skip
# A retain model from the pretrained one: one epoch, its 220 examples in 11 steps of 20, each step
# one micro-batch of 10 per process. Sizes that divide evenly: a last batch short of processes x
# micro-batch would be filled up by accelerate with repeated examples (as under DDP), and differ.
FINETUNE = ["finetune", "--scale", "tiny", "--split", "retain90", "train.epochs=1",
            "train.batch_size=20", "train.per_device_batch_size=10", *QUIET]  # fmt: skip
# One step of every other method: the 20 forget questions in one batch.
OTHERS = [m for m in trained_method_names() if m != "npo"]
TWO_GRADIENT = "ngdiff"


def _one_step(method: str) -> list[str]:
    return ["unlearn", "--scale", "tiny", "--method", method, "--split", "forget10",
            "unlearn.epochs=1", "unlearn.batch_size=20", "unlearn.per_device_batch_size=2",
            *QUIET]  # fmt: skip


def _environment() -> dict[str, str]:
    # One thread per process: two torch processes on two cores.
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


def _torchrun(*args: str) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node 2 ARGS` (a script and its arguments, or -m module ...)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
         "--master_addr", "127.0.0.1", "--master_port", str(port), *args],
        env=_environment(), capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@contextmanager
def _one_thread():
    """One torch thread, as in each of the two processes (and as a worker of the suite has)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _sharded(lines: list[list[str]], log: Path) -> tuple[list[int], int]:
    """Run the command lines sharded in two processes, one after the other in each; the exit
    code of each command that finished, and the launch's. Their stderr goes to `log`."""
    args: list[str] = []
    for line in lines:
        args += ["--", *line, SHARDED]
    done = _torchrun(str(SEQUENCE), *args)
    codes = [ln for ln in done.stdout.splitlines() if ln.startswith("codes: ")]
    assert codes, done.stdout[-2000:] + done.stderr[-4000:]
    log.write_text(done.stderr)
    return json.loads(codes[-1].removeprefix("codes: ")), done.returncode


def _run(folder: Path, name: str) -> Path:
    """The one stage folder whose name starts with `name` (an unlearning run or a model)."""
    found = [
        p for p in (*folder.glob("unlearn/*"), *folder.glob("models/*")) if p.name.startswith(name)
    ]
    assert len(found) == 1, found
    return found[0]


def _same_training(one: Path, two: Path) -> None:
    """Per-step losses and final weights of a one-process run and a sharded run, to 1e-5."""

    def losses(run: Path) -> list[float]:
        lines = (run / "work" / "train_log.jsonl").read_text().splitlines()
        return [json.loads(line)["loss"] for line in lines]

    assert losses(two) == pytest.approx(losses(one), abs=1e-5)
    a, b = (load_file(run / "model" / "model.safetensors") for run in (one, two))
    assert sorted(a) == sorted(b)
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5


@pytest.fixture(scope="module")
def runs(tiny_study, tmp_path_factory) -> tuple[Path, Path, list[int], list[int], Path, int]:
    """The same commands in one process and sharded in two: npo (the full run), a finetune, one
    step of every other method, and (sharded) one with LoRA; last, sharded, npo again in a
    folder of its own, process 0 killed (SIGKILL) once step 7 is logged (torchrun then stops
    process 1). (one, two, their exit codes, the killed run's folder, the launch's exit code)"""
    lines = [NPO, FINETUNE, *(_one_step(m) for m in OTHERS if m != TWO_GRADIENT)]
    lora = [*_one_step("grad_ascent"), "unlearn.lora=true"]
    one = run_folder(tiny_study, tmp_path_factory.mktemp("one"), "pretrain-", "finetune-")
    two = run_folder(tiny_study, tmp_path_factory.mktemp("two"), "pretrain-", "finetune-")
    killed = run_folder(tiny_study, tmp_path_factory.mktemp("killed"), "pretrain-", "finetune-")
    with _one_thread():  # on the CPU, as the two processes (a GPU would change the numbers)
        one_codes = [main([*line, "--out", str(one), "model.device=cpu"]) for line in lines]
    sharded = [[*line, "--out", str(two)] for line in [*lines, _one_step(TWO_GRADIENT), lora]]
    two_codes, launch = _sharded(
        [*sharded, ["kill-at-step", "7", *NPO, "--out", str(killed)]], two / "stderr.txt"
    )
    return one, two, one_codes, two_codes, killed, launch


def test_sharded_npo_and_finetune_equal_one_process_step_by_step(runs):
    one, two, one_codes, two_codes, *_ = runs
    assert one_codes[:2] == two_codes[:2] == [0, 0], (two / "stderr.txt").read_text()[-3000:]
    _same_training(_run(one, "npo-forget10-"), _run(two, "npo-forget10-"))
    _same_training(_run(one, "retain-retain90-"), _run(two, "retain-retain90-"))
    # The gathered model is an ordinary transformers folder, not FSDP's wrapper class.
    config = json.loads((_run(two, "npo-forget10-") / "model" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]


def test_the_sharded_run_s_model_evaluates(runs, tmp_path, capsys):
    _one, two, *_ = runs
    argv = ["eval", "--model", str(two / "unlearned-npo-forget10"), "--data", str(two / "data"),
            "--split", "forget10", "--out", str(tmp_path), "eval.formats=false",
            "eval.lume=false", "eval.max_new_tokens=4", *QUIET]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    scores = json.loads((tmp_path / "summary.json").read_text())["scores"]
    # Unlearnt: the forget answers have become unlikely, the retain answers have not (the tiny
    # study's NPO after these 10 steps: 0.02 and 0.49; the finetuned model 0.985 and 0.989).
    assert scores["forget/probability"] < 0.1 < 0.4 < scores["retain/probability"]


def test_each_process_holds_half_the_parameters(runs):
    _one, two, *_ = runs
    weights = load_file(_run(two, "npo-forget10-") / "model" / "model.safetensors")
    total = sum(t.numel() for t in weights.values())  # the tied head is saved once
    stderr = (two / "stderr.txt").read_text()
    held = {
        int(rank): (int(n.replace(",", "")), int(of.replace(",", "")))
        for rank, n, of in re.findall(
            r"fsdp: process (\d) of 2 holds ([\d,]+) of the trained model's ([\d,]+) parameters",
            stderr,
        )
    }
    assert set(held) == {0, 1}
    for n, of in held.values():
        assert of == total and abs(n - total / 2) <= 0.01 * total
    assert "of the reference model's" in stderr  # kl, rmu, undial, ce_u: sharded too


def test_every_method_runs_sharded_or_is_refused_in_one_sentence(runs):
    one, two, one_codes, two_codes, *_ = runs
    assert one_codes[2:] == two_codes[2 : 2 + len(OTHERS) - 1] == [0] * (len(OTHERS) - 1)
    for method in OTHERS:
        if method != TWO_GRADIENT:
            _same_training(_run(one, f"{method}-forget10-"), _run(two, f"{method}-forget10-"))
    assert two_codes[-2:] == [2, 2]  # refused: the two-gradient method, LoRA
    stderr = (two / "stderr.txt").read_text()
    assert "this method takes its own two-gradient step, which combines whole gradients" in stderr
    assert "model.sharding=fsdp does not shard LoRA adapters" in stderr


def test_a_killed_sharded_run_resumes_to_the_same_weights(runs):
    _one, two, _one_codes, two_codes, folder, launch = runs
    # Every command before it finished; the killed one did not. The last checkpoint is the end of
    # epoch 1 (step 5).
    assert launch != 0 and len(two_codes) == len(OTHERS) + 3  # npo, finetune, the others, LoRA
    work = _run(folder, "npo-forget10-") / "work"
    state = json.loads((work / "checkpoint" / "state.json").read_text())
    assert state["position"]["step"] == 5 and state["sharding"] == "fsdp"
    assert len(list((work / "checkpoint" / "shards").glob("*.distcp"))) == 2  # one per process
    resumed = _torchrun("-m", "forgetbench.cli", *NPO, "--out", str(folder), SHARDED)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    _same_training(_run(two, "npo-forget10-"), work.parent)


def test_sharding_alone_is_refused_before_any_work(tiny_study, tmp_path, capsys):
    folder = run_folder(tiny_study, tmp_path / "alone", "pretrain-", "finetune-")
    assert main([*NPO, "--out", str(folder), SHARDED]) == 2
    assert "model.sharding=fsdp shards the model over the processes of torchrun" in (
        capsys.readouterr().err
    )
    assert not (folder / "unlearn").exists()
