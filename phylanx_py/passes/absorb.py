"""Pairs of calls that are one primitive: ``outer(inner(*a), *b)`` becomes ``composed(*a, *b)`` where ``outer``'s
declaration says it absorbs ``inner`` (``Primitive.absorbs``: pairs (inner's name, composed's name)).

A primitive declares it when the pair has a cheaper algorithm than its two kernels in turn: the input gradient of
a convolution taken as the sum of its patch gradients (``nn.conv2d_patches_grad(nn.conv2d_grad_patches(rows,
w), ...)``) is, at stride 1, itself a convolution that never builds the patch gradients
(``nn.conv2d_grad_input_rows``). The inner call must be written into the outer one, with its arguments by
position: a value the program keeps in a variable (perhaps read elsewhere) stays as it is. Gradient trees write
every value read once into its reader (grad_program.py), so the pairs their rules record are found."""
from __future__ import annotations

import dataclasses

from phylanx_py.primitives import lookup

from .. import ir
from .rewrite import map_nodes


def _absorb(node):
    if not (isinstance(node, ir.Call) and node.args and isinstance(node.args[0], ir.Call)):
        return node
    composed = dict(lookup(node.prim).absorbs).get(node.args[0].prim)
    if composed is None:
        return node
    inner = node.args[0]
    if inner.kwargs:  # inner's arguments by keyword would not sit before this one's others by position
        return node
    return dataclasses.replace(node, prim=composed, args=inner.args + node.args[1:])


def absorb_calls(program: ir.Program) -> ir.Program:
    return map_nodes(program, _absorb)
