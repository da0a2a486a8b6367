"""Passes: pure functions ``Program -> Program``, run in this order (each says why it is where it is)."""
from __future__ import annotations

from .dead_code import remove_dead_code
from .fold import fold_constants

PIPELINE = (
    fold_constants,  # first: makes conditions constant, so dead-code removal can drop whole branches
    remove_dead_code,  # after folding: statements after return/break, constant-false branches and loops
)


def run_pipeline(program, passes=PIPELINE):
    for p in passes:
        program = p(program)
    return program


__all__ = ["PIPELINE", "fold_constants", "remove_dead_code", "run_pipeline"]
