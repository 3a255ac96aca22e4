"""Training: modules' parameter trees, losses, optimizers (against the update rules
written out in numpy), gradient clipping, schedules, Dropout, LoRA, a compiled training
step with implicit state equal to the eager one, and kernel counts of a fused optimizer
update. Float32 results are compared at rtol 1e-5 (one rounding order apart)."""

from __future__ import annotations

import numpy as np
import pytest

import braze as bz
from tests.test_autodiff import check_grad

nn, optim = bz.nn, bz.optimizers


def _r(seed, shape, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, shape)


class MLP(nn.Module):
    def __init__(self, d_in=6, d_hidden=8, d_out=3):
        super().__init__()
        self.layers = [nn.Linear(d_in, d_hidden), nn.Linear(d_hidden, d_out)]
        self.drop = nn.Dropout(0.0)

    def __call__(self, x):
        return self.layers[1](self.drop(nn.relu(self.layers[0](x))))


# ---------------------------------------------------------------- modules
def test_parameter_trees_update_freeze_and_modes() -> None:
    m = MLP()
    tree = m.trainable_parameters()
    assert sorted(tree) == ["layers"] and sorted(tree["layers"][1]) == ["bias", "weight"]
    m.layers[0].freeze()
    assert [n for n, _ in nn.names_from_tree(m.trainable_parameters())] == [
        "layers.1.weight", "layers.1.bias"]
    m.update({"layers": [{}, {"bias": bz.ones(3)}]})
    assert m.layers[1].bias.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"update: layers\.1\.bias: expected an array of shape"):
        m.update({"layers": [{}, {"bias": bz.ones(4)}]})
    with pytest.raises(ValueError, match="update: MLP has no parameter 'nope'"):
        m.update({"nope": bz.ones(1)})
    assert m.training and not m.eval().drop.training and m.train().drop.training
    q = nn.QuantizedLinear.from_linear(nn.Linear(64, 8))
    assert q.trainable_parameters() == {}  # packed weights are frozen


def test_value_and_grad_of_a_model_matches_finite_differences() -> None:
    m = MLP()
    x, y = bz.asarray(_r(0, (5, 6))), bz.asarray(np.array([0, 2, 1, 1, 0]))
    loss, grads = nn.value_and_grad(m, lambda x, y: nn.losses.cross_entropy(m(x), y))(x, y)
    assert sorted(n for n, _ in nn.names_from_tree(grads)) == sorted(
        n for n, _ in nn.names_from_tree(m.trainable_parameters()))
    w = m.layers[0].weight

    def f(w):
        m.layers[0].weight = w
        return nn.losses.cross_entropy(m(x), y)

    g = bz.grad(f)(w.astype(bz.float64))
    m.layers[0].weight = w
    assert np.allclose(np.asarray(grads["layers"][0]["weight"]), np.asarray(g), rtol=1e-5,
                       atol=1e-6)


# ---------------------------------------------------------------- losses
def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_cross_entropy_against_numpy() -> None:
    z, t = _r(0, (6, 5), -3, 3), np.array([0, 4, 2, -100, 1, 3])
    ls = _log_softmax(z)
    valid = t != -100
    picked = -ls[np.arange(6), np.where(valid, t, 0)]
    smooth = 0.1
    full = (1 - smooth) * picked + smooth * -ls.mean(-1)
    got = nn.losses.cross_entropy(bz.asarray(z), bz.asarray(t), ignore_index=-100,
                                  label_smoothing=smooth)
    assert np.isclose(got.item(), full[valid].mean(), rtol=1e-12)
    none = nn.losses.cross_entropy(bz.asarray(z), bz.asarray(np.abs(t) % 5), reduction="none")
    assert np.allclose(np.asarray(none), -ls[np.arange(6), np.abs(t) % 5])
    probs = np.exp(_log_softmax(_r(1, (6, 5))))
    soft = nn.losses.cross_entropy(bz.asarray(z), bz.asarray(probs), reduction="sum")
    assert np.isclose(soft.item(), -(probs * ls).sum())
    w = _r(2, (6,), 0, 1)
    weighted = nn.losses.cross_entropy(bz.asarray(z), bz.asarray(np.abs(t) % 5),
                                       weights=bz.asarray(w))
    assert np.isclose(weighted.item(), (w * -ls[np.arange(6), np.abs(t) % 5]).sum() / w.sum())
    check_grad(lambda z: nn.losses.cross_entropy(z, bz.asarray(t), ignore_index=-100,
                                                 label_smoothing=0.2), bz.asarray(z))


