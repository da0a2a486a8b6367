"""Reading a function's source: its AST, file and line offset, wherever it was defined (indented, lambdas)."""
from __future__ import annotations

import ast
import inspect

from .errors import CompileError
from .source import parse


def source_of(pyfunc) -> tuple[ast.AST, str, int]:
    """The function's AST, its file name and the line offset of the parsed text in that file."""
    try:
        lines, first = inspect.getsourcelines(pyfunc)
        filename = inspect.getsourcefile(pyfunc) or pyfunc.__code__.co_filename
    except (OSError, TypeError) as e:
        raise CompileError(f"cannot read the source of {pyfunc.__qualname__!r} ({e}); define it in a file") from e
    text = "".join(lines)
    # Indented sources (methods, nested defs) parse under an ``if 1:`` header: columns stay those of the file.
    header = "if 1:\n" if lines and lines[0][:1] in " \t" else ""
    offset = first - 1 - (1 if header else 0)
    try:
        module = parse(header + text)
    except SyntaxError:
        module, offset = _parse_lambda_fragment(text, pyfunc), first - 1
    target = _find_definition(module, pyfunc, offset)
    if target is None:
        raise CompileError(f"cannot locate the definition of {pyfunc.__qualname__!r} in {filename}")
    return target, filename, offset


def _parse_lambda_fragment(text: str, pyfunc):
    """A lambda inside a larger expression: parse from ``lambda`` on, dropping trailing text until it parses."""
    start = text.find("lambda")
    frag = text[start:] if start >= 0 else ""
    while frag:
        try:
            return parse(frag)
        except SyntaxError:
            frag = frag[:-1]
    raise CompileError(f"cannot parse the source of {pyfunc.__qualname__!r}")


def _find_definition(module, pyfunc, offset: int):
    """The AST node of ``pyfunc``: by name and first line; a lambda by the position of its body's code."""
    code = pyfunc.__code__
    if pyfunc.__name__ == "<lambda>":
        want = list(code.co_varnames[: code.co_argcount])
        lambdas = [n for n in ast.walk(module) if isinstance(n, ast.Lambda) and [a.arg for a in n.args.args] == want]
        # Several lambdas with the same parameters on one line: the bytecode's positions tell which one.
        positions = {(line, col) for line, _, col, _ in code.co_positions() if line is not None}
        exact = [n for n in lambdas if (n.body.lineno + offset, n.body.col_offset) in positions]
        matches = exact or lambdas
        return matches[0] if matches else None
    defs = [n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.name == pyfunc.__name__]
    first = [n for n in defs if min([n.lineno] + [d.lineno for d in n.decorator_list]) + offset == code.co_firstlineno]
    return (first or defs or [None])[0]
