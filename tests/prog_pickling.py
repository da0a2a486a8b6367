"""Compiled functions and task bodies for tests/test_pickling.py, importable by its Dask workers and scheduler (their
PYTHONPATH holds tests/): what a package installed on a cluster is."""
from __future__ import annotations

import os

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
