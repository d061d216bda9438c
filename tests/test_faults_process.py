"""Process faults through the command line, as a user meets them: a `finetune` or an `unlearn`
(NPO) killed with SIGKILL mid-training and rerun ends with the losses and the same bytes in every
file as an uninterrupted run; two `run`s into one fresh cache both succeed with the same rows
and leave nothing half-made; Ctrl-C stops a `run` with exit code 130, nothing half-written, and its
rerun resumes. Small settings of the tiny scale (2 finetuning epochs, NPO for 2 or 3 epochs, one
method, no attacks) from the session's tiny models; the full tiny scale is measured with
scripts/fault_drill.py (docs/faults.md)."""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import shutil
import signal
import sys
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest
import torch

from file_tree import run_folder
from forgetbench.cli import main
from forgetbench.study.pool import _worker_context, make_pool
from forgetbench.train import loop
from forgetbench.train.integrity import read_record, stage_problem
from kill_at_step import kill_at

pytestmark = pytest.mark.slow

RECORDS = {"models": "stage.json", "unlearn": "unlearn.json", "evaluations": "summary.json"}
# Names only an unfinished write leaves: atomic writes' temp files, checkpoint saves, the cache's
# links, set-aside copies.
TEMP_MARKS = (".tmp", ".link-", ".checkpoint", ".corrupt-")


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _run_command(
    argv: list[str],
    environ: dict[str, str],
    threads: int,
    kill_at_step: int,
    streams: str,
    session: bool,
) -> None:
    if session:  # its own session and process group, as a terminal gives a command
        os.setsid()
    os.environ.clear()
    os.environ.update(environ)
    torch.set_num_threads(threads)
    if streams:  # the command's stdout and stderr, into files
        for fd, name in ((1, "stdout"), (2, "stderr")):
            with open(Path(streams, name), "w") as file:
                os.dup2(file.fileno(), fd)
    if kill_at_step:
        kill_at(kill_at_step)
    sys.exit(main(argv))


def _forked(
    argv: list[str],
    *,
    kill_at_step: int = 0,
    streams: Path | None = None,
    session: bool = False,
    **environ: str,
) -> multiprocessing.Process:
    """The command line started in a process of its own, with this one's environment (and
    `environ`) and torch threads; killed (SIGKILL) once it logs training step `kill_at_step`
    (tests/kill_at_step.py) if given; its stdout and stderr into `streams`/stdout and /stderr if
    given; in a session and process group of its own if `session` (Ctrl-C reaches the group).
    The process is a fork of the study pool's fork server, which has imported torch and the
    training code already and restores Python's own SIGINT handler in each fork: a new
    interpreter costs 4 s of CPU more, and neither what a kill or Ctrl-C leaves on disk nor what
    a run writes depends on how its process started."""
    if streams:
        streams.mkdir(parents=True)
    process = _worker_context().Process(
        target=_run_command,
        args=(
            list(argv), {**os.environ, **environ}, torch.get_num_threads(), kill_at_step,
            str(streams or ""), session,
        ),
    )  # fmt: skip
    process.start()
    return process


def _killed(step: int, *argv: str) -> int:
    """The command line run in a forked process (`_forked`) killed at `step`: its exit code."""
    process = _forked(list(argv), kill_at_step=step)
    process.join(timeout=300)
    return process.exitcode


FINETUNE = ["finetune", "--scale", "tiny", "train.epochs=2", "train.checkpoint_every=4",
            "--json", "--no-progress"]  # fmt: skip


def test_a_finetune_killed_mid_epoch_resumes_to_the_uninterrupted_model(
    tiny_study, tmp_path, capsys
):
    whole = run_folder(tiny_study, tmp_path / "whole", "pretrain-")
    killed = run_folder(tiny_study, tmp_path / "killed", "pretrain-")
    assert main([*FINETUNE, "--out", str(whole)]) == 0
    expected = _json(capsys)
    assert expected["steps"] == 30 and not expected["cached"]  # 15 steps an epoch

    # Killed after step 22's log line: the last checkpoint is step 20's, 5 batches into epoch 2.
    assert _killed(22, *FINETUNE, "--out", str(killed)) == -signal.SIGKILL
    (stage,) = (killed / "models").glob("finetune-*")
    state = json.loads((stage / "work" / "checkpoint" / "state.json").read_text())
    assert state["position"] == {"step": 20, "epoch": 1, "batches_done": 5}
    assert not (stage / "model").exists() and not (stage / "stage.json").exists()
    assert len((stage / "work" / "train_log.jsonl").read_text().splitlines()) == 22

    assert main([*FINETUNE, "--out", str(killed)]) == 0
    out, err = capsys.readouterr()
    resumed = json.loads(out.strip().splitlines()[-1])
    assert "warning" not in err
    assert resumed["steps"] == 30 and not resumed["cached"]
    records = [json.loads((s / "stage.json").read_text()) for s in (Path(expected["model_dir"]).parent, stage)]  # fmt: skip
    assert records[0]["key"] == records[1]["key"]
    assert records[0]["losses"] == records[1]["losses"]
    # The size and sha256 of every file of the stage: the safetensors bytes are the same.
    assert records[0]["files"] == records[1]["files"]
    assert "model/model.safetensors" in records[0]["files"]
    assert not (stage / "work" / "checkpoint").exists()
    # The same bytes in every file of the stage, on the same data: the resumed model's evaluation
    # is the uninterrupted one's, so neither is evaluated here (evaluating one model twice gives
    # the same numbers: the one-process test of tests/test_pipeline.py).


