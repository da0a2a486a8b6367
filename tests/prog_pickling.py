"""Compiled functions and task bodies for tests/test_pickling.py, importable by its Dask workers and scheduler (their
PYTHONPATH holds tests/): what a package installed on a cluster is."""
from __future__ import annotations

import os
import time

import numpy as np

import phylanx_py as px


@px.compile
def scaled_sin(x):
    return np.sin(x) * 2.0 + x


@px.compile(fuse=False)
def scaled_sin_unfused(x):
    return np.sin(x) * 2.0 + x


def make_affine(k):
    """A compiled closure: not importable by name (``make_affine.<locals>.affine``), so it travels by value."""

    @px.compile
    def affine(x):
        return x * k + 1.0

    return affine


def call_on_worker(f, x):
    """What a worker received and did: (type name, f(x), whether f compiled there, the worker's pid)."""
    out = f(x)
    return type(f).__name__, out, f._code is not None, os.getpid()


def tiled_summary(t, delay=0.0):
    """A task reading a tiled array it was sent (after ``delay`` seconds): (type name, its values, its shape)."""
    time.sleep(delay)
    values = np.asarray(t)
    return type(t).__name__, values, values.shape


def tiled_work(t):
    """A task computing with a tiled array it was sent (tile tasks of its own, waited for)."""
    return float(np.asarray(t * 3.0).sum()), float((t * 2.0).sum())


def tiled_plus_one(t, persist=False):
    """A task returning a tiled array: lazy, or computed (``persist``)."""
    out = t + 1
    return out.persist() if persist else out
