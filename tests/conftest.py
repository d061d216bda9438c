"""Shared fixtures. The real benchmark files live in ../shared/data beside the repository (CI puts
them there); they are read in place, never copied into the project."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Hermetic by default: every stage stays in its test's folder, never in the user's shared cache
# (set before any fixture or worker process starts). tests/test_cache.py turns it on in tmp.
os.environ["FORGETBENCH_CACHE"] = "off"
# Under `pytest -n N` (pytest-xdist) each worker is one of N processes on the machine's cores: one
# thread each, or their thread pools oversubscribe the cores and slow every test several-fold.
# Study pools started by a test split the cores the same way (forgetbench.study.pool).
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if XDIST_WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch  # after the variable, so its pool starts with one thread

    torch.set_num_threads(1)

# transformers binds its log handler to whatever sys.stderr is when it first logs: if that is one
# test's capsys stream, a later warning writes to a closed file and the logging error lands in
# another test's captured stderr. Bound here, to the session's stream, it is the same every order.
from transformers.utils import logging as transformers_logging  # noqa: E402

transformers_logging.get_logger("transformers")


def _shared_data() -> Path:
    configured = os.environ.get("FORGETBENCH_SHARED_DATA")
    return Path(configured) if configured else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = _shared_data()
    if not path.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must provide the real benchmark data at {path}")
        pytest.skip(f"real benchmark data not found at {path} (set FORGETBENCH_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def tofu_logs(shared_data: Path) -> Path:
    return shared_data / "tofu" / "reference-eval-logs"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    # Tests never touch the network, and never write into the user's Hugging Face cache.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.getbasetemp() / "hf-home"))
    # A command configures the device and precision for itself and the processes it starts (in
    # the environment): each test starts from the defaults, whatever an earlier one asked for.
    monkeypatch.setenv("FORGETBENCH_DEVICE", "auto")
    monkeypatch.setenv("FORGETBENCH_PRECISION", "")


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's own FORGETBENCH_CACHE, holding the tiny study's models (`tiny_study`); one
    for all pytest-xdist workers. Never the user's cache."""
    root = tmp_path_factory.getbasetemp()
    return (root.parent if XDIST_WORKER else root) / "tiny-cache"


@pytest.fixture(scope="session")
def tiny_study(tmp_path_factory: pytest.TempPathFactory, tiny_cache: Path):
    """The default study's models at tiny scale, trained once per session (about 45 s):
    (run_dir, data_dir, base, finetuned, retain90) with StageResults for the models.

    They are made through `tiny_cache` and the run folder links to them: under pytest-xdist the
    first worker trains each model while the others wait on the entry's lock (the cache's own
    mechanism, tested in tests/test_cache.py), and the cache test starts from them. Stages a
    test adds later stay in its own folder: the cache is off again once the models exist."""
    from forgetbench.benchmarks.mini import generate_mini
    from forgetbench.train.mini import finetune_mini, pretrain_base

    run = tmp_path_factory.mktemp("tiny-study")
    data = run / "data"
    generate_mini(data, scale="tiny", seed=0)
    os.environ["FORGETBENCH_CACHE"] = str(tiny_cache)
    # Workers take the two finetunings in opposite orders: while one trains the finetuned
    # model, the next trains the retain model instead of waiting on the first one's lock.
    splits = ["full", "retain90"]
    if XDIST_WORKER and int(XDIST_WORKER.removeprefix("gw") or 0) % 2:
        splits.reverse()
    try:
        base = pretrain_base(run, data, scale="tiny", progress=False)
        models = {
            split: finetune_mini(
                run, data, base.model_dir, split=split, scale="tiny", progress=False
            )
            for split in splits
        }
    finally:
        os.environ["FORGETBENCH_CACHE"] = "off"
    return run, data, base, models["full"], models["retain90"]


