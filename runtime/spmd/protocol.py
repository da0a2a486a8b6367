"""A shard's NumPy face (NEP 13/18): a NumPy function or ufunc called on a shard runs the tile rule on its
declaration (primitives/tile_rules.py) against the rank's operations (ops.py). One that has none raises NotSpmd
naming the function: the loop then runs as before, and ``explain()`` says why."""
from __future__ import annotations

import weakref

import numpy as np
from phylanx_py.primitives import lookup, name_of, tile_rules

from . import cross, local
from .ops import OPS
from .shard import NotSpmd, Shard, Transposed, holds, implements


@implements("array_ufunc")
def array_ufunc(ufunc, method, inputs, kwargs):
    if ufunc is np.equal and method == "__call__" and not kwargs:
        mask = _label_test(inputs)
        if mask is not None:
            return mask
    return tile_rules.ufunc(OPS, ufunc, method, inputs, kwargs)


def _label_test(inputs):
    """``labels == j`` (an integer shard and an integer): a mask made on first use that remembers its labels and
    j, so ``X[mask].mean(axis=0)`` and ``np.sum(mask)`` can be entries of per-label sums (cross.group_sums) and
    the mask itself is never made. None when it is not such a test."""
    a, b = inputs
    labels, j = (a, b) if type(a) is Shard else (b, a)
    if type(labels) is Shard and labels.ragged is None and labels.ndim == 1 and labels.dtype.kind in "iu" \
            and np.can_cast(labels.dtype, np.intp, "safe") and -labels.R <= labels.t <= labels.L \
            and type(j) in (int, np.int64, np.int32, np.intp) and not isinstance(j, bool) and not labels.mutated:
        mask = Shard(None, labels.n, labels.L, labels.R, labels.t, labels.rank, origin=("eq", labels, int(j)))
        labels.rank.lazy.append(weakref.ref(mask))  # made before the labels change (local._before_change)
        return mask
    return None


@implements("array_function")
def array_function(func, args, kwargs):
    name = name_of(func)
    rule = lookup(name).tile if name is not None else None
    if rule is None:
        raise NotSpmd(f"np.{getattr(func, '__name__', func)} has no SPMD rule")
    return rule(OPS, *args, **kwargs)


implements("getitem")(local.getitem)
implements("setitem")(local.setitem)
implements("inplace")(local.inplace)
implements("reduce")(cross.reduce)
implements("matmul")(cross.matmul)


def shard_in(value) -> bool:
    """Does ``value`` (top level, or in a list/tuple/dict) hold a shard?"""
    return holds(value, (Shard, Transposed))