UNLEARN = ["unlearn", "--scale", "tiny", "--method", "npo", "--split", "forget10",
           "unlearn.epochs=2", "--json", "--no-progress"]  # fmt: skip


def test_an_npo_unlearning_killed_mid_epoch_resumes_to_the_uninterrupted_model(
    tiny_study, tmp_path, capsys, monkeypatch
):
    whole = run_folder(tiny_study, tmp_path / "whole", "pretrain-", "finetune-")
    killed = run_folder(tiny_study, tmp_path / "killed", "pretrain-", "finetune-")
    saved, save = [], loop.save_checkpoint
    monkeypatch.setattr(
        loop, "save_checkpoint", lambda *a, **k: (saved.append(k["position"].step), save(*a, **k))
    )
    assert main([*UNLEARN, "--out", str(whole)]) == 0
    expected = _json(capsys)
    assert expected["steps"] == 10 and not expected["cached"]  # 20 questions, batches of 4
    # Epoch 1's end only: after the last step the finished model is saved, not a checkpoint
    # that would be deleted unread.
    assert saved == [5]

    assert _killed(7, *UNLEARN, "--out", str(killed)) == -signal.SIGKILL
    (run,) = (killed / "unlearn").glob("npo-forget10-*")
    state = json.loads((run / "work" / "checkpoint" / "state.json").read_text())
    assert state["position"] == {"step": 5, "epoch": 1, "batches_done": 0}
    assert (run / "snapshots" / "step-5").is_dir() and not (run / "unlearn.json").exists()

    assert main([*UNLEARN, "--out", str(killed)]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err
    assert json.loads(out.strip().splitlines()[-1])["steps"] == 10
    records = [json.loads((r / "unlearn.json").read_text()) for r in (Path(expected["model_dir"]).parent, run)]  # fmt: skip
    assert records[0]["losses"] == records[1]["losses"]
    # Step 0 is the start model, each in its own folder; then the same snapshots.
    assert [s for s, _ in records[0]["snapshots"]] == [0, 5, 10]
    assert records[0]["snapshots"][1:] == records[1]["snapshots"][1:]
    # Every file of the run, the final model and each epoch's snapshot: the same bytes.
    assert records[0]["files"] == records[1]["files"]
    assert {"model/model.safetensors", "snapshots/step-5/model.safetensors"} <= set(
        records[0]["files"]
    )


# --- whole studies into one shared cache --------------------------------------------------------

# One method for 3 epochs of 5 steps, no attacks and no shadow models; two worker processes, as the
# built-in study on CPU uses.
STUDY = ["run", "--scale", "tiny", "--splits", "forget10", "--methods", "npo", "unlearn.epochs=3",
         "eval.formats=false", "eval.lume=false", "eval.max_new_tokens=4", "eval.mia_shadows=0",
         "study.attacks=[]", "study.workers=2", "--json", "--no-progress"]  # fmt: skip


def _fresh_cache(folder: Path, tiny_cache: Path) -> Path:
    """A new cache holding only the session's trained models (tokenizer, base, finetuned,
    retain90), as a run that trained them would leave it; the data, the unlearning run and every
    evaluation are made by the runs under test."""
    for entry in (tiny_cache / "models").iterdir():
        if entry.is_dir():
            shutil.copytree(entry, folder / "models" / entry.name)
    return folder


def _leftovers(*roots: Path) -> list[str]:
    """What a torn or unfinished write leaves: temp names, and cache entries without their
    record (the file written last, whose presence means finished)."""
    found = [
        str(path)
        for root in roots
        for path in root.rglob("*")
        if any(mark in path.name for mark in TEMP_MARKS)
    ]
    for root in roots:
        for kind, record in RECORDS.items():
            for entry in root.glob(f"{kind}/*"):
                name = "tokenizer.json" if entry.name.startswith("tokenizer-") else record
                if entry.is_dir() and not entry.is_symlink() and not (entry / name).is_file():
                    found.append(f"{entry} (no {name})")
    return found


def _damaged(cache: Path) -> list[str]:
    """Finished entries whose files do not match their record: something half-written under a
    final name."""
    found = []
    for kind in ("models", "unlearn"):
        for path in cache.glob(f"{kind}/*/{RECORDS[kind]}"):
            record, problem = read_record(path)
            if problem or (problem := stage_problem(path.parent, record)):
                found.append(f"{path.parent}: {problem}")
    for path in cache.glob("evaluations/*/*.json"):
        if read_record(path)[1]:
            found.append(f"{path}: {read_record(path)[1]}")
    return found


@pytest.fixture(scope="module")
def two_runs(tiny_study, tiny_cache, tmp_path_factory):
    """Two studies at once into one fresh cache, from two processes: one forked (`_forked`),
    the other this one (a command-line subprocess each cost 8 s of CPU more: an interpreter and
    the imports of a study). (cache, [(exit code, stdout, stderr, out folder)])."""
    root = tmp_path_factory.mktemp("two-runs")
    cache = _fresh_cache(root / "cache", tiny_cache)
    streams = root / "a-streams"
    first = _forked(
        [*STUDY, "--out", str(root / "a")], streams=streams, FORGETBENCH_CACHE=str(cache)
    )
    stdout, stderr = io.StringIO(), io.StringIO()
    with (
        pytest.MonkeyPatch.context() as patch,
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        patch.setenv("FORGETBENCH_CACHE", str(cache))
        code = main([*STUDY, "--out", str(root / "b")])
    first.join(timeout=600)
    return cache, [
        (
            first.exitcode,
            (streams / "stdout").read_text(),
            (streams / "stderr").read_text(),
            root / "a",
        ),
        (code, stdout.getvalue(), stderr.getvalue(), root / "b"),
    ]


def test_two_runs_into_one_fresh_cache_both_succeed_with_the_same_rows(two_runs):
    cache, runs = two_runs
    for code, _, stderr, _ in runs:
        assert code == 0, stderr[-3000:]
    out_a, out_b = (run[3] for run in runs)
    rows = [json.loads((out / "results.json").read_text())["rows"] for out in (out_a, out_b)]
    # The retain, finetuned and base models, then NPO after each of its 3 epochs.
    assert [(r["method"], r["step"]) for r in rows[0]] == [
        ("retain", 0),
        ("finetuned", 0),
        ("base", 0),
        ("npo", 5),
        ("npo", 10),
        ("npo", 15),
    ]
    assert rows[0] == rows[1]
    assert json.loads(runs[0][1].strip().splitlines()[-1])["rows"] == rows[0]


def test_two_runs_into_one_cache_leave_nothing_half_made(two_runs):
    cache, runs = two_runs
    outs = [run[3] for run in runs]
    assert _leftovers(cache, *outs) == [] and _damaged(cache) == []
    assert [p.name for p in cache.glob("*/*/work/checkpoint")] == []  # superseded, removed
    (data,) = [p for p in cache.glob("data/*") if p.is_dir()]
    assert (data / "manifest.json").is_file()
    # The unlearning run trained once (15 steps, one log line each), the other run reused it.
    (log,) = cache.glob("unlearn/npo-*/work/train_log.jsonl")
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == list(range(1, 16))
    for out in outs:
        assert all(link.is_symlink() for link in (out / "unlearn").iterdir())


def test_ctrl_c_during_a_run_exits_130_keeps_every_write_whole_and_the_rerun_resumes(
    two_runs, tiny_cache, tmp_path, monkeypatch, capsys
):
    cache = _fresh_cache(tmp_path / "cache", tiny_cache)
    out, streams = tmp_path / "run", tmp_path / "streams"
    # A forked command in a session of its own: Ctrl-C in a terminal sends SIGINT to the whole
    # group, the command and its study's workers (4 s of CPU less than a new interpreter).
    first = _forked(
        [*STUDY, "--out", str(out)], streams=streams, session=True, FORGETBENCH_CACHE=str(cache)
    )
    # Ctrl-C two steps into NPO's second epoch: its epoch-1 checkpoint (step 5) and snapshot
    # exist, reference evaluations are running or done in the other worker.
    log = None
    while log is None or len(log.read_bytes().splitlines()) < 7:
        assert first.is_alive(), (streams / "stderr").read_text()[-3000:]
        log = next(iter(cache.glob("unlearn/npo-*/work/train_log.jsonl")), None)
        time.sleep(0.01)
    os.killpg(first.pid, signal.SIGINT)
    first.join(timeout=120)
    err = (streams / "stderr").read_text()
    assert first.exitcode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == (
        "error: interrupted — finished stages are kept; re-run to resume"
    )
    assert "Traceback" not in err
    assert not (out / "results.json").exists() and not (out / "report.html").exists()
    assert _damaged(cache) == []
    assert [p for p in _leftovers(cache, out) if "(no " not in p] == []  # no temp file
    run = log.parent.parent
    assert not (run / "unlearn.json").exists()  # stopped mid-run, not finished
    state = json.loads((run / "work" / "checkpoint" / "state.json").read_text())
    assert state["position"]["step"] == 5
    kept = log.read_text().splitlines()[:5]  # the wall-clock time in each line dates it
    finished = {p: p.stat().st_mtime_ns for p in cache.glob("evaluations/*/summary.json")}

    # The rerun in this process (what is tested is the interrupted run's leftovers, not a second
    # interpreter): 4 s of CPU less.
    monkeypatch.setenv("FORGETBENCH_CACHE", str(cache))
    assert main([*STUDY, "--out", str(out)]) == 0, capsys.readouterr().err[-3000:]
    lines = log.read_text().splitlines()
    assert lines[:5] == kept and len(lines) == 15  # resumed from step 5, not retrained
    assert {p: p.stat().st_mtime_ns for p in finished} == finished  # evaluations reused
    assert _leftovers(cache, out) == [] and _damaged(cache) == []
    _, runs = two_runs
    reference = json.loads((runs[0][3] / "results.json").read_text())["rows"]
    assert json.loads((out / "results.json").read_text())["rows"] == reference


# --- the worker pool under Ctrl-C ---------------------------------------------------------------


def _until_interrupted(started: str) -> str:
    Path(started).write_text("started")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)
    return "not interrupted"


def _mark(path: str) -> str:
    Path(path).write_text("ran")
    return "ran"


def _wait_for(*paths: Path) -> None:
    deadline = time.monotonic() + 60
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, "the jobs never started"
        time.sleep(0.01)


def _interrupt_workers() -> None:
    for worker in multiprocessing.active_children():  # the pool's: this test starts no other
        os.kill(worker.pid, signal.SIGINT)  # what Ctrl-C sends every process of the group


def test_ctrl_c_stops_each_workers_job_and_starts_none_of_the_queued_ones(tmp_path):
    # The executor hands each worker one job more than it runs; before, every worker went on
    # with them after Ctrl-C, so the study took a whole job to stop.
    pool = make_pool(2)
    try:
        running = [pool.submit(_until_interrupted, str(tmp_path / f"started-{i}")) for i in (0, 1)]
        _wait_for(tmp_path / "started-0", tmp_path / "started-1")
        queued = [pool.submit(_mark, str(tmp_path / f"queued-{i}")) for i in range(3)]
        _interrupt_workers()
        for job in running:
            with pytest.raises(KeyboardInterrupt):
                job.result(timeout=30)
        for job in queued:
            with pytest.raises(CancelledError):
                job.result(timeout=30)
    finally:
        pool.shutdown(cancel_futures=True)
    assert not list(tmp_path.glob("queued-*"))


def test_ctrl_c_reaching_an_idle_worker_leaves_the_pool_whole(tmp_path):
    # An idle worker used to die of the KeyboardInterrupt (a traceback on stderr), breaking the
    # pool: its manager then terminated the other workers in the middle of their cleanup.
    pool = make_pool(2)
    try:
        job = pool.submit(_until_interrupted, str(tmp_path / "started"))
        _wait_for(tmp_path / "started")
        pool.submit(_mark, str(tmp_path / "second")).result(timeout=60)  # a second worker, idle
        assert len(multiprocessing.active_children()) == 2
        _interrupt_workers()
        with pytest.raises(KeyboardInterrupt):
            job.result(timeout=30)
        with pytest.raises(CancelledError):  # not BrokenProcessPool
            pool.submit(_mark, str(tmp_path / "after")).result(timeout=30)
    finally:
        pool.shutdown(cancel_futures=True)
    assert not (tmp_path / "after").exists()


def test_pool_workers_see_the_parents_environment_as_it_is_now(monkeypatch):
    # Workers are forks of a fork server started once per process: what they see of the
    # environment must be the parent's at the pool's start (the cache, device and precision a
    # command sets), not the server's from whenever it started.
    values = []
    for value in ("first", "second"):
        monkeypatch.setenv("FORGETBENCH_POOL_PROBE", value)
        pool = make_pool(2)
        try:
            values.append(pool.submit(os.getenv, "FORGETBENCH_POOL_PROBE").result(timeout=120))
        finally:
            pool.shutdown()
    assert values == ["first", "second"]


def _imported(module: str) -> bool:
    return module in sys.modules


def test_pool_workers_start_with_what_every_evaluation_imports():
    # Every evaluation scores ROUGE, whose rouge_score and nltk a process imports on its first
    # use (0.65 s of CPU): a worker forked from the fork server finds them imported already.
    pool = make_pool(2)
    try:
        held = pool.submit(_imported, "rouge_score.rouge_scorer").result(timeout=120)
    finally:
        pool.shutdown()
    assert held
