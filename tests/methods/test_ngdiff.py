from __future__ import annotations

import math

import pytest
import torch

from forgetbench.errors import ConfigError
from forgetbench.methods import TwoTaskMethod, UnlearnInputs
from forgetbench.methods.ngdiff import (
    NGDiff,
    choose_step_size,
    combine_normalized_gradients,
    gen_step_scale,
    global_grad_norm,
    ngdiff_objective,
)

# Two "parameters" (a 2-vector and a scalar). Forget gradient (3, 0 | 4): norm 5.
# Retain gradient (0, 1 | 0): norm 1.
G_F = [torch.tensor([3.0, 0.0]), torch.tensor([4.0])]
G_R = [torch.tensor([0.0, 1.0]), torch.tensor([0.0])]


def test_combined_direction_by_hand():
    # d = g_R/1 - g_F/5 = (0, 1 | 0) - (0.6, 0 | 0.8) = (-0.6, 1 | -0.8)
    d = combine_normalized_gradients(G_F, G_R)
    torch.testing.assert_close(d[0], torch.tensor([-0.6, 1.0]))
    torch.testing.assert_close(d[1], torch.tensor([-0.8]))


def test_each_task_is_unit_normalised_jointly():
    # retain part alone (forget zeroed) and forget part alone both have joint norm 1,
    # although neither parameter's own piece does.
    zeros = [torch.zeros_like(g) for g in G_F]
    assert global_grad_norm(combine_normalized_gradients(zeros, G_R)).item() == pytest.approx(1)
    forget_only = combine_normalized_gradients(G_F, [torch.zeros_like(g) for g in G_R])
    assert global_grad_norm(forget_only).item() == pytest.approx(1.0)
    assert forget_only[0].norm().item() == pytest.approx(0.6)


def test_direction_descends_retain_and_ascends_forget():
    d = combine_normalized_gradients(G_F, G_R)
    dot = lambda a, b: sum((x * y).sum() for x, y in zip(a, b, strict=True))  # noqa: E731
    # step w - eta d: retain loss changes by -eta <g_R, d> = -eta * 1, forget by -eta * (-5)
    assert dot(G_R, d).item() == pytest.approx(1.0)
    assert dot(G_F, d).item() == pytest.approx(-5.0)


def test_zero_task_gradient_stays_finite():
    d = combine_normalized_gradients([torch.zeros(2), torch.zeros(1)], G_R)
    torch.testing.assert_close(d[0], torch.tensor([0.0, 1.0]))
    assert all(torch.isfinite(t).all() for t in d)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="parameter 1"):
        combine_normalized_gradients(G_F, [torch.zeros(2), torch.zeros(2)])


def test_objective_gradient_is_the_direction():
    # L_F(w) = w0^2 + 3 w1, L_R(w) = (w0 - 1)^2 + w1^2 at w = (2, 1):
    # g_F = (4, 3), norm 5; g_R = (2, 2), norm 2 sqrt 2. The gradient of
    # L_R/||g_R|| - L_F/||g_F|| (norms held fixed) equals combine_normalized_gradients.
    w = torch.tensor([2.0, 1.0], requires_grad=True)
    forget, retain = w[0] ** 2 + 3 * w[1], (w[0] - 1) ** 2 + w[1] ** 2
    (g_f,) = torch.autograd.grad(forget, w, retain_graph=True)
    (g_r,) = torch.autograd.grad(retain, w, retain_graph=True)
    d = combine_normalized_gradients([g_f], [g_r])[0]
    objective = ngdiff_objective(
        forget, retain, forget_grad_norm=5.0, retain_grad_norm=2 * math.sqrt(2)
    )
    (g_obj,) = torch.autograd.grad(objective, w)
    torch.testing.assert_close(g_obj, d)


def test_step_size_is_the_vertex_of_a_parabola():
    # J(eta) = 2 (eta - 0.3)^2 + 1 sampled at -0.2, 0, 0.2 -> vertex 0.3
    etas = [-0.2, 0.0, 0.2]
    losses = [2 * (e - 0.3) ** 2 + 1 for e in etas]
    assert choose_step_size(etas, losses, min=0.0, max=1.0) == pytest.approx(0.3)


