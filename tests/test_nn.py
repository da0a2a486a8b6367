"""phylanx_py.nn: layers against NumPy, optimizers against their formulas, Sequential (determinism, save/load,
evaluate), gradients through every layer against finite differences. Training on a real Dask cluster:
tests/test_training.py."""
from __future__ import annotations

import numpy as np
import pytest
from test_grad import numeric_grad

import phylanx_py as px
from phylanx_py import nn


def blobs(n=240, d=6, k=3, seed=0):
    """A learnable classification set: k Gaussian blobs."""
    centres = np.random.default_rng(42).normal(size=(k, d)) * 3.0  # the same classes for every sample
    rng = np.random.default_rng(seed)
    Y = rng.integers(0, k, n)
    return rng.normal(size=(n, d)) + centres[Y], Y


# ---- layers ------------------------------------------------------------------------------------------------
def test_dense_relu_forward_is_the_numpy_expression():
    model = nn.Sequential([nn.Dense(4, 5), nn.ReLU(), nn.Dense(5, 2)], dtype=np.float64).build((4,), seed=3)
    x = np.random.default_rng(0).normal(size=(7, 4))
    p = model.params
    want = np.maximum(x @ p[0]["W"] + p[0]["b"], 0) @ p[2]["W"] + p[2]["b"]
    np.testing.assert_allclose(model.predict(x), want, rtol=1e-14)


def _cnn():
    return nn.Sequential([nn.Conv2D(1, 3, 3, padding=1), nn.BatchNorm(3), nn.ReLU(), nn.MaxPool2D(2),
                          nn.Conv2D(3, 4, 3, stride=1), nn.Tanh(), nn.AvgPool2D(1), nn.Flatten(), nn.Dropout(0.3),
                          nn.Dense(16, 3), nn.Sigmoid(), nn.Dense(3, 3)])


def test_gradient_through_every_layer_against_finite_differences():
    model = _cnn().build((1, 8, 8), seed=0)
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(5, 1, 8, 8)), rng.integers(0, 3, 5)
    noise = model.noise(rng, 5)
    flat, structure = px.grad.__globals__["flatten"](model.params)

    def loss_of(*arrays):
        params = px.grad.__globals__["unflatten"](structure, list(arrays))
        return model.objective(params, model.state, noise, X, Y)[0]

    grads = px.grad(loss_of, argnums=tuple(range(len(flat))))(*flat)
    for i, p in enumerate(flat):
        want = numeric_grad(loss_of, list(flat), i)
        np.testing.assert_allclose(grads[i], want, rtol=1e-5, atol=1e-7, err_msg=f"parameter {i} {np.shape(p)}")


def test_layer_shape_errors_are_clear():
    with pytest.raises(ValueError, match=r"Dense\(3, 2\) got inputs of 4 features"):
        nn.Sequential([nn.Dense(3, 2)]).build((4,))
    with pytest.raises(ValueError, match=r"Conv2D takes inputs of 3 axes \(after the batch axis\), got shape \(4,\)"):
        nn.Sequential([nn.Conv2D(1, 2)]).build((4,))


def test_binary_cross_entropy_and_mse_are_stable_and_differentiable():
    z = np.array([-800.0, -1.0, 0.5, 900.0])
    y = np.array([0.0, 1.0, 1.0, 1.0])
    want = np.mean([0.0, np.log1p(np.e), np.log1p(np.exp(-0.5)), 0.0])
    assert nn.binary_cross_entropy(z, y) == pytest.approx(want, rel=1e-12)
    z2 = np.array([-1.0, 0.3, 2.0])
    g = px.grad(nn.binary_cross_entropy)(z2, np.array([0.0, 1.0, 1.0]))
    np.testing.assert_allclose(g, (nn.sigmoid(z2) - [0.0, 1.0, 1.0]) / 3, rtol=1e-12)
    np.testing.assert_allclose(px.grad(nn.mse)(z2, np.zeros(3)), 2 * z2 / 3, rtol=1e-12)


# ---- optimizers ----------------------------------------------------------------------------------------------
def _run(opt, steps=3):
    p, grads = [np.array([1.0, -2.0])], [np.array([0.5, 0.25]), np.array([-0.1, 0.4]), np.array([0.2, 0.2])]
    st = opt.init(p)
    for s in range(steps):
        opt.update(p, [grads[s]], st, s)
    return p[0], grads


def test_sgd_momentum_and_nesterov_follow_their_formulas():
    got, gs = _run(nn.SGD(0.1, momentum=0.9, weight_decay=0.01))
    p, v = np.array([1.0, -2.0]), np.zeros(2)
    for g in gs:
        g = g + 0.01 * p
        v = 0.9 * v + g
        p = p - 0.1 * v
    np.testing.assert_allclose(got, p, rtol=1e-15)
    got, gs = _run(nn.SGD(0.1, momentum=0.9, nesterov=True))
    p, v = np.array([1.0, -2.0]), np.zeros(2)
    for g in gs:
        v = 0.9 * v + g
        p = p - 0.1 * (g + 0.9 * v)
    np.testing.assert_allclose(got, p, rtol=1e-15)


