"""The CI version of benchmarks/chaos.py: three random-time SIGKILLs of a real worker for each kind of work.
Compiled and tiled calls give the right answer or a ClusterError; training always completes with the answer of
an undisturbed run. (Scheduler kills: tests/test_faults.py; the full run's figures: python benchmarks/chaos.py.)"""
from __future__ import annotations

import importlib.util
import os
import random

import pytest

pytestmark = pytest.mark.timeout(300)

_spec = importlib.util.spec_from_file_location(
    "chaos", os.path.join(os.path.dirname(__file__), "..", "benchmarks", "chaos.py"))
chaos = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chaos)


@pytest.fixture(scope="module")
def procs():
    from cluster import DaskProcesses

    p = DaskProcesses(n_workers=3)
    yield p
    p.stop()


@pytest.mark.parametrize("kind", chaos.KINDS)
def test_random_worker_kills(procs, kind):
    seen = []
    counts = chaos.worker_kills(kind, 3, random.Random(kind), scale=0.5, log=seen.append, procs=procs,
                                max_trials=6)
    allowed = {"right", "early"} if kind in ("allreduce", "neighbours") else {"right", "early", "ClusterError"}
    assert set(counts) <= allowed, seen
    assert 3 <= sum(counts.values()) <= 6 and sum(v for k, v in counts.items() if k != "early") >= 1, seen