def test_step_size_is_clipped():
    etas = [-0.2, 0.0, 0.2]
    losses = [2 * (e - 0.3) ** 2 + 1 for e in etas]
    assert choose_step_size(etas, losses, min=0.0, max=0.25) == pytest.approx(0.25)
    # vertex at -0.1 (a step backwards) -> clipped up to min
    losses = [(e + 0.1) ** 2 for e in etas]
    assert choose_step_size(etas, losses, min=0.01, max=1.0) == pytest.approx(0.01)


def test_step_size_at_llm_scale_learning_rates():
    # trials around lr 1e-5; J = 1e8 (eta - 3e-6)^2 + 5 -> vertex 3e-6
    etas = [-1e-5, 0.0, 1e-5]
    losses = [1e8 * (e - 3e-6) ** 2 + 5 for e in etas]
    assert choose_step_size(etas, losses, min=1e-7, max=1e-4) == pytest.approx(3e-6, rel=1e-6)


def test_least_squares_with_more_trials():
    etas = [0.0, 0.1, 0.2, 0.3, 0.4]
    losses = [3 * (e - 0.17) ** 2 - 2 for e in etas]
    assert choose_step_size(etas, losses, min=0.0, max=1.0) == pytest.approx(0.17)


def test_concave_or_linear_falls_back_to_best_trial():
    etas = [0.0, 0.1, 0.2]
    # concave: -(eta - 0.05)^2 -> -0.0025, -0.0025, -0.0225: best trial 0.2
    concave = [-((e - 0.05) ** 2) for e in etas]
    assert choose_step_size(etas, concave, min=0.0, max=1.0) == pytest.approx(0.2)
    # linear: -eta -> best trial 0.2
    assert choose_step_size(etas, [-e for e in etas], min=0.0, max=1.0) == pytest.approx(0.2)
    # flat: the first trial
    assert choose_step_size(etas, [1.0, 1.0, 1.0], min=0.0, max=1.0) == pytest.approx(0.0)


def test_non_finite_trials_are_ignored():
    etas = [0.0, 0.1, 0.2, 0.3]
    losses = [(e - 0.12) ** 2 for e in etas]
    losses[3] = math.nan  # the largest trial step diverged
    assert choose_step_size(etas, losses, min=0.0, max=1.0) == pytest.approx(0.12)
    assert choose_step_size(etas, [math.inf] * 4, min=0.05, max=1.0) == pytest.approx(0.05)


def test_gen_rule_moves_a_smoothed_step_toward_the_vertex():
    # GeN's package: y = J(x) - J(0) ~ a/2 x^2 - b x through the origin, optimum x* = b/a,
    # new step = 0.9 + 0.1 * clip(x*, 1/2, 2) times the current one.
    # J = 2 (x - 0.3)^2 -> y = 2x^2 - 1.2x: a = 4, b = 1.2, x* = 0.3 -> clip 0.5 -> 0.95
    xs = [-1.0, 0.0, 1.0]
    assert gen_step_scale(xs, [2 * (x - 0.3) ** 2 for x in xs]) == pytest.approx(0.95)
    # x* = 1.5 (inside [1/2, 2]) -> 0.9 + 0.15 = 1.05; x* = 7 -> clip 2 -> 1.1
    assert gen_step_scale(xs, [(x - 1.5) ** 2 for x in xs]) == pytest.approx(1.05)
    assert gen_step_scale(xs, [(x - 7.0) ** 2 for x in xs]) == pytest.approx(1.1)
    # the multipliers need not be ordered or symmetric
    xs = [0.0, 2.0, -1.0, 1.0]
    assert gen_step_scale(xs, [(x - 1.5) ** 2 for x in xs]) == pytest.approx(1.05)


def test_gen_rule_keeps_the_step_unless_the_fit_is_a_good_convex_descent():
    xs = [-1.0, 0.0, 1.0]
    assert gen_step_scale(xs, [-(x**2) for x in xs]) == 1.0  # concave
    assert gen_step_scale(xs, [x for x in xs]) == 1.0  # linear: a = 0
    assert gen_step_scale(xs, [(x + 0.5) ** 2 for x in xs]) == 1.0  # b < 0: uphill direction
    assert gen_step_scale(xs, [0.0, 0.0, 0.0]) == 1.0  # flat
    # a poor quadratic fit (R^2 < 0.99) of 4 noisy points
    xs = [-1.0, 0.0, 1.0, 2.0]
    assert gen_step_scale(xs, [1.0, 0.0, -1.0, 3.0]) == 1.0
    # a diverged trial: halve (the package halves its lr when its fit raises)
    assert gen_step_scale([-1.0, 0.0, 1.0], [1.0, 0.0, math.nan]) == 0.5


