"""The optimizer's update split over the ranks of an allreduce segment whose ranks share memory (ZeRO's sharded
update, on one machine).

Where every rank of a group runs on one machine (segments/shm.py), the parameters and the optimizer's state live in
vectors every rank maps (``Group.vectors``). A step's gradient goes into the rank's slot; each rank sums its chunk of
every slot (the reduce-scatter) and updates that chunk of the parameters and of the state itself; one barrier later
every rank reads the whole updated vector in its next forward pass. Against an all-reduce then a full update on every
rank, there is no all-gather of the sum (nobody reads it whole) and each rank updates 1/n of the elements: SGD with
momentum reads three and writes two vectors of the parameters' size (18.6 MB a step for simplemlp, 1.3-2 ms of a
rank's step on this machine, for n times the same work).

The ranks' order of reads and writes: rank r writes its chunk of the parameters only after every rank arrived at the
step's reduce-scatter (its forward and backward passes done), and reads the others' chunks in its next step only
after every rank's update (the barrier closing ``reduce_apply``). Rank 0 copies the checkpoint in before the first
step; the epoch's checkpoint is copied back out into the rank's own arrays (``store``) for its report and result.

Only for an optimizer whose update is element-wise with the same scalars for every parameter, so that the update of
a chunk of the flat vector gives each element the bits the update of its parameter gives: one that says so
(``elementwise`` set by the class that defines ``update``: SGD, Adam, RMSprop; a subclass that overrides ``update``
must say so again). Any other (per-parameter norms as LARS, clipping) keeps the all-reduce and the full update.
"""
from __future__ import annotations

import numpy as np
from phylanx_py.primitives.fused_update import Sum


def elementwise(opt) -> bool:
    """Whether ``opt``'s update is element-wise: said by the class that defines its ``update``."""
    return _said(opt, "elementwise")


def takes_sums(opt) -> bool:
    """Whether ``opt``'s update takes a gradient given as a Sum of parts (primitives/fused_update.py): said by the
    class that defines its ``update``."""
    return _said(opt, "takes_sums")


def _said(opt, what) -> bool:
    for cls in type(opt).__mro__:
        if "update" in cls.__dict__:
            return bool(cls.__dict__.get(what, False))
    return False


def _leaves(entry, like):
    """The arrays of a flat vector's optimizer state entry (None, an array, or a tuple of arrays, each like the
    vector ``like``); None for any other form."""
    parts = [] if entry is None else [entry] if type(entry) is np.ndarray else list(entry) \
        if type(entry) is tuple else None
    if parts is None or any(type(a) is not np.ndarray or a.shape != like.shape or a.dtype != like.dtype
                            for a in parts):
        return None
    return parts


def _like(entry, arrays):
    """``entry``'s form (None, an array, a tuple of arrays) with ``arrays`` in place of its arrays, in order."""
    if entry is None:
        return None
    if type(entry) is np.ndarray:
        return arrays[0]
    return tuple(arrays)


class Shard:
    """The shared parameters (``p``) and optimizer state of a segment's ranks, and this rank's slot (``slot``)."""

    def __init__(self, slot, p, state_entry, state_arrays):
        self.slot, self.p = slot, p
        self._entry, self._state = state_entry, state_arrays
        self._cut = None  # (chunk, [p's chunk], [the state's chunk]): the same every step

    @classmethod
    def make(cls, group, opt, pvec, opt_state):
        """A Shard of ``pvec`` and ``opt_state`` (the flat vector's state: ``init([pvec])``) on ``group``, with the
        checkpoint copied in; None when the update stays whole (see the module's note). Every rank of the group
        calls this together, with the same values."""
        if group.size < 2 or not group.shared or not elementwise(opt) or len(opt_state) != 1:
            return None
        leaves = _leaves(opt_state[0], pvec)
        if leaves is None:
            return None
        slot = group.scratch(pvec)  # None: a small vector, or no region (then no vectors either)
        if slot is None:
            return None
        vectors = group.vectors(pvec.size, pvec.dtype, 1 + len(leaves))
        if vectors is None:
            return None
        if group.rank == 0:
            for shared, own in zip(vectors, [pvec, *leaves]):
                np.copyto(shared, own)
        group.allreduce(np.zeros(1))  # a barrier: nobody reads them before rank 0 has written them
        return cls(slot, vectors[0], opt_state[0], vectors[1:])

    def step(self, group, opt, step: int, buf) -> None:
        """Sum ``buf`` (this rank's slot) over the ranks and update this rank's chunk with it (``opt.update`` of
        one parameter: the chunk); on return every rank's chunk is updated. An optimizer that takes a Sum gets the
        chunk of every rank's slot as one, and adds them in its own pass (the same bits: fused_update.Sum)."""
        parts = takes_sums(opt)

        def apply(c, total):
            if self._cut is None or self._cut[0] != c:
                self._cut = (c, [self.p[c]], [_like(self._entry, [a[c] for a in self._state])])
            opt.update(self._cut[1], [Sum(total) if parts else total], self._cut[2], step)

        group.reduce_apply(buf, apply, parts=parts)

    def store(self, pvec, opt_state) -> None:
        """The shared parameters and state copied into this rank's own ``pvec`` and ``opt_state`` (after a step's
        barrier: every rank's update is in)."""
        np.copyto(pvec, self.p)
        for own, shared in zip(_leaves(opt_state[0], pvec), self._state):
            np.copyto(own, shared)
