"""Reading a function's source: its AST, file and line offset, wherever it was defined (indented, lambdas)."""
from __future__ import annotations

import ast
import inspect
import linecache

from .errors import CompileError
from .source import parse


def source_of(pyfunc) -> tuple[ast.AST, str, int]:
    """The function's AST, its file name and the line offset of the parsed text in that file."""
    fast = _lines(pyfunc)
    try:
        lines, first = fast or inspect.getsourcelines(pyfunc)
        filename = inspect.getsourcefile(pyfunc) or pyfunc.__code__.co_filename
        module = _parsed(lines)
        if module is None and fast is not None:  # the lines read without tokenizing must parse, or inspect reads
            lines, first = inspect.getsourcelines(pyfunc)
            module = _parsed(lines)
    except (OSError, TypeError) as e:
        raise CompileError(f"cannot read the source of {pyfunc.__qualname__!r} ({e}); define it in a file") from e
    text = "".join(lines)
    # Indented sources (methods, nested defs) parse under an ``if 1:`` header: columns stay those of the file.
    offset = first - 1 - (1 if lines and lines[0][:1] in " \t" else 0)
    if module is None:
        module, offset = _parse_lambda_fragment(text, pyfunc), first - 1
    target = _find_definition(module, pyfunc, offset)
    if target is None:
        raise CompileError(f"cannot locate the definition of {pyfunc.__qualname__!r} in {filename}")
    return target, filename, offset


def _parsed(lines):
    """The module of ``lines`` (under an ``if 1:`` header when indented), or None when they do not parse."""
    header = "if 1:\n" if lines and lines[0][:1] in " \t" else ""
    try:
        return parse(header + "".join(lines))
    except SyntaxError:
        return None


def _lines(pyfunc):
    """``(lines, first line)`` of a ``def`` from the file's lines (linecache) without tokenizing: from the code's
    first line (its first decorator's) on, while later lines are indented deeper than that line or blank, past
    the last line its bytecode (and its nested functions') covers; None when unsure (a lambda, no file, a line
    that does not fit), and inspect.getsourcelines decides. Tokenizing compiles the tokenize module's regular
    expressions at the first call in a process (11 ms of a first call that took 65, profiled here)."""
    code = getattr(pyfunc, "__code__", None)
    if code is None or pyfunc.__name__ == "<lambda>" or hasattr(pyfunc, "__wrapped__"):
        return None  # (inspect reads a wrapped function's own lines: functools.wraps)
    file_lines = linecache.getlines(code.co_filename, getattr(pyfunc, "__globals__", None))
    first = code.co_firstlineno
    if not file_lines or first > len(file_lines):
        return None
    head = file_lines[first - 1]
    stripped = head.lstrip()
    if not stripped.startswith(("def ", "async def ", "@")):
        return None
    indent = len(head) - len(stripped)
    last = max([first] + _code_lines(code))
    end = first
    while end < len(file_lines):
        line = file_lines[end]  # the line after ``end`` (1-based)
        body = line.strip()
        if end < last or not body or body.startswith("#") or len(line) - len(line.lstrip()) > indent:
            end += 1
            continue
        break
    while end > first and (not file_lines[end - 1].strip() or file_lines[end - 1].strip().startswith("#")):
        end -= 1  # no trailing blank or comment lines
    return file_lines[first - 1:end], first


def _code_lines(code) -> list:
    """Every line the code object's instructions (and its nested code objects') span."""
    out = [e for _, e, _, _ in code.co_positions() if e is not None]
    for c in code.co_consts:
        if hasattr(c, "co_positions"):
            out += _code_lines(c)
    return out


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
