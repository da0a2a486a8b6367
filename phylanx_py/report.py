"""The HTML report of a profile: one self-contained page (inline SVG, inline CSS, no scripts, opens offline)."""
from __future__ import annotations

import html
import linecache
import os
import re

from . import ir
from .visualize import GraphvizMissing, render, to_dot

_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th { background: #f0f0f0; } td.l { text-align: left; }
pre.src { background: #fafafa; border: 1px solid #ddd; padding: 0.5em; font-size: 0.9em; }
span.t { display: inline-block; width: 7em; text-align: right; color: #888; margin-right: 1em; }
span.hot { color: #b30000; font-weight: bold; }
.tree svg { max-width: 100%; height: auto; border: 1px solid #eee; }
"""


def _svg(program, profile) -> str:
    try:
        svg = render(to_dot(program, profile), "svg").decode()
    except GraphvizMissing as e:
        return f"<p><em>{html.escape(str(e))}</em></p>"
    return re.sub(r"^.*?(<svg)", r"\1", svg, count=1, flags=re.S)  # drop the XML prolog and DOCTYPE


def _table(profile) -> str:
    head = ("node", "where", "function", "calls", "total ms", "mean ms", "max ms", "run", "workers", "moved bytes")
    rows = ["<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for s in profile.stats():
        cells = [(profile.name(s), "l"), (s.loc.short, "l"), (s.loc.function, "l"), (s.calls, ""),
                 (f"{s.total * 1e3:.3f}", ""), (f"{s.mean * 1e3:.3f}", ""), (f"{s.max * 1e3:.3f}", ""),
                 (s.mode, "l"), (", ".join(sorted(s.workers)), "l"), (s.moved, "")]
        rows.append("<tr>" + "".join(f'<td class="{c}">{html.escape(str(v))}</td>' for v, c in cells) + "</tr>")
    return '<table class="nodes">' + "\n".join(rows) + "</table>"


def _source(program, profile) -> str:
    out = []
    for name, fn in program.functions:
        lines = [n.loc.lineno for n in ir.walk(fn) if getattr(n, "loc", None) is not None and n.loc.lineno]
        if not lines:
            continue
        per_line: dict[int, float] = {}
        for s in profile.stats():
            if s.loc.filename == fn.loc.filename:
                per_line[s.loc.lineno] = per_line.get(s.loc.lineno, 0.0) + s.total
        hottest = max(per_line.values(), default=0.0)
        body = []
        for lineno in range(min(lines), max(lines) + 1):
            text = linecache.getline(fn.loc.filename, lineno).rstrip("\n")
            t = per_line.get(lineno)
            cls = ' class="hot"' if t and hottest and t >= 0.5 * hottest else ""
            stamp = f"{t * 1e3:.2f} ms" if t is not None else ""
            body.append(f'<span class="t">{stamp}</span><span{cls}>{lineno:4d}  {html.escape(text)}</span>')
        out.append(f"<h3>{html.escape(name)} &mdash; {html.escape(os.path.basename(fn.loc.filename))}</h3>"
                   f'<pre class="src">' + "\n".join(body) + "</pre>")
    return "\n".join(out)


def write_report(profile, path) -> str:
    path = os.fspath(path)
    parts = ["<!DOCTYPE html>", '<html><head><meta charset="utf-8"><title>phylanx-py profile</title>',
             f"<style>{_CSS}</style></head><body>", "<h1>phylanx-py profile</h1>",
             f"<p><b>{html.escape(profile.headline())}</b></p>",
             f"<p>{len(profile.nodes)} nodes, {sum(s.calls for s in profile.nodes.values())} primitive calls, "
             f"{sum(s.total for s in profile.nodes.values()) * 1e3:.2f} ms in kernels.</p>",
             "<h2>Nodes, most time first</h2>", _table(profile)]
    for entry, program in profile.programs.items():
        parts += [f"<h2>Execution tree of {html.escape(entry)}</h2>",
                  f'<div class="tree">{_svg(program, profile)}</div>',
                  f"<h2>Source of {html.escape(entry)}, time per line</h2>", _source(program, profile)]
    parts.append("</body></html>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return path
