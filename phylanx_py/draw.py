"""Writing a tree to a file: .svg/.png/.pdf (graphviz), .dot (text), .html (the profile report)."""
from __future__ import annotations

import os

from . import ir
from .profile import Profile
from .report import write_report
from .visualize import render, to_dot


def draw(program: ir.Program, path, profile=None) -> str:
    """Write the drawing to ``path``: .svg .png .pdf (graphviz), .dot (text), .html (report)."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext == "dot":
        with open(path, "w") as f:
            f.write(to_dot(program, profile))
    elif ext in ("svg", "png", "pdf"):
        data = render(to_dot(program, profile), ext)
        with open(path, "wb") as f:
            f.write(data)
    elif ext == "html":
        prof = profile if profile is not None else Profile()
        prof.programs.setdefault(program.entry, program)
        write_report(prof, path)
    else:
        raise ValueError(f"cannot draw to {path!r}: use .svg, .png, .pdf, .dot or .html")
    return path
