"""Python's operators, the one table of them: symbol, AST node, printed name, NumPy ufunc, dunder, in-place form.

The translator maps AST nodes through it, python_ops.py declares the ``operator.*`` primitives from it (their inline
bytecode and fused-kernel forms come from the symbol), and traced values (phylanx_py/trace.py) take their dunder
methods from it. Stdlib only.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Operator:
    name: str  # the ``operator`` module's name: the primitive is ``operator.<name>``
    symbol: str  # Python's spelling: "+", "not", "is not"
    ast: str  # the ast node class: "Add", "USub", "Lt"
    kind: str  # "binary", "unary", "compare" (element-wise on arrays), "identity" (``is``, ``in``: never on arrays)
    display: str  # the name in the printed tree: "__add"
    numpy: str | None = None  # the NumPy ufunc the operator is on arrays, when it is element-wise
    dunder: str | None = None  # "add": __add__ / __radd__ of traced values
    inplace: str | None = None  # "iadd": ``x += v``
    ast_inplace: str | None = None  # the AugAssign operator ("Add" for ``+=``): same as ``ast`` for binaries

    @property
    def arity(self) -> int:
        return 1 if self.kind == "unary" else 2

    @property
    def template(self) -> str:
        """The expression over operand placeholders: ``{0} + {1}``, ``-{0}``, ``not {0}``."""
        if self.kind == "unary":
            return f"{self.symbol}{{0}}" if self.symbol != "not" else "not {0}"
        return f"{{0}} {self.symbol} {{1}}"


def _binary(name, symbol, ast, display, numpy, *, dunder=None, inplace=True):
    return Operator(name, symbol, ast, "binary", display, numpy, dunder or name.rstrip("_"),
                    f"i{name.rstrip('_')}" if inplace else None, ast)


OPERATORS = (
    _binary("add", "+", "Add", "__add", "add"),
    _binary("sub", "-", "Sub", "__sub", "subtract"),
    _binary("mul", "*", "Mult", "__mul", "multiply"),
    _binary("truediv", "/", "Div", "__div", "divide"),
    _binary("floordiv", "//", "FloorDiv", "__floordiv", "floor_divide"),
    _binary("mod", "%", "Mod", "__mod", "remainder"),
    _binary("pow", "**", "Pow", "__pow", "power"),
    _binary("matmul", "@", "MatMult", "__matmul", "matmul"),
    _binary("lshift", "<<", "LShift", "__lshift", "left_shift"),
    _binary("rshift", ">>", "RShift", "__rshift", "right_shift"),
    _binary("and_", "&", "BitAnd", "__bitand", "bitwise_and"),
    _binary("or_", "|", "BitOr", "__bitor", "bitwise_or"),
    _binary("xor", "^", "BitXor", "__bitxor", "bitwise_xor"),
    Operator("lt", "<", "Lt", "compare", "__lt", "less", "lt"),
    Operator("le", "<=", "LtE", "compare", "__le", "less_equal", "le"),
    Operator("gt", ">", "Gt", "compare", "__gt", "greater", "gt"),
    Operator("ge", ">=", "GtE", "compare", "__ge", "greater_equal", "ge"),
    Operator("eq", "==", "Eq", "compare", "__eq", "equal", "eq"),
    Operator("ne", "!=", "NotEq", "compare", "__ne", "not_equal", "ne"),
    Operator("is_", "is", "Is", "identity", "__is"),
    Operator("is_not", "is not", "IsNot", "identity", "__is_not"),
    Operator("in", "in", "In", "identity", "__in"),
    Operator("not_in", "not in", "NotIn", "identity", "__not_in"),
    Operator("neg", "-", "USub", "unary", "__minus", "negative", "neg"),
    Operator("pos", "+", "UAdd", "unary", "__plus", "positive", "pos"),
    Operator("invert", "~", "Invert", "unary", "__invert", "invert", "invert"),
    Operator("not_", "not", "Not", "unary", "__not"),
)
BY_NAME = {op.name: op for op in OPERATORS}
BY_AST = {op.ast: op for op in OPERATORS}  # ast class name -> operator (translation of BinOp/UnaryOp/Compare)
INPLACE_BY_AST = {op.ast_inplace: op.inplace for op in OPERATORS if op.inplace}  # "Add" -> "iadd" (``+=``)
