"""Buffer donation: a compiled step with ``inputs=`` / ``outputs=`` state writes its new
state arrays into the old ones' buffers when nothing else holds them (jax.jit's
``donate_argnums``, MLX's donated arrays), and never when something does.

Every test compares against the same steps with donation off (``_donations`` patched
to donate nothing): the same bits, since donation only changes where results go."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import braze as bz
from braze.graph.kernel import Schedule, Slot
from braze.graph.passes.memory import donatable

compile_module = importlib.import_module("braze.arrays.compile")


def _addr(a: bz.Array) -> int:
    return int(a._value().__array_interface__["data"][0])


class _Two(bz.nn.Module):
    def __init__(self, first: bz.nn.Module, second: bz.nn.Module) -> None:
        super().__init__()
        self.first, self.second = first, second

    def __call__(self, x: bz.Array) -> bz.Array:
        return self.second(bz.nn.relu(self.first(x)))


def _train(donate: bool, monkeypatch: pytest.MonkeyPatch, steps: int = 4, conv: bool = False):
    """A small model trained with Adam by a compiled step; (losses, final params, whether
    the first layer's weight stayed in its buffer from the second step on)."""
    if not donate:
        monkeypatch.setattr(compile_module, "_donations", lambda pairs, state: ())
    rng = np.random.default_rng(0)
    nn = bz.nn
    if conv:
        net = _Two(nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 4, 1))
        x = bz.asarray(rng.standard_normal((2, 6, 6, 3)).astype(np.float32))
        y = bz.asarray(rng.standard_normal((2, 6, 6, 4)).astype(np.float32))
    else:
        net = _Two(nn.Linear(24, 32), nn.Linear(32, 5))
        x = bz.asarray(rng.standard_normal((16, 24)).astype(np.float32))
        y = bz.asarray(rng.standard_normal((16, 5)).astype(np.float32))
    params, struct = compile_module.flatten(net.parameters())
    net.update(compile_module.unflatten(struct, [  # the same start in both runs
        bz.asarray(rng.standard_normal(p.shape).astype(np.float32) * 0.1) for p in params]))
    opt = bz.optimizers.Adam(1e-2)
    opt.init(net.trainable_parameters())
    vg = bz.nn.value_and_grad(net, lambda a, b: ((net(a) - b) ** 2).mean())

    @bz.compile(inputs=[net, opt], outputs=[net, opt])
    def step(a, b):
        loss, g = vg(a, b)
        opt.update(net, g)
        return loss

    losses, stayed = [], []
    def first() -> bz.Array:  # the first layer's weight (its bias's update is a reduction)
        return net.first.weight
    for _ in range(steps):
        before = _addr(first())
        losses.append(float(step(x, y)))
        stayed.append(_addr(first()) == before)
    final = [np.array(p) for p in compile_module.flatten(net.parameters())[0]]
    return losses, final, all(stayed[1:])


@pytest.mark.parametrize("conv", [False, True])
def test_donated_training_steps_give_the_bits_of_fresh_buffers(monkeypatch, conv):
    with monkeypatch.context() as m:
        ref_losses, ref_params, ref_stayed = _train(False, m, conv=conv)
    losses, params, stayed = _train(True, monkeypatch, conv=conv)
    assert losses == ref_losses
    for a, b in zip(params, ref_params):
        np.testing.assert_array_equal(a, b)
    assert not ref_stayed  # without donation every step allocates new parameters
    if bz.backends.current().name == "cpu":
        assert stayed  # with it, the first weight is updated in its own buffer


def _linear_step():
    net = bz.nn.Linear(8, 4)
    opt = bz.optimizers.SGD(0.5)
    opt.init(net.trainable_parameters())
    vg = bz.nn.value_and_grad(net, lambda a: (net(a) ** 2).sum())

    @bz.compile(inputs=[net, opt], outputs=[net, opt])
    def step(a):
        loss, g = vg(a)
        opt.update(net, g)
        return loss

    x = bz.asarray(np.linspace(-1, 1, 24, dtype=np.float32).reshape(3, 8))
    step(x), step(x)  # trace, then replay through a plan
    return net, step, x


def test_an_old_state_array_the_user_holds_is_not_overwritten():
    net, step, x = _linear_step()
    held = net.weight  # another name for the old array
    view = np.asarray(net.weight)  # a numpy view of its buffer
    lazy = net.weight * 2.0  # a pending graph reading it
    snap = np.array(held)
    step(x)
    np.testing.assert_array_equal(np.array(held), snap)
    np.testing.assert_array_equal(view, snap)
    np.testing.assert_array_equal(np.array(lazy), snap * 2.0)
    assert not np.array_equal(np.array(net.weight), snap)  # (the step did change it)


def test_a_slice_of_an_old_state_array_keeps_its_values():
    net, step, x = _linear_step()
    part = net.weight[1:3]
    np.asarray(part)  # evaluated: a view of the old buffer, or a copy
    snap = np.array(net.weight)[1:3]
    step(x)
    np.testing.assert_array_equal(np.array(part), snap)


def _schedule_of(fn, *args):
    return bz.explain(fn, *args).schedule