def test_adam_and_rmsprop_follow_their_formulas():
    got, gs = _run(nn.Adam(0.01))
    p, m, v = np.array([1.0, -2.0]), np.zeros(2), np.zeros(2)
    for t, g in enumerate(gs, 1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        p = p - 0.01 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    np.testing.assert_allclose(got, p, rtol=1e-12)
    got, gs = _run(nn.RMSprop(0.01))
    p, s = np.array([1.0, -2.0]), np.zeros(2)
    for g in gs:
        s = 0.9 * s + 0.1 * g * g
        p = p - 0.01 * g / (np.sqrt(s) + 1e-8)
    np.testing.assert_allclose(got, p, rtol=1e-14)


def test_learning_rate_schedules():
    sched = nn.warmup(nn.step_decay(1.0, step_size=10, gamma=0.5), warmup_steps=4)
    assert [sched(s) for s in (0, 1, 3, 4, 9, 10, 25)] == [0.25, 0.5, 1.0, 1.0, 1.0, 0.5, 0.25]
    with pytest.raises(ValueError, match="Nesterov momentum needs momentum > 0"):
        nn.SGD(0.1, nesterov=True)


# ---- Sequential ------------------------------------------------------------------------------------------------
def test_fit_learns_is_deterministic_for_a_seed_and_saves_and_loads(tmp_path):
    X, Y = blobs()
    Xv, Yv = blobs(seed=1)
    runs = []
    for _ in range(2):
        m = nn.Sequential([nn.Dense(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Dense(16, 3)])
        h = m.fit(X, Y, epochs=4, batch_size=16, optimizer=nn.Adam(0.01), validation=(Xv, Yv), seed=5,
                  verbose=False)
        runs.append((m, h))
    (m, h), (_, h2) = runs
    assert h["loss"] == h2["loss"] and h["val_accuracy"] == h2["val_accuracy"]
    assert h["loss"][-1] < h["loss"][0] and h["val_accuracy"][-1] > 0.9
    ev = m.evaluate(Xv, Yv)
    assert set(ev) == {"loss", "accuracy"} and ev["accuracy"] == h["val_accuracy"][-1]
    m.save(tmp_path / "w.npz")
    m2 = nn.Sequential([nn.Dense(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Dense(16, 3)]).load(tmp_path / "w.npz")
    np.testing.assert_array_equal(m2.predict(Xv), m.predict(Xv))
    with pytest.raises(ValueError, match=r"layer0.W has shape \(6, 16\), the model wants \(6, 8\)"):
        nn.Sequential([nn.Dense(6, 8), nn.ReLU(), nn.Dense(8, 3)]).load(tmp_path / "w.npz")


@pytest.mark.parametrize(("bad", "dtype"), [("str", "<U3"), ("complex", "complex128")])
def test_load_rejects_weights_that_are_not_real_numbers(tmp_path, bad, dtype):
    m = nn.Sequential([nn.Dense(2, 2)])
    m.build((2,))
    m.save(tmp_path / "w.npz")
    with np.load(tmp_path / "w.npz") as data:
        arrays = dict(data)
    arrays["layer0.W"] = np.full((2, 2), "abc") if bad == "str" else np.ones((2, 2)) * (1 + 2j)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError) as err:
        nn.Sequential([nn.Dense(2, 2)]).load(tmp_path / "bad.npz")
    assert str(err.value) == f"{tmp_path / 'bad.npz'}: layer0.W has dtype {dtype}, the model wants real numbers " \
                             "(float32)"  # built without data: float32, the default


def test_regression_with_mse_and_binary_classification():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 3))
    y = (X @ np.array([1.0, -2.0, 0.5]))[:, None]
    m = nn.Sequential([nn.Dense(3, 1, init="glorot")], loss="mse")
    h = m.fit(X, y, epochs=20, batch_size=20, optimizer=nn.SGD(0.05), verbose=False)
    assert h["loss"][-1] < 1e-3 and all(np.isnan(h["accuracy"]))
    np.testing.assert_allclose(m.params[0]["W"][:, 0], [1.0, -2.0, 0.5], atol=0.02)
    with pytest.raises(ValueError, match=r"mse: outputs of shape \(200, 1\) and targets of shape \(200,\) differ"):
        m.evaluate(X, y[:, 0])
    labels = (X[:, :1] > 0).astype(float)
    b = nn.Sequential([nn.Dense(3, 8), nn.Tanh(), nn.Dense(8, 1)], loss="binary_cross_entropy")
    b.fit(X, labels, epochs=10, batch_size=20, optimizer=nn.Adam(0.02), verbose=False)
    assert b.evaluate(X, labels)["accuracy"] > 0.95
    with pytest.raises(ValueError, match=r"unknown loss 'hinge'; the losses are \['binary_cross_entropy', 'mse', "):
        nn.Sequential([nn.Dense(3, 1)], loss="hinge")


def test_fit_rejects_mismatched_inputs():
    X, Y = blobs()
    m = nn.Sequential([nn.Dense(6, 3)])
    with pytest.raises(ValueError, match="X has 240 rows and Y has 239"):
        m.fit(X, Y[:-1])
    m.fit(X, Y, verbose=False)
    with pytest.raises(ValueError, match=r"the model was built for inputs of shape \(n, 6\), got \(4, 5\)"):
        m.predict(np.ones((4, 5)))


def test_parallel_fit_needs_row_tiles():
    X, Y = blobs(n=40)
    m = nn.Sequential([nn.Dense(6, 3)])
    with pytest.raises(TypeError, match=r"parallel training takes row-tiled X \(px.tiled.from_array"):
        m.fit(X, Y, parallel="allreduce", verbose=False)
    with pytest.raises(ValueError, match="parallel must be 'allreduce' or 'neighbours', got 'ring'"):
        m.fit(X, Y, parallel="ring", verbose=False)
