"""Which tokens each membership attack reads when the scored answer ends with an appended EOS:
open-unlearning's convention (LOSS and zlib keep it, Min-K% and Min-K%++ leave it out)."""

import numpy as np
import pytest

from forgetbench.eval.outputs import AnswerScore
from forgetbench.eval.tasks.mia import attack_scores


def _score(logps):
    logps = np.array(logps)
    return AnswerScore(logps, logps > -1, np.zeros_like(logps), np.ones_like(logps))


def test_min_k_attacks_leave_out_the_final_eos_and_loss_keeps_it():
    # tokens -0.5, -1.5, then EOS at -4.0; k = 0.4 of 2 tokens -> the 1 lowest
    scored = [_score([-0.5, -1.5, -4.0])]
    with_eos = attack_scores(scored, ["ab"], k=0.4, ends_in_eos=True)
    assert with_eos["loss"][0] == pytest.approx(-2.0)  # mean of all three
    assert with_eos["min_k"][0] == pytest.approx(-1.5)  # lowest of the two answer tokens
    # mu = 0, sigma = 1 here, so Min-K%++ reads the same tokens as Min-K%
    assert with_eos["min_k_plus_plus"][0] == pytest.approx(-1.5)
    plain = attack_scores(scored, ["ab"], k=0.4)
    assert plain["min_k"][0] == pytest.approx(-4.0)  # int(0.4 * 3) = 1: the EOS itself