def test_donatable_needs_the_stores_index_map_and_no_later_read():
    a = bz.asarray(np.arange(16, dtype=np.float32).reshape(4, 4))
    s = _schedule_of(lambda w: w + 1.0, a)  # elementwise over the same index map
    assert donatable(s, 0, 0)
    s = _schedule_of(lambda w: w.T + 1.0, a)  # read transposed: another iteration's element
    assert not donatable(s, 0, 0)
    s = _schedule_of(lambda w: w - w.sum(axis=0), a)  # a reduction reads every element first
    assert not any(donatable(s, 0, i) for i in range(len(s.input_slots)))
    s = _schedule_of(lambda w: (w.reshape(16), w * 2.0), a)  # a view of the input returned
    assert len(s.output_slots) == 2 and not donatable(s, 1, 0)
    empty = Schedule([Slot((4,), np.dtype("f4"))], [0], {}, [0], [])
    assert not donatable(empty, 0, 0)  # an output that is the input: nothing to donate


@pytest.mark.parametrize("form", ["slice", "reshape", "same", "T"])
def test_returning_a_view_of_the_old_state_keeps_its_values(form):
    state = {"w": bz.asarray(np.arange(16, dtype=np.float32).reshape(4, 4))}

    @bz.compile(inputs=[state], outputs=[state])
    def step():
        old = state["w"]
        state["w"] = old * 2.0
        return {"slice": old[1:], "reshape": old.reshape(16), "same": old, "T": old.T}[form]

    for _ in range(3):
        ref = np.array(state["w"])
        want = {"slice": ref[1:], "reshape": ref.reshape(16), "same": ref, "T": ref.T}[form]
        np.testing.assert_array_equal(np.array(step()), want)


@settings(max_examples=25, deadline=None)
@given(form=st.sampled_from(["scale", "transpose", "center", "roll", "slice_add"]),
       n=st.integers(1, 6), steps=st.integers(2, 4))
def test_state_updates_match_numpy_with_donation(form, n, steps):
    """A state array updated by a compiled function in several forms (same index map,
    transposed, through a reduction, rolled, through a slice): the values numpy gives."""
    start = np.arange(n * n, dtype=np.float32).reshape(n, n) / 7.0
    state = {"w": bz.asarray(start.copy())}
    ref = start.copy()

    def update(w):
        if form == "scale":
            return w * 0.5 + 1.0
        if form == "transpose":
            return w.T * 0.5 + w
        if form == "center":
            return w - w.mean(axis=0)
        if form == "roll":
            return bz.roll(w, 1, axis=1) + w
        return bz.concatenate([w[:, :1] + 1.0, w[:, 1:]], axis=1)

    def np_update(w):
        if form == "scale":
            return w * np.float32(0.5) + np.float32(1.0)
        if form == "transpose":
            return w.T * np.float32(0.5) + w
        if form == "center":
            return w - w.mean(axis=0, dtype=np.float32)
        if form == "roll":
            return np.roll(w, 1, axis=1) + w
        return np.concatenate([w[:, :1] + np.float32(1.0), w[:, 1:]], axis=1)

    @bz.compile(inputs=[state], outputs=[state])
    def step():
        state["w"] = update(state["w"])
        return state["w"].sum()

    for _ in range(steps):
        step()
        ref = np_update(ref)
        np.testing.assert_allclose(np.array(state["w"]), ref, rtol=1e-5, atol=1e-5)


def test_a_large_pooled_state_is_donated_and_a_held_view_of_it_kept():
    """A state array large enough for the cpu backend's buffer pool (its base is a pooled
    buffer, past 2 MiB a huge-page mapping): donated while the state alone holds it; a
    numpy view or a slice the user keeps holds the old values."""
    n = 1 << 20  # 4 MiB of float32
    state = {"w": bz.asarray(np.zeros(n, np.float32))}

    @bz.compile(inputs=[state], outputs=[state])
    def step():
        state["w"] = state["w"] * 0.5 + 1.0

    for _ in range(3):
        step()
    before = _addr(state["w"])
    step()
    if bz.backends.current().name == "cpu":
        assert _addr(state["w"]) == before  # updated in its own buffer
    view, part = np.asarray(state["w"]), state["w"][10:20]
    np.asarray(part)
    snap = np.array(state["w"])
    step()
    np.testing.assert_array_equal(view, snap)
    np.testing.assert_array_equal(np.array(part), snap[10:20])
    np.testing.assert_allclose(np.array(state["w"]), snap * np.float32(0.5) + np.float32(1.0))


@pytest.mark.parametrize("container", ["dict", "list"])
def test_a_trace_that_raises_leaves_a_dict_or_list_state_as_it_was(container):
    w = bz.asarray(np.ones(3, np.float32))
    state = {"w": w} if container == "dict" else [w]

    @bz.compile(inputs=[state], outputs=[state])
    def step():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        step()
    held = state["w"] if container == "dict" else state[0]
    assert held is w  # (the trace's placeholders are gone again)


def test_every_state_array_of_a_step_can_be_donated():
    """The last state leaf too (a loop variable once held it, so it never was)."""
    state = {"a": bz.asarray(np.zeros(8, np.float32)), "b": bz.asarray(np.zeros(8, np.float32))}

    @bz.compile(inputs=[state], outputs=[state])
    def step():
        state["a"] = state["a"] + 1.0
        state["b"] = state["b"] + 2.0

    step(), step()
    before = {k: _addr(v) for k, v in state.items()}
    step()
    if bz.backends.current().name == "cpu":
        assert {k: _addr(v) for k, v in state.items()} == before
    np.testing.assert_array_equal(np.array(state["b"]), np.full(8, 6.0, np.float32))