def test_fit_scale_picks_the_rule_and_keeps_the_gain_in_bounds():
    xs = (-1.0, 0.0, 1.0)
    values = [(x - 7.0) ** 2 for x in xs]
    assert NGDiff().fit_scale(values, gain=1.0) == pytest.approx(1.1)
    # gain 9.5 of at most 10: the factor stops at 10/9.5
    assert NGDiff().fit_scale(values, gain=9.5) == pytest.approx(10 / 9.5)
    # "vertex" (forgetbench's earlier rule) jumps to the vertex 7, clipped to 10 / gain
    assert NGDiff(lr_rule="vertex").fit_scale(values, gain=1.0) == pytest.approx(7.0)
    assert NGDiff(lr_rule="vertex").fit_scale(values, gain=2.0) == pytest.approx(5.0)


def test_step_size_argument_errors():
    with pytest.raises(ValueError, match="3 trial sizes but 2 losses"):
        choose_step_size([0, 1, 2], [0, 1], min=0, max=1)
    with pytest.raises(ValueError, match="min <= max"):
        choose_step_size([0, 1, 2], [0, 1, 2], min=2, max=1)


def test_method_is_a_two_task_method(forget, retain):
    method = NGDiff()
    assert isinstance(method, TwoTaskMethod)
    inputs = UnlearnInputs(
        forget_logps=forget[0], forget_mask=forget[1], retain_logps=retain[0], retain_mask=retain[1]
    )
    # tokens (default): L_F = 3.5 / 3 answer tokens; samples: the mean of 1.5 and 0.5
    forget_loss, retain_loss = method.task_losses(inputs)
    assert (forget_loss.item(), retain_loss.item()) == pytest.approx((3.5 / 3, 1.15))
    forget_loss, _ = NGDiff(loss_reduction="samples").task_losses(inputs)
    assert forget_loss.item() == pytest.approx(1.0)
    loss, parts = method.loss(inputs)  # L_R - L_F, for logging
    assert loss.item() == pytest.approx(1.15 - 3.5 / 3)
    assert parts == {"forget_nll": pytest.approx(3.5 / 3), "retain_nll": pytest.approx(1.15)}
    assert method.gain_bounds() == pytest.approx((0.01, 10.0))
    # the direction and the fitted objective are the module's pure functions
    d = method.combine_gradients(G_F, G_R)
    torch.testing.assert_close(d[1], torch.tensor([-0.8]))
    value = method.objective(
        torch.tensor(1.0), torch.tensor(1.15), forget_norm=5.0, retain_norm=1.0
    )
    assert value.item() == pytest.approx(1.15 - 0.2)


def test_validation():
    with pytest.raises(ConfigError, match="ngdiff.trial_multipliers must hold at least 3 distinct"):
        NGDiff(trial_multipliers=(0.0, 0.0, 1.0))
    with pytest.raises(ConfigError, match="ngdiff.min_lr_ratio must be <= ngdiff.max_lr_ratio"):
        NGDiff(min_lr_ratio=2.0, max_lr_ratio=1.0)
    with pytest.raises(ConfigError, match="ngdiff.lr_update_every must be >= 1, got 0"):
        NGDiff(lr_update_every=0)
    with pytest.raises(ConfigError, match="must contain 0 exactly once for lr_rule=gen"):
        NGDiff(trial_multipliers=(1.0, 2.0, 3.0))
    assert NGDiff(lr_rule="vertex", trial_multipliers=(1.0, 2.0, 3.0)).lr_rule == "vertex"
    with pytest.raises(ConfigError, match="ngdiff.lr_rule must be one of gen, vertex"):
        NGDiff(lr_rule="newton")
    with pytest.raises(ValueError, match="exactly one 0"):
        gen_step_scale([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