def test_regression_and_binary_losses() -> None:
    p, t = _r(0, (4, 3)), _r(1, (4, 3))
    assert np.isclose(nn.losses.mse_loss(bz.asarray(p), bz.asarray(t)).item(),
                      ((p - t) ** 2).mean())
    assert np.isclose(nn.losses.l1_loss(bz.asarray(p), bz.asarray(t), reduction="sum").item(),
                      np.abs(p - t).sum())
    x, y = _r(2, (7,), -30, 30), (_r(3, (7,)) > 0).astype(np.float64)
    want = np.mean(np.maximum(x, 0) - x * y + np.log1p(np.exp(-np.abs(x))))
    assert np.isclose(nn.losses.binary_cross_entropy(bz.asarray(x), bz.asarray(y)).item(),
                      want)
    probs = 1 / (1 + np.exp(-x / 10))
    assert np.isclose(nn.losses.binary_cross_entropy(
        bz.asarray(probs), bz.asarray(y), with_logits=False).item(),
        -np.mean(y * np.log(probs) + (1 - y) * np.log(1 - probs)))
    check_grad(lambda x: nn.losses.binary_cross_entropy(x, bz.asarray(y)), bz.asarray(x))
    with pytest.raises(ValueError, match=r"mse_loss: predictions of shape \(4, 3\)"):
        nn.losses.mse_loss(bz.asarray(p), bz.asarray(t[0]))
    with pytest.raises(ValueError, match="reduction must be"):
        nn.losses.l1_loss(bz.asarray(p), bz.asarray(t), reduction="avg")
    with pytest.raises(ValueError, match=r"cross_entropy: targets of shape \(3,\)"):
        nn.losses.cross_entropy(bz.asarray(p), bz.asarray(np.array([0, 1, 2])))


# ---------------------------------------------------------------- optimizers
def _numpy_steps(kind, p, grads, **kw):
    """The update rules written out (torch's formulas), one gradient per step."""
    p = p.copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    lr = kw["lr"]
    for t, g in enumerate(grads, 1):
        if kind == "sgd":
            mu, wd, nesterov = kw.get("momentum", 0), kw.get("weight_decay", 0), \
                kw.get("nesterov", False)
            g = g + wd * p
            if mu:
                m = mu * m + g
                g = g + mu * m if nesterov else m
            p = p - lr * g
        else:
            b1, b2, eps = 0.9, 0.999, 1e-8
            if kind == "adamw":
                p = p * (1 - lr * kw["weight_decay"])
            m = b1 * m + (1 - b1) * g
            v = b2 * v + (1 - b2) * g * g
            p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