@pytest.fixture(scope="session")
def two_process_launch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One two-process launch (tests/two_process_script.py) for the session, shared by the
    distributed evaluation's test and the training loop's: the evaluation of a tiny untrained
    model on 7 questions of each set (`eval/`: the model, the data and each rank's log and
    layout), then three toy finetunes (`same`, `whole`, `stopped`, as in
    tests/train/test_loop.py), the last stopped after step 5, which ends the launch. `launch.json`
    holds the launch's exit code and stderr. Made once for all pytest-xdist workers: the first
    to ask launches it while the other waits on the lock."""
    import fcntl
    import json

    from launch import launch_two_cpu_processes

    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if XDIST_WORKER else base) / "two-process-launch"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / "two-process-launch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "launch.json").is_file():
            from forgetbench.benchmarks.mini import generate_mini
            from forgetbench.modeling.builtin import build_tiny_model
            from forgetbench.modeling.loading import save_model
            from toy import toy_tokenizer

            shutil.rmtree(folder, ignore_errors=True)
            evaluation = folder / "eval"
            tokenizer = toy_tokenizer()
            model = save_model(build_tiny_model(tokenizer, seed=0), tokenizer, evaluation / "model")
            generate_mini(evaluation / "data", scale="tiny", seed=0)
            (evaluation / "out").mkdir()
            same, whole, stopped = (str(folder / name) for name in ("same", "whole", "stopped"))
            done = launch_two_cpu_processes(
                REPO / "tests" / "two_process_script.py",
                str(model), str(evaluation / "data"), str(evaluation / "out"), "7", "--",
                same, "4",
                "then", whole, "4", "1", "--rank-noise",
                "then", stopped, "4", "1", "--rank-noise", "--stop-after", "5",
                timeout=900,
            )  # fmt: skip
            record = {"returncode": done.returncode, "stderr": done.stderr}
            (folder / "launch.json").write_text(json.dumps(record))
    return folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pytest-xdist hands out whole files in this order (the Makefile turns off its own reordering,
    # which puts the files with the most tests first and handed out the Ray sweep and the sanity
    # command among the last files). The first whole-study file starts at once on one worker and
    # trains the tiny models; the other worker meanwhile takes the slow files that do not wait on
    # them (two-process runs, lm-eval, toy training), then the other study file and the slow
    # files that start from the tiny models, and both end on the quick files, which fill the gaps
    # instead of one worker ending the run alone. Within each group the collected order is kept.
    study = [item.path for item in items if item.get_closest_marker("study")]
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    tiny = {item.path for item in items if "tiny_study" in getattr(item, "fixturenames", ())}

    def rank(item: pytest.Item) -> int:
        path = item.path
        if study and path == study[0]:
            return 0
        if path in slow and path not in tiny:
            return 1
        if path in study or path in slow:
            return 2
        return 3

    items.sort(key=rank)


def pytest_collection_finish(session: pytest.Session) -> None:
    # A full collection (gc.collect: the throughput benchmark frees each run's model with one,
    # accelerate and pytest call it too) walks every tracked object: in a test process, the
    # imports and collected tests of the whole suite, 0.3 s of CPU a call. They live to the end
    # of the session, so they are frozen out of the walk; what tests make is collected as before.
    import gc

    gc.collect()
    gc.freeze()


# Where the suite's CPU goes (docs/development.md, "The suite's budget"): with FORGETBENCH_TEST_CPU
# set to a folder, each process writes the CPU seconds of every test file — its own and those of
# every process below it: the ones it waited for (command-line and torchrun subprocesses), and
# the ones still running or reaped by another of them (a study pool's fork server and its
# workers, read from /proc) — so that a busy machine's wall clock does not hide which files cost
# the most.
_CPU_LOG = os.environ.get("FORGETBENCH_TEST_CPU")
_cpu_by_file: dict[str, float] = {}


def _descendants_cpu() -> float:
    """CPU seconds of the live processes below this one, each with its reaped children's."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # exited meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    total, stack = 0, list(children.get(os.getpid(), ()))
    while stack:
        pid = stack.pop()
        total += times[pid]
        stack.extend(children.get(pid, ()))
    return total / os.sysconf("SC_CLK_TCK")


def _cpu_seconds() -> float:
    import resource

    own, children = (
        resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    waited = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return waited + (_descendants_cpu() if Path("/proc/self/stat").is_file() else 0.0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if not _CPU_LOG:
        yield
        return
    start = _cpu_seconds()
    yield
    path = str(item.path.relative_to(REPO))
    _cpu_by_file[path] = _cpu_by_file.get(path, 0.0) + _cpu_seconds() - start


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _CPU_LOG and _cpu_by_file:
        import json

        folder = Path(_CPU_LOG)
        folder.mkdir(parents=True, exist_ok=True)
        name = f"cpu-{XDIST_WORKER or 'main'}.json"
        (folder / name).write_text(json.dumps(_cpu_by_file, indent=1, sort_keys=True))
