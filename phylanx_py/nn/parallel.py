"""``Sequential.fit(parallel=...)``: hands the model to the runtime's data-parallel trainer
(``phylanx_py.runtime.training``) as plain values: a problem object whose ``grad`` runs the model's traced gradient
program on a batch and writes the flat gradient, the optimizer, and the parameters as one flat vector.

``allreduce``: every rank (a worker holding row tiles) computes the gradient of its rows of the global batch; a
ring allreduce sums them and every rank applies the same update, so with the same global batches this is
sequential training to float tolerance. ``neighbours`` (D-PSGD): each rank keeps a replica and takes steps on its
own rows; every ``every`` steps a replica becomes the mean of itself and its ring neighbours; the epoch's model is
the replicas' mean (``history["consensus"]``: sqrt(mean_i |x_i - mean|^2)).

The global batch of a step is ``batch_size // tiles`` rows of each row tile (runtime/training/segment.py), so a
fit on k tiles trains on batches of ``k * (batch_size // k)`` rows.
"""
from __future__ import annotations

import time
import uuid
from collections import OrderedDict

import numpy as np

from phylanx_py.runtime import current, using
from phylanx_py.runtime.tiled import TiledArray
from phylanx_py.runtime.training import SegmentTrainer

from ..pytree import flatten, unflatten
from .steps import synchronous_runtime


def _unpack(vec, shapes, structure):
    out, at = [], 0
    for shape in shapes:
        n = int(np.prod(shape))
        out.append(vec[at:at + n].reshape(shape))
        at += n
    return unflatten(structure, out)


def pack(tree):
    return np.concatenate([np.ravel(np.asarray(v)) for v in flatten(tree)[0]])  # the parameters' own dtype


_STEPS: OrderedDict = OrderedDict()  # on a worker: problem key -> its traced step function (kept across segments)


class ModelProblem:
    """The model's training step for the runtime's trainer: ``grad`` writes the flat gradient of the mean loss over
    the rows into ``out`` and returns (loss * rows, metric * rows, new layer state). The model travels without its
    weights (they are the flat vector)."""

    def __init__(self, model):
        flat, self.structure = flatten(model.params)
        self.shapes = [np.shape(p) for p in flat]
        self.model = type(model)(model.layers, model.loss_fn)
        self.model.input_shape, self.model.output_shape = model.input_shape, model.output_shape
        self.model.dtype_ = model.dtype_  # (the inputs' dtype in ``evaluate``: the one ``fit`` built the model in)
        self.key = uuid.uuid4().hex  # each segment unpickles a new copy; the trees traced stay with the key

    def step_function(self):
        fn = _STEPS.get(self.key)
        if fn is None:
            fn = _STEPS[self.key] = self.model.step_function()
            while len(_STEPS) > 8:
                _STEPS.popitem(last=False)
        return fn

    def unpack(self, vec):
        return _unpack(vec, self.shapes, self.structure)

    def views(self, vec):
        """Each parameter's part of a flat vector, as a view in the parameters' order (what ``fit`` updates)."""
        out, at = [], 0
        for shape in self.shapes:
            n = int(np.prod(shape))
            out.append(vec[at:at + n].reshape(shape))
            at += n
        return out

    def grads(self, pvec, state, noise, X, Y):
        """(loss * rows, metric * rows, new layer state, the gradient of each parameter in ``views`` order)."""
        with using(synchronous_runtime()):
            (loss, (new_state, o)), grads = self.step_function()(self.unpack(pvec), state, noise, X, Y)
        return float(loss) * len(X), self.model.metric(o, Y) * len(X), new_state, flatten(grads)[0]

    def grad(self, pvec, state, noise, X, Y, out, scale=1.0):
        """``grads`` written into the flat ``out``, each times ``scale``: one pass (a concatenation then ``out *=
        scale`` was two over the 3.7 MB of simplemlp's gradient, 0.3-0.4 ms a step), the same products."""
        loss, metric, new_state, grads = self.grads(pvec, state, noise, X, Y)
        for g, o in zip(grads, self.views(out)):
            if scale == 1.0:
                np.copyto(o, g, casting="same_kind")
            elif np.asarray(g).dtype == o.dtype:
                np.multiply(g, scale, out=o)
            else:  # cast first, then scaled in the flat vector's dtype (as the concatenation then ``*=`` did)
                np.copyto(o, g, casting="same_kind")
                o *= scale
        return loss, metric, new_state

    @property
    def noisy(self) -> bool:
        """Whether a step draws random numbers (Dropout; ``Sequential.noise``'s test): without, a rank makes no
        generator per tile and step."""
        return any(layer.noise_shape is not None and getattr(layer, "rate", 0.0) > 0.0 for layer in self.model.layers)

    def noise(self, rng, rows):
        return self.model.noise(rng, rows)

    def evaluate(self, pvec, state, X, Y):
        """(mean loss, mean metric) of the weights ``pvec`` and layer state ``state`` on ``X``, ``Y``: the model's
        ``evaluate``, on a rank (a span's validation: runtime/training/segment.py)."""
        self.model.params, self.model.state = self.unpack(pvec), state
        try:
            with using(synchronous_runtime()):
                out = self.model.evaluate(X, Y)
        finally:
            self.model.params = self.model.state = None
        return out["loss"], out["accuracy"]


