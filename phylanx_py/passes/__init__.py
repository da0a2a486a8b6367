"""Passes: pure functions ``Program -> Program``, run in this order (each says why it is where it is)."""
from __future__ import annotations

from .absorb import absorb_calls
from .dead_code import remove_dead_code
from .fold import fold_constants
from .fuse import fuse_elementwise
from .rowdot import fuse_row_products

PIPELINE = (
    fold_constants,  # first: makes conditions constant, so dead-code removal can drop whole branches
    remove_dead_code,  # after folding: statements after return/break, constant-false branches and loops
    absorb_calls,  # before fusion, which would hide an inner call in a fused group; not a fusion (fuse=False too)
    fuse_elementwise,  # groups what is left of the element-wise chains (folded constants included)
    fuse_row_products,  # after fusion: X.T @ f(X @ v) over element-wise groups becomes one pass over X
)


def run_pipeline(program, passes=PIPELINE):
    for p in passes:
        program = p(program)
    return program


__all__ = ["PIPELINE", "absorb_calls", "fold_constants", "fuse_elementwise", "fuse_row_products", "remove_dead_code",
           "run_pipeline"]
