"""The execution-tree IR: immutable, picklable nodes, each with the SourceLoc it came from (stdlib only)."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import text_form
from .source import UNKNOWN, SourceLoc
from .turns import turn

# Every node is a frozen, slotted dataclass: a value. Passes build new trees with dataclasses.replace.
node = dataclass(frozen=True, slots=True)


@node
class Node:
    pass


# ---- expressions ---------------------------------------------------------------------------------------
@node
class Const(Node):
    """A literal or a value resolved at compile time (``np.pi``, ``np.float64``)."""
    value: object
    loc: SourceLoc = UNKNOWN

    # Equal by value like every node, with NaN equal to NaN (a tree must equal its pickled copy).
    def __eq__(self, other):
        return type(other) is Const and self.loc == other.loc and _const_key(self.value) == _const_key(other.value)

    def __hash__(self):
        key = _const_key(self.value)
        try:
            return hash((key, self.loc))
        except TypeError:
            return hash((repr(key), self.loc))


def _const_key(v):
    if isinstance(v, float) and v != v:
        return (float, "nan")
    return (type(v), v)


@node
class Var(Node):
    """A local variable, ``depth`` functions out (0: this function's own; 1: the enclosing one ...)."""
    name: str
    depth: int = 0
    loc: SourceLoc = UNKNOWN


@node
class Global(Node):
    """A data global of module ``module``, read at each call (functions and modules are resolved at compile)."""
    name: str
    module: str
    loc: SourceLoc = UNKNOWN


@node
class Call(Node):
    """A call of the primitive named ``prim`` (a registry name, never a Python object)."""
    prim: str
    args: tuple = ()
    kwargs: tuple = ()  # ((name, Node), ...)
    loc: SourceLoc = UNKNOWN


@node
class FuncRef(Node):
    """A function of the program by name (compiled from the user's globals; recursion goes through it)."""
    name: str
    loc: SourceLoc = UNKNOWN


@node
class Apply(Node):
    """A call of a function value: a FuncRef, a lambda or closure, or a callable passed in at run time."""
    func: Node
    args: tuple = ()
    kwargs: tuple = ()
    loc: SourceLoc = UNKNOWN


@node
class Lambda(Node):
    """Makes a closure of ``function`` over the current frame; defaults are evaluated here."""
    function: Function
    defaults: tuple = ()  # Nodes, for the last positional parameters
    kwdefaults: tuple = ()  # ((name, Node), ...) for keyword-only parameters
    loc: SourceLoc = UNKNOWN


@node
class Leaf(Node):
    """Input ``index`` of the enclosing Fused group (its value is computed once, before the group)."""
    index: int
    loc: SourceLoc = UNKNOWN


@node
class Fused(Node):
    """An element-wise group run as one kernel: ``spec`` (primitives/fused.py) over ``leaves``; ``body`` is the
    same expression as IR over Leaf nodes, run instead when the inputs are not large arrays."""
    spec: tuple
    body: Node
    leaves: tuple
    locs: tuple = ()  # each operation's SourceLoc, in the spec's pre-order (errors name the operation)
    reduce: tuple = ()  # ("sum", axis) when the chain feeds a sum: one kernel, no intermediate array
    loc: SourceLoc = UNKNOWN


@node
class IfExp(Node):
    cond: Node
    then: Node
    orelse: Node
    loc: SourceLoc = UNKNOWN


@node
class BoolOp(Node):
    """``and``/``or`` with short circuit; the value is the deciding operand, as in Python."""
    op: str
    values: tuple
    loc: SourceLoc = UNKNOWN


@node
class SetVar(Node):
    """``(name := value)``: assigns and yields the value (also the translator's temporaries)."""
    name: str
    value: Node
    depth: int = 0
    loc: SourceLoc = UNKNOWN


@node
class List(Node):
    items: tuple = ()
    loc: SourceLoc = UNKNOWN


@node
class Tuple(Node):
    items: tuple = ()
    loc: SourceLoc = UNKNOWN


@node
class Dict(Node):
    keys: tuple = ()
    values: tuple = ()
    loc: SourceLoc = UNKNOWN


# ---- assignment targets ---------------------------------------------------------------------------------
@node
class StoreName(Node):
    name: str
    depth: int = 0
    loc: SourceLoc = UNKNOWN


@node
class StoreTuple(Node):
    targets: tuple
    loc: SourceLoc = UNKNOWN


@node
class StoreItem(Node):
    obj: Node
    key: Node
    loc: SourceLoc = UNKNOWN


# ---- statements ------------------------------------------------------------------------------------------
@node
class Assign(Node):
    target: Node
    value: Node
    loc: SourceLoc = UNKNOWN


@node
class Expr(Node):
    """An expression evaluated for its effect (``lst.append(x)``, ``print(x)``)."""
    value: Node
    loc: SourceLoc = UNKNOWN


@node
class Block(Node):
    stmts: tuple = ()
    loc: SourceLoc = UNKNOWN


@node
class If(Node):
    cond: Node
    then: Block
    orelse: Block
    loc: SourceLoc = UNKNOWN


@node
class While(Node):
    cond: Node
    body: Block
    orelse: Block = field(default_factory=Block)
    loc: SourceLoc = UNKNOWN


@node
class For(Node):
    target: Node
    iter: Node
    body: Block
    orelse: Block = field(default_factory=Block)
    loc: SourceLoc = UNKNOWN


@node
class Break(Node):
    loc: SourceLoc = UNKNOWN


@node
class Continue(Node):
    loc: SourceLoc = UNKNOWN


@node
class Return(Node):
    value: Node
    loc: SourceLoc = UNKNOWN


@node
class Function(Node):
    """A function: parameters (positional, then keyword-only), body, and every local name it binds."""
    name: str
    params: tuple
    body: Block
    locals: tuple = ()
    kwonly: tuple = ()
    loc: SourceLoc = UNKNOWN


@node
class Program(Node):
    """The whole tree: the entry function and every function it reaches, by name."""
    entry: str
    functions: tuple  # ((name, Function), ...) in compile order
    defaults: tuple = ()  # ((name, (Const, ...)), ...) defaults of the program's top-level functions
    kwdefaults: tuple = ()  # ((name, ((param, Const), ...)), ...)
    # ((primitive name, printed name), ...): the readable names ``str()`` shows, stored by the compile pipeline
    # (printer.labels_of); not part of the tree's value.
    labels: tuple = field(default=(), compare=False)

    def function(self, name: str) -> Function:
        for n, fn in self.functions:
            if n == name:
                return fn
        raise KeyError(name)

    def __str__(self) -> str:
        labels = dict(self.labels)
        return text_form.format_program(self, lambda name: labels.get(name, name))

    def view(self) -> str:
        """An indented tree, one node a line with its line number: for terminals and logs."""
        labels = dict(self.labels)
        return text_form.tree_view(self, children, lambda name: labels.get(name, name))


STATEMENTS = (Assign, Expr, Block, If, While, For, Break, Continue, Return)


_FIELDS: dict = {}  # node class -> its fields other than ``loc``, in order (``_kids``)


def _kids(n: Node) -> list:
    """The direct child nodes of ``n``, in evaluation order, as a list."""
    names = _FIELDS.get(type(n))
    if names is None:
        names = _FIELDS[type(n)] = tuple(f for f in n.__dataclass_fields__ if f != "loc")
    out = []
    for f in names:
        v = getattr(n, f)
        if isinstance(v, Node):
            out.append(v)
        elif isinstance(v, tuple):
            for item in v:
                if isinstance(item, Node):
                    out.append(item)
                elif isinstance(item, tuple):
                    out.extend(x for x in item if isinstance(x, Node))
    return out


def children(n: Node):
    """The direct child nodes of ``n`` (in evaluation order), for generic walks."""
    return iter(_kids(n))


def walk(n: Node):
    """Every node below and including ``n``, depth first (nested functions included). With a stack, not nested
    generators: each node passed up through one generator per ancestor made walks quadratic in the depth, and they
    were a third of a nested-loop function's translation and lowering (NPBench's adi: 460,000 generator steps)."""
    turn()  # (the work beside a program's calls takes its turns here: turns.py)
    stack = [n]
    pop, push = stack.pop, stack.extend
    while stack:
        node = pop()
        yield node
        kids = _kids(node)
        if kids:
            kids.reverse()
            push(kids)