def _row_tiles(X, name):
    if not isinstance(X, TiledArray):
        raise TypeError(f"parallel training takes row-tiled {name} (px.tiled.from_array(..., tiles=(k, 1))), got "
                        f"{type(X).__name__}")
    if any(t != 1 for t in X.tiles[1:]):
        raise ValueError(f"parallel training needs {name} tiled by rows only, got tiles={X.tiles}")
    return X


def fit_parallel(model, X, Y, epochs, batch_size, optimizer, validation, seed, verbose, mode, every, history,
                 segment_steps=None):
    if mode not in ("allreduce", "neighbours"):
        raise ValueError(f"parallel must be 'allreduce' or 'neighbours', got {mode!r}")
    if segment_steps is not None and (not isinstance(segment_steps, int) or segment_steps < 1):
        raise ValueError(f"segment_steps must be a positive int or None, got {segment_steps!r}")
    X, Y = _row_tiles(X, "X"), _row_tiles(Y, "Y")
    if X.boundaries[0] != Y.boundaries[0]:
        raise ValueError(f"X and Y must have the same row tiles, got {X.boundaries[0]} and {Y.boundaries[0]}")
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")
    X.persist(wait=True)  # the tiles must exist somewhere before the segments can go where they are
    Y.persist(wait=True)
    rows = X.boundaries[0]
    parts = len(rows) - 1
    xf = [X.futures[(i,) + (0,) * (X.ndim - 1)] for i in range(parts)]
    yf = [Y.futures[(i,) + (0,) * (Y.ndim - 1)] for i in range(parts)]
    problem = ModelProblem(model)
    trainer = SegmentTrainer(X._executor, xf, yf, [rows[i + 1] - rows[i] for i in range(parts)], problem, optimizer,
                             mode=mode, every=every, batch=batch_size, seed=seed, segment_steps=segment_steps)
    carry = trainer.start(pack(model.params), model.state)
    trainer.horizon = epochs  # the next epoch's segment is submitted while this one runs
    # the ranks run every epoch in one segment, the weights staying on the workers until the end; with validation
    # data the ranks evaluate each epoch's weights on it (their shares summed with the epoch's totals), so the
    # weights need not come here every epoch either
    trainer.span = mode == "allreduce"
    if validation is not None:
        trainer.validation = tuple(np.asarray(v) for v in validation)
    rt = current()
    counted = rt if rt.executor is X._executor else None  # what ran on its workers, for ``phylanx-py run``
    if counted is not None:
        counted.count(fits=1)
    try:
        return _epochs(model, trainer, problem, carry, epochs, validation, verbose, mode, every, history, counted)
    finally:
        trainer.close()


def _epochs(model, trainer, problem, carry, epochs, validation, verbose, mode, every, history, counted=None):
    for epoch in range(epochs):
        t0 = time.perf_counter()
        carry, stats = trainer.epoch(epoch, carry)
        if counted is not None:  # the epoch's segments (restarts not included), one rank task per worker each
            counted.count(segments=stats["tasks"] // max(len(trainer.ranks), 1), ranks=stats["tasks"])
        history.setdefault("restarts", []).append(trainer.restarts)
        n_ranks = len(trainer.ranks)
        size = int(pack(model.params).nbytes)
        extra = {"tasks_per_step": stats["tasks"] / stats["steps"], "bytes_per_step": stats["sent"] / stats["steps"]}
        if carry is None:  # a span: the weights are still on the workers
            pvec = state = None
            extra["min_bytes_per_step"] = 2 * (n_ranks - 1) * size
        elif mode == "allreduce":
            pvec, state = carry[0], carry[2]
            extra["min_bytes_per_step"] = 2 * (n_ranks - 1) * size  # a ring: 2(n-1)/n of P out of each rank
        else:
            vecs = np.stack([c[0] for c in carry])
            pvec = vecs.mean(axis=0).astype(vecs.dtype)
            state = carry[0][2]
            extra["consensus"] = float(np.sqrt(np.mean(np.sum((vecs - pvec) ** 2, axis=1))))
            peers = min(n_ranks - 1, 2)  # distinct ring neighbours
            extra["min_bytes_per_step"] = n_ranks * peers * size * (stats["steps"] // every) / stats["steps"]
        extra["comm_seconds"] = stats["comm_s"] / max(n_ranks, 1)
        if pvec is not None:
            model.params = problem.unpack(pvec.copy())
        if state is not None:
            model.state = state
        val = None
        if validation is not None and "val_rows" in stats:  # evaluated by the ranks (a span)
            val = {"loss": stats["val_loss"] / stats["val_rows"], "accuracy": stats["val_metric"] / stats["val_rows"]}
        model._end_epoch(history, epoch, epochs, stats["loss"] / stats["rows"], stats["metric"] / stats["rows"],
                         validation, t0, verbose, extra, val)
    return history
