"""Reverse-mode differentiation of a recorded Trace: ``backward`` walks the records from the last to the first and
calls each primitive's gradient rule (primitives/vjp.py) on traced values, so the gradient is recorded as
primitives too."""
from __future__ import annotations

import numpy as np

from phylanx_py.primitives import vjp

from .trace import Trace, TraceError, Tracer


def backward(trace: Trace, value, wrt: list[Tracer]) -> list:
    """Reverse mode over the recording: the cotangent of each Tracer in ``wrt`` (zeros where none flows)."""
    forward = list(trace.records)  # the rules append the backward pass's records to the trace
    cot: dict[str, object] = {}
    if type(value) is Tracer and value.diff:
        trace.at = next((r.loc for r in reversed(trace.records) if r.out is value), None)
        cot[value.name] = trace.emit("ones_like", (value,), {}, diff=False)
        trace.at = None
    for rec in reversed(forward):
        g = cot.pop(rec.out.name, None)
        if g is None or not rec.out.diff:
            continue
        try:
            rule = vjp.grad_rule(rec.prim)
        except KeyError:
            raise TraceError(f"{rec.loc}: no gradient rule for primitive {rec.prim!r}; the gradient cannot flow "
                             "through it") from None
        if rule is None:
            continue
        # The gradient's operations carry the location of the operation they differentiate.
        trace.at = rec.loc
        try:
            thunks = rule(g, rec.out, *rec.args, **rec.kwargs)
            for arg, th in _pairs(rec.args, thunks):
                if type(arg) is Tracer and arg.diff and th is not None:
                    try:
                        c = th()
                    except NotImplementedError as e:
                        raise TraceError(f"{rec.loc}: {e}") from None
                    c = _like(trace, c, arg)
                    prev = cot.get(arg.name)
                    cot[arg.name] = c if prev is None else prev + c
        finally:
            trace.at = None
    out = []
    for t in wrt:
        c = cot.get(t.name)
        if c is None:
            c = trace.emit("zeros_like", (t,), {}, diff=False)
        elif np.shape(c.value if type(c) is Tracer else c) != t.shape or type(c) is not Tracer:
            c = trace.emit("multiply", (trace.emit("ones_like", (t,), {}, diff=False), c), {}, diff=False)
        out.append(c)
    return out


def _like(trace, c, arg):
    """The cotangent in its input's float dtype: a rule that promoted float32 to float64 must not make the rest of
    the backward pass (its matmuls) float64."""
    want = arg.dtype
    have = c.dtype if type(c) is Tracer else np.result_type(c)
    if want != have and np.issubdtype(want, np.floating) and np.issubdtype(have, np.floating):
        return trace.emit("method.astype", (c, want), {}, diff=False)
    return c


def _pairs(args, thunks):
    for arg, th in zip(args, thunks):
        if isinstance(th, list) and isinstance(arg, (list, tuple)):
            yield from _pairs(arg, th)
        elif not isinstance(th, list):
            yield arg, th
