"""Evaluation across processes: two CPU processes, each scoring a shard of every set, must hold
the per-question log one process writes, in the same order.

`accelerate launch --cpu --num_processes 2` starts a single process (accelerate 1.x runs
multi-CPU jobs only through mpirun or torchrun), so the test launches through torchrun
(`--multi_gpu`) with ACCELERATE_USE_CPU=1 and checks that two processes really ran. The launch
is the session's one (`two_process_launch`, tests/conftest.py): its processes evaluate first,
then run the training loop's finetunes of tests/train/test_loop.py.
"""

import json

import numpy as np
import pytest
from eval_script import evaluate

from forgetbench.data.logs import SET_FILES, read_eval_log

pytestmark = pytest.mark.slow  # two interpreters, a process group, one evaluation: >= 20 s

QUESTIONS = 7  # as launched: odd, so the two shards are uneven (3 + 4 questions per set)


@pytest.fixture(scope="module")
def launched(two_process_launch):
    """The evaluation in the session's two-process launch (tests/conftest.py), which its
    processes run first, before the training loop's finetunes."""
    root = two_process_launch / "eval"
    out = root / "out"
    stderr = json.loads((two_process_launch / "launch.json").read_text())["stderr"]
    assert all((out / f"layout{r}.json").is_file() for r in (0, 1)), stderr[-3000:]
    layouts = {r: json.loads((out / f"layout{r}.json").read_text()) for r in (0, 1)}
    return root / "model", root / "data", out, layouts


def _assert_same_log(got, expected):
    assert set(got.sets) == set(expected.sets) == set(SET_FILES)
    for name, want in expected.sets.items():
        have = got.sets[name]
        assert have.keys == want.keys
        assert set(have.fields) == set(want.fields)
        # Same questions in the same order: prompt, generation and ground truth per question.
        assert have.fields["generated_text"] == want.fields["generated_text"], name
        for key, values in want.fields.items():
            if key == "generated_text":
                continue
            # Rows may be ragged (gt_argmax_matches). A shard batches (and shares prompt prefixes
            # among) other prompts than the whole set, so fp32 log-prob sums of ~80 nats may differ
            # in their last bits: relative 1e-6, as for any change of batching.
            for i, value in enumerate(values):
                np.testing.assert_allclose(
                    np.asarray(have.fields[key][i], dtype=float),
                    np.asarray(value, dtype=float),
                    rtol=1e-6,
                    atol=1e-6,
                    err_msg=f"{name}/{key}[{i}]",
                )


def test_two_processes_hold_the_log_of_one(launched):
    model, data, out, layouts = launched
    assert [layouts[r]["evaluated"] for r in (0, 1)] == [[0, 2], [1, 2]]
    single = evaluate(model, data, QUESTIONS)
    assert all(len(s) == QUESTIONS for s in single.sets.values())
    for rank in (0, 1):  # every process holds the whole gathered log, not only its shard
        _assert_same_log(read_eval_log(out / f"rank{rank}.json"), single)


def test_evaluation_alone_sees_a_cpu_launch(launched):
    _, _, _, layouts = launched
    assert [layouts[r]["bare"] for r in (0, 1)] == [[0, 2], [1, 2]]
