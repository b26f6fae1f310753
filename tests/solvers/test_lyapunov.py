"""BenettinStepper: the Benettin renormalisation as a stepper of the run loop — the exponent of a
flow whose linearisation is known, the numbers of a plain loop bit for bit, the accumulated
log carried in the state (also by an interrupted run), and the fixed step."""
import math

import numpy as np
import pytest

from spherepde.noise.kernel import NoiseKernel
from spherepde.solvers.controller import Controller
from spherepde.solvers.lagrangian.lyapunov import BenettinStepper
from spherepde.solvers.lagrangian.particles import retract
from spherepde.solvers.lagrangian.sde import ParticleSDE
from spherepde.solvers.trackers import Tracker


class ProjectedLinear:
    """The explicit Euler step x ↦ R(x + h P_x A x) of ẋ = P_x A x, A = diag(a): e₁ is a fixed
    point (a₁ largest); along e₂ its linearisation multiplies a separation by 1 + h(a₂ − a₁)."""

    def __init__(self, a):
        self.a = np.asarray(a, float)
        self.d = self.a.size

    def step(self, x, t, h):
        ax = x * self.a
        return retract(x + h * (ax - np.sum(x * ax, axis=-1, keepdims=True) * x))


def test_exponent_of_a_known_linearisation():
    """From x = e₁, y along e₂: every step multiplies δ by (1 + h(a₂ − a₁))(1 + O(δ₀²)), so the
    exponent is log(1 + h(a₂ − a₁))/h.  Error model: the O(δ₀²) of the retraction and of the
    quadratic terms, ≲ 10 |a| δ₀² = 1e-9 for δ₀ = 1e-5, plus the round-off of δ = |y − x|
    (|x|, |y| = 1: ≈ 1e-16/δ₀ = 1e-11 relative per step, ≤ n·1e-11/t_end = 2e-10 over the run);
    the tolerance 1e-7 holds both with room, and a missed renormalisation (δ would shrink
    geometrically and the sum telescope differently) or a lost log term is off by ≥ 1e-2."""
    a, h, n, delta0 = (0.0, -0.7, -1.5), 0.05, 40, 1e-5
    system = ProjectedLinear(a)
    st = BenettinStepper(system, delta0, h)
    x = np.array([1.0, 0.0, 0.0])
    state = st.pack(x, retract(x + delta0 * np.array([0.0, 1.0, 0.0])))
    res = Controller(st, dt=h).run(state, (0.0, n * h))
    assert res.n_steps == n
    want = math.log(1.0 + h * (a[1] - a[0])) / h
    got = st.log_sum(res.state) / (n * h)
    assert abs(got - want) <= 1e-7, (got, want)
    # the pair stays δ₀ apart after every renormalisation, x at the fixed point
    assert abs(np.linalg.norm(res.state[1] - res.state[0]) - delta0) <= 1e-6 * delta0
    assert np.array_equal(res.state[0], x)


def plain_loop(system, x, y, t_end, n, delta0):
    """The Benettin loop written out (what experiments.synchronization had before the stepper)."""
    h = t_end / n
    state = np.stack([x, y])
    total = 0.0
    for k in range(n):
        state = system.step(state, k * h, h)
        sep = state[1] - state[0]
        dist = float(np.linalg.norm(sep))
        total += math.log(dist / delta0)
        state[1] = retract(state[0] + delta0 * sep / dist)
    return state, total


@pytest.mark.parametrize("t_end, n", [(1.0, 3), (0.6, 30)])
def test_same_bits_as_the_plain_loop(t_end, n):
    """The controller's even split gives steps that are h up to round-off (most differ from h in
    the last bits); the stepper takes h itself, so the exact-sampler SDE (whose draws depend on
    h, not on t) gives the plain loop's numbers bit for bit."""
    k = NoiseKernel("relu", d=4, sigma_u=0.5, sigma_w=0.5)
    rng = np.random.default_rng(3)
    x = retract(rng.standard_normal(4))
    y = retract(x + 1e-4 * retract(rng.standard_normal(4)))
    ref_state, ref_total = plain_loop(ParticleSDE(kernel=k, seed=11), x, y, t_end, n, 1e-4)
    st = BenettinStepper(ParticleSDE(kernel=k, seed=11), 1e-4, t_end / n)
    res = Controller(st, dt=t_end / n).run(st.pack(x, y), (0.0, t_end))
    assert res.n_steps == n
    assert np.array_equal(res.state[:2], ref_state)
    assert st.log_sum(res.state) == ref_total


class StopAfter(Tracker):
    name = "stop"

    def __init__(self, steps):
        super().__init__()
        self.steps, self.seen = steps, 0

    def on_step(self, t):
        self.seen += 1
        if self.seen == self.steps:
            raise KeyboardInterrupt


def test_interrupted_run_keeps_the_log_of_the_steps_taken():
    system = ProjectedLinear((0.0, -0.7, -1.5))
    h, delta0 = 0.05, 1e-5
    st = BenettinStepper(system, delta0, h)
    x = np.array([1.0, 0.0, 0.0])
    state = st.pack(x, retract(x + delta0 * np.array([0.0, 1.0, 0.0])))
    ctl = Controller(st, StopAfter(7), dt=h)
    with pytest.raises(KeyboardInterrupt):
        ctl.run(state, (0.0, 2.0))
    assert ctl.result.interrupted and ctl.result.n_steps == 7
    full = Controller(st, dt=h).run(state, (0.0, 7 * h))
    assert st.log_sum(ctl.result.state) == st.log_sum(full.state)
    assert st.log_sum(ctl.result.state) < 0  # contraction along e₂


def test_fixed_step_and_bad_input():
    st = BenettinStepper(ProjectedLinear((0.0, -1.0, -2.0)), 1e-4, 0.1)
    x = np.array([1.0, 0.0, 0.0])
    state = st.pack(x, retract(x + 1e-4 * np.array([0.0, 1.0, 0.0])))
    with pytest.raises(ValueError, match="step is h = 0.1"):
        Controller(st, dt=0.05).run(state, (0.0, 0.5))
    with pytest.raises(ValueError, match="fixed step h"):
        Controller(st).run(state, (0.0, 0.5))
    for kw in ({"delta0": 0.0}, {"delta0": math.nan}, {"h": -1.0}, {"h": math.inf}):
        args = {"delta0": 1e-4, "h": 0.1, **kw}
        with pytest.raises(ValueError, match=next(iter(kw))):
            BenettinStepper(ProjectedLinear((0.0, -1.0, -2.0)), **args)
