"""``Sequential``: layers in order, trained with ``fit`` on the gradient tree of its loss (px.value_and_grad).

One training step is one call of that tree: forward, loss, backward, plus the new BatchNorm statistics and the
logits (for the epoch's accuracy) as auxiliary outputs; the optimizer then updates the parameters in place. The
tree is traced once per batch shape and reused. Shuffling, initialisation and dropout draw from one generator
seeded by ``seed``: training is deterministic for a seed on one runtime.
"""
from __future__ import annotations

import inspect
import sys
import time

import numpy as np

from phylanx_py.runtime.dask_faults import cluster_failures

from ..grad import value_and_grad
from ..pytree import flatten
from . import functional as F
from .optim import SGD
from .parallel import fit_parallel
from .steps import step_runtime


class Sequential:
    """Layers in order. Parameters are float32 unless asked otherwise: ``dtype=`` here (every layer without a dtype
    of its own), or on a layer; without either, the dtype of the data the model is built on when that is float32
    or float64, else float32 (Keras, PyTorch and JAX default to float32). Inputs are cast to the model's dtype
    once per ``fit``/``predict`` (never the parameters to the data's), so float64 data do not turn every product of
    a float32 model into a float64 one; ``model.dtype_`` is the dtype chosen."""

    def __init__(self, layers, loss: str | object = "softmax_cross_entropy", dtype=None):
        self.layers = list(layers)
        self.dtype = None if dtype is None else np.dtype(dtype)
        if self.dtype is not None and self.dtype.kind != "f":
            raise ValueError(f"a model's dtype is a floating type (float32, float64), got {self.dtype}")
        self.dtype_ = None
        if not self.layers:
            raise ValueError("Sequential needs at least one layer")
        self.loss_name = loss if isinstance(loss, str) else getattr(loss, "__name__", "loss")
        if isinstance(loss, str) and loss not in F.LOSSES:
            raise ValueError(f"unknown loss {loss!r}; the losses are {sorted(F.LOSSES)} or a function")
        self.loss_fn = F.LOSSES[loss] if isinstance(loss, str) else loss
        self.params: list[dict] | None = None
        self.state: list[dict] | None = None
        self.input_shape = None
        self._step_fn = None

    def _as_model_dtype(self, X):
        """Inputs in the parameters' dtype (cast once here, not in every product); integers and the like too."""
        dt = self.dtype_ if self.dtype_ is not None else model_dtype(self.dtype, None)
        if getattr(X, "dtype", None) == dt:
            return X
        return X.astype(dt) if hasattr(X, "astype") else np.asarray(X, dt)

    def metric(self, out, Y) -> float:
        """Accuracy for classification losses; NaN for ``mse`` (a regression has none)."""
        return float("nan") if self.loss_fn is F.mse else F.accuracy(out, Y)

    # ---- building ------------------------------------------------------------------------------------------
    def build(self, input_shape, seed: int = 0, data_dtype=None):
        """Initialise the parameters for inputs of ``input_shape`` (without the batch axis); ``data_dtype``: the
        dtype of the data it is built on (see the class's text)."""
        rng = np.random.default_rng(seed)
        shape = tuple(input_shape)
        self.input_shape = shape
        self.dtype_ = model_dtype(self.dtype, data_dtype)
        self.params, self.state = [], []
        for layer in self.layers:
            p, s, shape = _init(layer, rng, shape, self.dtype_)
            self.params.append(p)
            self.state.append(s)
        self.output_shape = shape
        return self

    def _ensure_built(self, X, seed):
        if self.params is None:
            self.build(np.shape(X)[1:], seed, getattr(X, "dtype", None))
        elif tuple(np.shape(X)[1:]) != self.input_shape:
            raise ValueError(f"the model was built for inputs of shape (n, {', '.join(map(str, self.input_shape))}),"
                             f" got {tuple(np.shape(X))}")

    def n_params(self) -> int:
        return sum(int(np.size(v)) for p in self.params for v in p.values())

    # ---- the functions that are traced -----------------------------------------------------------------------
    def forward(self, params, state, x, noise=None, training=False):
        new_state = []
        for i, layer in enumerate(self.layers):
            x, s = layer.apply(params[i], state[i], x, None if noise is None else noise.get(i), training)
            new_state.append(s)
        return x, new_state

    def objective(self, params, state, noise, X, Y):
        out, new_state = self.forward(params, state, X, noise, training=True)
        return self.loss_fn(out, Y), (new_state, out)

    def step_function(self):
        """``(params, state, noise, X, Y) -> ((loss, (new_state, outputs)), grads)``: one tree per batch shape."""
        if self._step_fn is None:
            self._step_fn = value_and_grad(self.objective, has_aux=True)
        return self._step_fn

    def noise(self, rng, batch: int) -> dict:
        return {i: rng.random((batch,) + layer.noise_shape) for i, layer in enumerate(self.layers)
                if layer.noise_shape is not None and getattr(layer, "rate", 0.0) > 0.0}

    # ---- training ------------------------------------------------------------------------------------------
    def fit(self, X, Y, epochs: int = 1, batch_size: int = 32, optimizer=None, validation=None, seed: int = 0,
            verbose: bool = True, parallel: str | None = None, every: int = 1, segment_steps: int | None = None):
        """Train; returns the history: per epoch ``loss``, ``accuracy`` (and ``val_loss``, ``val_accuracy`` with
        ``validation=(Xv, Yv)``; ``consensus`` with ``parallel="neighbours"``; ``time`` in seconds).

        ``parallel``: None (this process, or tiled inputs through the runtime), ``"allreduce"`` or
        ``"neighbours"`` (row-tiled X/Y on a Dask runtime: parallel.py; ``every``: steps between averages;
        ``segment_steps``: steps per segment, the checkpoint a lost worker restarts from: default one epoch)."""
        optimizer = optimizer if optimizer is not None else SGD(0.01)
        if len(X) != len(Y):
            raise ValueError(f"X has {len(X)} rows and Y has {len(Y)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._ensure_built(X, seed)
        X = self._as_model_dtype(X)
        history = {"loss": [], "accuracy": [], "time": []}
        if validation is not None:
            history["val_loss"], history["val_accuracy"] = [], []
        if parallel is not None:
            with cluster_failures(getattr(X, "client", None), f"fit(parallel={parallel!r})"):
                return fit_parallel(self, X, Y, epochs, batch_size, optimizer, validation, seed, verbose, parallel,
                                    every, history, segment_steps)
        rng = np.random.default_rng(seed + 1)
        X, Y = _local(X), _local(Y)
        with step_runtime():
            return self._fit_local(X, Y, epochs, batch_size, optimizer, validation, rng, verbose, history)

    def _fit_local(self, X, Y, epochs, batch_size, optimizer, validation, rng, verbose, history):
        flat = flatten(self.params)[0]
        opt_state = optimizer.init(flat)
        step_fn = self.step_function()
        n = len(X)
        step = 0
        bar = BatchBar(verbose, epochs, -(-n // batch_size))
        for epoch in range(epochs):
            t0 = time.perf_counter()
            order = rng.permutation(n)
            total, correct = 0.0, 0.0
            for batch, start in enumerate(range(0, n, batch_size)):
                idx = order[start:start + batch_size]
                Xb, Yb = X[idx], Y[idx]
                (loss, (new_state, out)), grads = step_fn(self.params, self.state, self.noise(rng, len(idx)), Xb, Yb)
                optimizer.update(flat, flatten(grads)[0], opt_state, step)
                self.state = new_state
                step += 1
                total += float(loss) * len(idx)
                correct += self.metric(out, Yb) * len(idx)
                bar.update(epoch, batch + 1, total / min(start + batch_size, n))
            bar.clear()
            # flat holds self.params's own arrays: the optimizer has updated the model in place
            self._end_epoch(history, epoch, epochs, total / n, correct / n, validation, t0, verbose)
        return history

    def _end_epoch(self, history, epoch, epochs, loss, acc, validation, t0, verbose, extra=None, val=None):
        """``val``: the validation's loss and accuracy when already evaluated (by the ranks of a parallel fit)."""
        history["loss"].append(loss)
        history["accuracy"].append(acc)
        for k, v in (extra or {}).items():
            history.setdefault(k, []).append(v)
        if validation is not None:
            ev = val if val is not None else self.evaluate(*validation)
            history["val_loss"].append(ev["loss"])
            history["val_accuracy"].append(ev["accuracy"])
        history["time"].append(time.perf_counter() - t0)
        if verbose:
            _progress(history, epoch, epochs)

    # ---- using the model -----------------------------------------------------------------------------------
    def predict(self, X, batch_size: int | None = None):
        """The last layer's outputs for ``X`` (evaluation mode: no dropout, running BatchNorm statistics)."""
        if self.params is None:
            raise ValueError("the model has no weights yet: fit, build or load it first")
        X = _local(X)
        self._ensure_built(X, 0)
        X = self._as_model_dtype(X)
        if batch_size is None:
            return np.asarray(self.forward(self.params, self.state, X)[0])
        return np.concatenate([np.asarray(self.forward(self.params, self.state, X[i:i + batch_size])[0])
                               for i in range(0, len(X), batch_size)])

    def evaluate(self, X, Y, batch_size: int | None = None) -> dict:
        out = self.predict(X, batch_size)
        Y = _local(Y)
        return {"loss": float(self.loss_fn(out, Y)), "accuracy": self.metric(out, Y)}

    def save(self, path):
        """The weights (and BatchNorm statistics) as an ``.npz`` file."""
        arrays = {f"layer{i}.{k}": v for i, p in enumerate(self.params) for k, v in p.items()}
        arrays.update({f"state{i}.{k}": np.asarray(v) for i, s in enumerate(self.state) for k, v in s.items()})
        arrays["input_shape"] = np.asarray(self.input_shape)
        np.savez(path, **arrays)

    def load(self, path):
        """Weights saved by ``save``, into a model of the same layers (shapes are checked)."""
        with np.load(path) as data:
            self.build(tuple(int(v) for v in data["input_shape"]))
            for kind, store in (("layer", self.params), ("state", self.state)):
                for i, p in enumerate(store):
                    for k in p:
                        key = f"{kind}{i}.{k}"
                        if key not in data:
                            raise ValueError(f"{path}: no array {key!r}: saved from a model of other layers?")
                        if data[key].shape != np.shape(p[k]):
                            raise ValueError(f"{path}: {key} has shape {data[key].shape}, the model wants "
                                             f"{np.shape(p[k])}")
                        if data[key].dtype.kind not in "biuf":  # strings, complex, dates: not weights
                            raise ValueError(f"{path}: {key} has dtype {data[key].dtype}, the model wants real "
                                             f"numbers ({np.asarray(p[k]).dtype})")
                        p[k] = data[key].astype(self.dtype) if self.dtype is not None else data[key].copy()
        saved = [np.asarray(v).dtype for p in self.params for v in p.values()]
        if self.dtype is None and saved and saved[0].kind == "f":  # the saved model's dtype, as it trained
            self.dtype_ = saved[0]
        return self

    def __repr__(self):
        return "Sequential([" + ", ".join(map(repr, self.layers)) + "])"


def model_dtype(asked, data_dtype) -> np.dtype:
    """The parameters' dtype: ``asked`` (the model's ``dtype=``), else the data's when float32 or float64, else
    float32."""
    if asked is not None:
        return np.dtype(asked)
    if data_dtype is not None and np.dtype(data_dtype) in (np.float32, np.float64):
        return np.dtype(data_dtype)
    return np.dtype(np.float32)


def _init(layer, rng, shape, dtype):
    """``layer.init`` with the model's dtype (a layer written before ``init`` took one gets the two arguments)."""
    try:
        takes_dtype = "dtype" in inspect.signature(layer.init).parameters
    except (TypeError, ValueError):
        takes_dtype = False
    return layer.init(rng, shape, dtype) if takes_dtype else layer.init(rng, shape)


def _local(a):
    """Tiled inputs without ``parallel=``: gathered once (a data set that fits here), not per batch."""
    return a.to_numpy() if hasattr(a, "to_numpy") and hasattr(a, "tiles") else np.asarray(a)


class BatchBar:
    """Per-batch progress within an epoch, ``epoch 3/30 [======>   ] 12/45 batches  loss 0.2345``, redrawn at
    most ten times a second on a terminal (stderr); nothing when stderr is not one (logs keep the epoch lines)."""

    def __init__(self, verbose: bool, epochs: int, batches: int, stream=None):
        self.stream = stream or sys.stderr
        try:
            self.on = bool(verbose) and self.stream.isatty()
        except (AttributeError, ValueError):
            self.on = False
        self.epochs, self.batches = epochs, batches
        self.last, self.shown = 0.0, False

    def update(self, epoch: int, done: int, loss: float):
        now = time.monotonic()
        if not self.on or (now - self.last < 0.1 and done < self.batches):
            return
        self.last, self.shown = now, True
        width = 20
        filled = width * done // self.batches
        self.stream.write(f"\r\033[Kepoch {epoch + 1}/{self.epochs} [{'=' * filled}{' ' * (width - filled)}] "
                          f"{done}/{self.batches} batches  loss {loss:.4f}")
        self.stream.flush()

    def clear(self):
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


def _progress(history, epoch, epochs):
    width = 20
    done = int(width * (epoch + 1) / epochs)
    parts = [f"epoch {epoch + 1:>{len(str(epochs))}}/{epochs} [{'=' * done}{' ' * (width - done)}]",
             f"loss {history['loss'][-1]:.4f}", f"acc {history['accuracy'][-1]:.4f}"]
    if "val_loss" in history:
        parts += [f"val_loss {history['val_loss'][-1]:.4f}", f"val_acc {history['val_accuracy'][-1]:.4f}"]
    if "consensus" in history:
        parts.append(f"consensus {history['consensus'][-1]:.2e}")
    parts.append(f"{history['time'][-1]:.2f}s")
    print("  ".join(parts), file=sys.stderr if not sys.stdout.isatty() else sys.stdout, flush=True)