@pytest.mark.parametrize("kind,kw", [
    ("sgd", {"lr": 0.1}), ("sgd", {"lr": 0.1, "momentum": 0.9}),
    ("sgd", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("adam", {"lr": 0.01}), ("adamw", {"lr": 0.01, "weight_decay": 0.1}),
])
def test_optimizers_against_their_update_rules(kind, kw) -> None:
    p0 = _r(0, (4, 3)).astype(np.float32)
    grads = [_r(i + 1, (4, 3)).astype(np.float32) for i in range(4)]
    if kind == "sgd":
        opt = optim.SGD(kw["lr"], momentum=kw.get("momentum", 0.0),
                        weight_decay=kw.get("weight_decay", 0.0),
                        nesterov=kw.get("nesterov", False))
    elif kind == "adam":
        opt = optim.Adam(kw["lr"])
    else:
        opt = optim.AdamW(kw["lr"], weight_decay=kw["weight_decay"])
    params = {"w": bz.asarray(p0)}
    for g in grads:
        params = opt.apply_gradients({"w": bz.asarray(g)}, params)
        bz.eval(params, opt.state)
    assert opt.step.item() == 4
    assert np.allclose(np.asarray(params["w"]), _numpy_steps(kind, p0, grads, **kw),
                       rtol=1e-5, atol=1e-6)


def test_optimizer_update_is_one_kernel_per_parameter() -> None:
    opt = optim.AdamW(1e-3)
    params = {"w": bz.ones((64, 32)), "b": bz.ones((32,)), "c": bz.ones((7, 5))}
    grads = {k: v * 0.5 for k, v in params.items()}
    bz.eval(grads)
    report = bz.explain(lambda p, g: (opt.apply_gradients(g, p), opt.state), params, grads)
    # one kernel per parameter (moments, bias correction, decay and step fused) plus one
    # for the scalar bias-correction terms of this step
    assert report.num_kernels == len(params) + 1


def test_clipping_and_schedules() -> None:
    g = {"a": bz.asarray([3.0, 0.0]), "b": [bz.asarray([[4.0]])]}
    clipped, norm = optim.clip_grad_norm(g, 2.5)
    assert np.isclose(norm.item(), 5.0)
    assert np.allclose(np.asarray(clipped["a"]), [1.5, 0.0], atol=1e-6)
    same, _ = optim.clip_grad_norm(g, 10.0)
    assert same["b"][0].tolist() == [[4.0]]
    warm = optim.linear_schedule(0.0, 1e-3, 10)
    cos = optim.cosine_decay(1e-3, 100, end=1e-5)
    sched = optim.join_schedules([warm, cos], [10])
    got = [sched(bz.asarray(s)).item() for s in (0, 5, 10, 60, 110, 500)]
    want = [0.0, 5e-4, 1e-3, 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + np.cos(np.pi * 0.5)), 1e-5, 1e-5]
    assert np.allclose(got, want, rtol=1e-5)
    assert np.isclose(optim.exponential_decay(1.0, 0.9)(bz.asarray(3)).item(), 0.729)
    opt = optim.SGD(sched)
    assert opt.learning_rate.item() == pytest.approx(1e-4)  # step 1 of the warm-up


# ---------------------------------------------------------------- a training step
def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 6)).astype(np.float32)
    y = np.argmax(x @ rng.standard_normal((6, 3)), axis=1)
    return bz.asarray(x), bz.asarray(y)


def test_compiled_step_with_state_equals_eager() -> None:
    x, y = _data()
    eager, compiled = MLP(), MLP()
    opt_e, opt_c = optim.AdamW(1e-2), optim.AdamW(1e-2)

    def step_on(model, opt):
        loss_fn = lambda x, y: nn.losses.cross_entropy(model(x), y)  # noqa: E731
        vg = nn.value_and_grad(model, loss_fn)

        def step(x, y):
            loss, grads = vg(x, y)
            grads, _ = optim.clip_grad_norm(grads, 1.0)
            opt.update(model, grads)
            return loss
        return step

    eager_step = step_on(eager, opt_e)
    state = [compiled, opt_c]
    compiled_step = bz.compile(step_on(compiled, opt_c), inputs=state, outputs=state)
    losses_e, losses_c = [], []
    for _ in range(6):
        losses_e.append(eager_step(x, y).item())
        bz.eval(eager.parameters(), opt_e.state)
        losses_c.append(compiled_step(x, y).item())
    assert np.allclose(losses_e, losses_c, rtol=1e-5)
    assert losses_c[-1] < losses_c[0]
    assert compiled_step.trace_count == 2  # (the optimizer's moments appear after step 1)
    for (n, a), (_, b) in zip(nn.names_from_tree(eager.parameters()),
                              nn.names_from_tree(compiled.parameters())):
        assert np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6), n
    assert opt_c.step.item() == 6
    fresh = MLP()
    opt = optim.Adam(1e-2).init(fresh.trainable_parameters())
    once = bz.compile(step_on(fresh, opt), inputs=[fresh, opt], outputs=[fresh, opt])
    for _ in range(3):
        once(x, y)
    assert once.trace_count == 1  # (state created up front: one structure from the start)


