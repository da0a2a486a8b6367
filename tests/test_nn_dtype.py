"""The dtype of a model's parameters (issue: float32 by default, as Keras, PyTorch and JAX): the default, the data's
float dtype, an explicit model or layer dtype, and that every gradient, optimizer buffer and the inputs of a step
follow the parameters' dtype (a float32 model never runs its products in float64)."""
from __future__ import annotations

import numpy as np
import pytest

from phylanx_py import nn
from phylanx_py.grad import value_and_grad
from phylanx_py.pytree import flatten


def _mlp(**kw):
    return nn.Sequential([nn.Dense(6, 8), nn.ReLU(), nn.BatchNorm(8), nn.Dense(8, 3)], **kw)


def _data(dtype, n=64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6)).astype(dtype), rng.integers(0, 3, n)


def _param_dtypes(model):
    return {np.asarray(v).dtype for p in model.params + model.state for v in p.values()}


@pytest.mark.parametrize(("data", "want"), [(np.float32, np.float32), (np.float64, np.float64),
                                            (np.int64, np.float32), (np.float16, np.float32)])
def test_parameters_take_the_datas_float_dtype_else_float32(data, want):
    X, Y = _data(data)
    model = _mlp()
    model.fit(X, Y, epochs=1, batch_size=16, verbose=False)
    assert _param_dtypes(model) == {np.dtype(want)} and model.dtype_ == want


def test_a_model_built_without_data_is_float32():
    model = _mlp().build((6,))
    assert _param_dtypes(model) == {np.dtype(np.float32)}
    assert model.predict(np.ones((2, 6))).dtype == np.float32  # float64 inputs are cast to the model's dtype


def test_a_float64_model_trains_in_float64_when_asked():
    X, Y = _data(np.float32)
    model = _mlp(dtype=np.float64)
    opt = nn.SGD(0.05, momentum=0.9)
    h = model.fit(X, Y, epochs=3, batch_size=16, optimizer=opt, verbose=False)
    assert _param_dtypes(model) == {np.dtype(np.float64)} and h["loss"][-1] < h["loss"][0]
    assert model.predict(X).dtype == np.float64


def test_a_layer_dtype_wins_over_the_models():
    model = nn.Sequential([nn.Dense(6, 4, dtype=np.float64), nn.ReLU(), nn.Dense(4, 3)]).build((6,))
    assert model.params[0]["W"].dtype == np.float64 and model.params[2]["W"].dtype == np.float32


@pytest.mark.parametrize("opt", [nn.SGD(0.01, momentum=0.9), nn.Adam(1e-3), nn.RMSprop(1e-3, momentum=0.5)],
                         ids=["sgd", "adam", "rmsprop"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_gradient_and_optimizer_buffer_has_the_parameters_dtype(opt, dtype):
    X, Y = _data(np.float64)  # float64 data into a model of the other dtype too: cast, not promoted
    model = _mlp(dtype=dtype).build((6,))
    flat = flatten(model.params)[0]
    state = opt.init(flat)
    Xc = model._as_model_dtype(X)
    (loss, (new_state, out)), grads = value_and_grad(model.objective, has_aux=True)(
        model.params, model.state, model.noise(np.random.default_rng(0), len(X)), Xc, Y)
    assert {np.asarray(g).dtype for g in flatten(grads)[0]} == {np.dtype(dtype)}
    assert np.asarray(out).dtype == dtype
    opt.update(flat, flatten(grads)[0], state, 0)
    buffers = [b for s in state for b in (s if isinstance(s, tuple) else (s,)) if b is not None]
    assert buffers and {b.dtype for b in buffers} == {np.dtype(dtype)}
    assert _param_dtypes(model) == {np.dtype(dtype)}


def test_a_model_dtype_must_be_floating():
    with pytest.raises(ValueError, match="a model's dtype is a floating type"):
        nn.Sequential([nn.Dense(2, 2)], dtype=np.int32)


def test_saved_float64_weights_load_as_float64(tmp_path):
    X, Y = _data(np.float64)
    model = _mlp()
    model.fit(X, Y, epochs=1, batch_size=16, verbose=False)
    model.save(tmp_path / "w.npz")
    again = _mlp().load(tmp_path / "w.npz")
    assert _param_dtypes(again) == {np.dtype(np.float64)} and again.dtype_ == np.float64
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
