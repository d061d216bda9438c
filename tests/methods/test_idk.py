from __future__ import annotations

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import UnlearnInputs
from forgetbench.methods.idk import IDK, idk_loss


def _inputs(idk, retain):
    return UnlearnInputs(
        refusal_logps=idk[0], refusal_mask=idk[1], retain_logps=retain[0], retain_mask=retain[1]
    )


def test_loss_by_hand(idk, retain):
    # samples: L(F_idk) + L(R) = mean(1.5, 3.0) + mean(0.3, 2.0) = 2.25 + 1.15 = 3.4
    loss, parts = IDK(loss_reduction="samples").loss(_inputs(idk, retain))
    assert loss.item() == pytest.approx(3.4)
    assert parts == {"idk_nll": pytest.approx(2.25), "retain_nll": pytest.approx(1.15)}
    # tokens: (2 + 1 + 3) / 3 refusal tokens = 2.0, + (0.2 + 0.4 + 1 + 3) / 4 = 1.15
    loss, parts = IDK().loss(_inputs(idk, retain))
    assert loss.item() == pytest.approx(3.15)
    assert parts == {"idk_nll": pytest.approx(2.0), "retain_nll": pytest.approx(1.15)}
    value = idk_loss(
        torch.tensor([1.5, 3.0]), torch.tensor([0.3, 2.0]), idk_weight=2, retain_weight=1
    )
    assert value.item() == pytest.approx(2 * 2.25 + 1.15)


def test_gradient_raises_refusal_likelihood(idk, retain):
    loss, _ = IDK().loss(_inputs(idk, retain))
    loss.backward()
    # plain NLL on the refusal pooled over its 3 tokens: d/dlogp = -1/3 -> descent raises
    # log p(refusal); 0 on the padding position
    expected = torch.tensor([[-1 / 3, -1 / 3], [-1 / 3, 0.0]])
    torch.testing.assert_close(idk[0].grad, expected)


def test_validation():
    with pytest.raises(ConfigError, match="idk.idk_weight must be > 0, got -2"):
        IDK(idk_weight=-2)