def test_compile_state_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="bz.compile: inputs= takes modules, optimizers"):
        bz.compile(lambda: None, inputs=[3])


def test_dropout() -> None:
    d = nn.Dropout(0.25)
    x = bz.ones((200, 100))
    y = np.asarray(d(x, key=bz.random.key(1)))
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01 and np.allclose(y[kept], 1 / 0.75)
    assert np.array_equal(np.asarray(d(x, key=bz.random.key(1))), y)
    assert np.asarray(d.eval()(x)).tolist() == np.asarray(x).tolist()
    with pytest.raises(ValueError, match=r"Dropout: p must be in \[0, 1\)"):
        nn.Dropout(1.0)


@pytest.mark.parametrize("quantized", [False, True])
def test_lora_linear(quantized) -> None:
    base = nn.Linear(64, 8)
    if quantized:
        base = nn.QuantizedLinear.from_linear(base, bits=8)
    lora = nn.LoRALinear.from_base(base, rank=4, scale=2.0)
    x = bz.asarray(_r(0, (3, 64)).astype(np.float32))
    assert np.allclose(np.asarray(lora(x)), np.asarray(base(x)))  # lora_b starts at 0
    assert sorted(n for n, _ in nn.names_from_tree(lora.trainable_parameters())) == [
        "lora_a", "lora_b"]
    opt = optim.Adam(1e-2)
    target = bz.asarray(_r(1, (3, 8)).astype(np.float32))
    vg = nn.value_and_grad(lora, lambda x: nn.losses.mse_loss(lora(x), target))
    first = None
    for _ in range(20):
        loss, grads = vg(x)
        first = loss.item() if first is None else first
        opt.update(lora, grads)
        bz.eval(lora.parameters(), opt.state)
    assert loss.item() < first
    fused = lora.fuse()
    assert np.allclose(np.asarray(fused(x)), np.asarray(lora(x)), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="LoRALinear: base must be a Linear"):
        nn.LoRALinear(nn.RMSNorm(4))


def test_bad_optimizer_schedule_and_layer_arguments() -> None:
    with pytest.raises(ValueError, match="SGD: Nesterov momentum needs momentum > 0"):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError, match="linear_schedule: steps must be >= 1, got 0"):
        optim.linear_schedule(0.0, 1.0, 0)
    with pytest.raises(ValueError, match="cosine_decay: decay_steps must be >= 1"):
        optim.cosine_decay(1.0, 0)
    with pytest.raises(ValueError, match="join_schedules: 2 schedules need 1 boundaries"):
        optim.join_schedules([optim.linear_schedule(0.0, 1.0, 2)] * 2, [])
    with pytest.raises(ValueError, match=r"Adam: gradient of w has shape \(3,\)"):
        optim.Adam(0.1).apply_gradients({"w": bz.ones(3)}, {"w": bz.ones(2)})
    with pytest.raises(ValueError, match="SGD: gradient for unknown parameter 'v'"):
        optim.SGD(0.1).apply_gradients({"v": bz.ones(2)}, {"w": bz.ones(2)})
    with pytest.raises(ValueError, match="LoRALinear: rank must be >= 1, got 0"):
        nn.LoRALinear(nn.Linear(4, 3), rank=0)
    with pytest.raises(ValueError, match=r"cross_entropy: label_smoothing must be in \[0, 1\)"):
        nn.losses.cross_entropy(bz.ones((2, 3)), bz.asarray([0, 1]), label_smoothing=1.0)
    with pytest.raises(TypeError, match="cross_entropy: logits must be floating"):
        nn.losses.cross_entropy(bz.ones((2, 3), dtype=bz.int32), bz.asarray([0, 1]))
