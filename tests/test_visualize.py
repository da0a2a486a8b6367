"""Profiles (local, synchronous and Dask runtimes), drawings through graphviz, the HTML report (rendered in headless
Chromium) and the text tree view, checked against the real tree and the real recorded numbers."""
from __future__ import annotations

import collections
import html
import inspect
import os
import re
import subprocess
import threading
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import numpy as np
import prog_viz
import pytest
from cluster import DaskProcesses
from helpers import assert_same, source_position
from phylanx_py.primitives import lookup
from phylanx_py.runtime.dask_connect import live_workers

import phylanx_py as px
from phylanx_py import ir


def compiled(fn):
    """A fresh compiled function without fusion: these tests look at every primitive of the tree one by one
    (an element-wise chain would otherwise be one fused node; tests/test_fusion.py covers that)."""
    return px.compile(fn, fuse=False)

pytestmark = pytest.mark.timeout(300)

CHROMIUM = "/usr/bin/chromium"
SVG = "{http://www.w3.org/2000/svg}"
ITERATIONS = 3
BIG_ROWS = 20_000  # 20,000 x 4 = 80,000 elements: over the 65,536 inline limit, so array calls become tasks
PROG_FILE = os.path.abspath(prog_viz.__file__)
PROG_BASE = os.path.basename(PROG_FILE)


def _data(rows, cols=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, cols))
    y = (X @ rng.standard_normal(cols) > 0).astype(float)
    return X, y


def label(n: ir.Call) -> str:
    return lookup(n.prim).label


def calls_in(node) -> list[ir.Call]:
    return [n for n in ir.walk(node) if isinstance(n, ir.Call)]


def key(n: ir.Call) -> tuple:
    return (n.loc.lineno, n.loc.col, label(n))


def the_loop(f) -> ir.For:
    (loop,) = [n for n in ir.walk(f.tree) if isinstance(n, ir.For)]
    return loop


def by_key(prof) -> dict:
    nodes = prof.to_dict()["nodes"]
    table = {(d["line"], d["col"], d["primitive"]): d for d in nodes}
    assert len(table) == len(nodes), "two profile rows for one call site"
    return table


def check_numbers(d):
    """Times recorded, total >= max >= mean > 0, and the mode agrees with the inline/task counts."""
    where = f"{d['primitive']} at line {d['line']}:{d['col']}"
    assert d["total_s"] > 0 and d["max_s"] > 0 and d["mean_s"] > 0, where
    assert d["total_s"] >= d["max_s"], where
    assert d["max_s"] >= d["mean_s"] * (1 - 1e-12), where
    assert d["mean_s"] == pytest.approx(d["total_s"] / d["calls"], rel=1e-12), where
    assert d["inline"] + d["tasks"] == d["calls"], where
    want_mode = "inline" if d["tasks"] == 0 else "task" if d["inline"] == 0 else "mixed"
    assert d["mode"] == want_mode, where
    assert d["workers"], where
    assert d["file"] == PROG_FILE and d["function"] == "lra", where


def check_lra_counts(f, prof):
    """Every call site of the tree is recorded: loop-body sites ITERATIONS times, the others once."""
    nodes = by_key(prof)
    loop = the_loop(f)
    body = {key(n) for n in calls_in(loop.body)}
    assert set(nodes) == {key(n) for n in calls_in(f.tree.function("lra"))}
    assert len(body) == 13  # / + exp - @ on line 8; - / * @ .T - [] .shape on line 9
    for k, d in nodes.items():
        assert d["calls"] == (ITERATIONS if k in body else 1), (k, d["calls"])
        check_numbers(d)
    mm_line, mm_col = source_position(prog_viz.lra, "X @ w")
    exp_line, exp_col = source_position(prog_viz.lra, "np.exp")
    mm, exp = nodes[(mm_line, mm_col, "__matmul")], nodes[(exp_line, exp_col, "exp")]
    assert mm["calls"] == exp["calls"] == ITERATIONS
    assert prof.to_dict()["functions"] == ["lra"]
    return nodes, mm, exp


# ---- 1. profiles on the local runtimes ---------------------------------------------------------------------------
def test_profile_small_inputs_records_every_call_site(runtime):
    X, y = _data(50)
    f = compiled(prog_viz.lra)
    with px.profile() as prof:
        got = f(X, y, 0.5, ITERATIONS)
    assert_same(got, prog_viz.lra(X, y, 0.5, ITERATIONS))
    nodes, mm, exp = check_lra_counts(f, prof)
    assert len(nodes) == 17
    here = threading.current_thread().name
    for d in nodes.values():  # small arrays: everything inline, in the calling thread
        assert (d["mode"], d["inline"], d["tasks"], d["workers"]) == ("inline", d["calls"], 0, [here])
        assert d["moved_bytes"] == 0
    assert mm["result_bytes"] == exp["result_bytes"] == ITERATIONS * 50 * 8
    assert repr(prof) == f"<phylanx profile: 17 nodes, {13 * ITERATIONS + 4} calls>"
    head, blank, *rows = prof.table().splitlines()
    assert head.startswith("wall ") and " in 1 call of lra; kernels " in head and not blank
    assert len(rows) == 2 + len(nodes)
    assert rows[0].split()[:3] == ["node", "where", "calls"]
    assert f"{PROG_BASE}:{mm['line']}:{mm['col']}" in prof.table()


def test_profile_big_inputs_run_as_tasks(runtime):
    X, y = _data(BIG_ROWS)
    assert X.size > 65_536
    f = compiled(prog_viz.lra)
    with px.profile() as prof:
        got = f(X, y, 0.5, ITERATIONS)
    assert_same(got, prog_viz.lra(X, y, 0.5, ITERATIONS))
    nodes, mm, exp = check_lra_counts(f, prof)
    for d in (mm, exp):
        assert (d["mode"], d["tasks"], d["inline"]) == ("task", ITERATIONS, 0)
        assert d["result_bytes"] == ITERATIONS * BIG_ROWS * 8
        if runtime.executor.name == "local":
            assert d["workers"] and all(w.startswith("phylanx-") for w in d["workers"]), d["workers"]
        else:
            assert d["workers"] == [threading.current_thread().name]
    # ``X.T`` is a view made inline in the calling thread
    t_line, t_col = source_position(prog_viz.lra, "X.T")
    assert nodes[(t_line, t_col, "T")]["mode"] == "inline"


def test_fused_kernels_on_big_inputs_run_in_the_calling_thread_of_the_local_pool():
    """A fused kernel spreads a big input over every core itself, so on the local pool a task would only add a
    hand-off between threads (LRA's loop: about 0.2 ms an iteration on 100,000 x 20): with value inputs it runs in
    the calling thread, where the unfused NumPy calls on the same inputs are tasks (the test above). Same answer."""
    X, y = _data(2 * BIG_ROWS)
    assert X.size >= 1 << 17  # the row product's own threshold (primitives/rowdot.py)
    f = px.compile(prog_viz.lra)
    with px.using(px.runtime.local(2)):
        with px.profile() as prof:
            got = f(X, y, 0.5, ITERATIONS)
    assert_same(got, prog_viz.lra(X, y, 0.5, ITERATIONS))
    fused = {d["primitive"]: d for d in prof.to_dict()["nodes"] if d["primitive"].startswith("fused")}
    assert sorted(fused) == ["fused", "fused_rowdot"]
    here = threading.current_thread().name
    for d in fused.values():
        assert (d["mode"], d["calls"], d["workers"]) == ("inline", ITERATIONS, [here]), d


def test_profile_lazy_call_is_recorded(runtime):
    X, y = _data(50)
    f = compiled(prog_viz.lra)
    with px.profile() as prof:
        fut = f.lazy(X, y, 0.5, ITERATIONS)
        got = fut.result(timeout=60)
    assert_same(got, prog_viz.lra(X, y, 0.5, ITERATIONS))
    nodes, mm, exp = check_lra_counts(f, prof)
    assert all(w.startswith("phylanx-driver") for d in nodes.values() for w in d["workers"])


def test_nothing_is_recorded_outside_a_profile_block(runtime):
    X, y = _data(50)
    f = compiled(prog_viz.lra)
    want = prog_viz.lra(X, y, 0.5, ITERATIONS)
    with px.profile() as prof:
        assert_same(f(X, y, 0.5, ITERATIONS), want)
    before = prof.to_dict()
    with px.profile() as second:
        pass
    assert_same(f(X, y, 0.5, ITERATIONS), want)  # after both blocks
    assert second.nodes == {} and second.to_dict() == {"nodes": [], "functions": [], "times": {
        "calls": 0, "wall_s": 0, "kernel_s": 0.0, "kernel_summed_s": 0, "overhead_s": 0.0}}
    assert prof.to_dict() == before  # the earlier profile did not grow
    check_lra_counts(f, prof)
    standalone = px.Profile()
    assert_same(f(X, y, 0.5, ITERATIONS), want)
    assert standalone.nodes == {} and standalone.programs == {}


# ---- 2. profiles on the Dask runtime (real scheduler and worker processes) ---------------------------------------
@pytest.fixture(scope="module")
def cluster():
    procs = DaskProcesses(n_workers=2)
    yield procs
    procs.stop()


def test_profile_on_dask(cluster):
    X, y = _data(BIG_ROWS)
    f = compiled(prog_viz.lra)
    # the local runtimes' inline limit (Dask's default is larger): BIG_ROWS-sized array calls become remote tasks
    with px.runtime.dask(cluster.address, inline_elements=1 << 16) as rt, px.using(rt):
        workers = set(live_workers(rt.executor.client))
        with px.profile() as prof:
            got = f(X, y, 0.5, ITERATIONS)
    assert len(workers) == 2
    np.testing.assert_allclose(got, prog_viz.lra(X, y, 0.5, ITERATIONS), rtol=1e-12)
    nodes, mm, exp = check_lra_counts(f, prof)
    here = threading.current_thread().name
    for d in nodes.values():
        if d["mode"] == "task":
            assert all(re.fullmatch(r"tcp://127\.0\.0\.1:\d+", w) for w in d["workers"]), d["workers"]
            assert set(d["workers"]) <= workers
        else:
            assert d["workers"] == [here]
    for d in (mm, exp):
        assert (d["mode"], d["tasks"]) == ("task", ITERATIONS)
        assert d["result_bytes"] == ITERATIONS * BIG_ROWS * 8
    t_line, t_col = source_position(prog_viz.lra, "X.T")
    assert nodes[(t_line, t_col, "T")]["workers"] == [here]


# ---- 3. drawings -----------------------------------------------------------------------------------------------------
def _svg_nodes(root) -> list[list[str]]:
    """The text lines of every node drawn in an SVG made by graphviz."""
    return [[t.text or "" for t in g.iter(f"{SVG}text")]
            for g in root.iter(f"{SVG}g") if g.get("class") == "node"]


def _dot_nodes(dot: str) -> dict[str, tuple[list[str], str]]:
    """node id -> (label lines, fill colour) from DOT text."""
    out = {}
    for m in re.finditer(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)", fillcolor="(#[0-9a-f]{6})"', dot, re.M):
        out[m.group(1)] = (m.group(2).split("\\n"), m.group(3))
    return out


def _expected_call_labels(tree) -> collections.Counter:
    return collections.Counter((label(n), f"line {n.loc.lineno}") for n in calls_in(tree))


def test_dot_file_is_to_dot(tmp_path):
    f = compiled(prog_viz.lra)
    out = f.visualize(tmp_path / "t.dot")
    assert out == str(tmp_path / "t.dot")
    assert (tmp_path / "t.dot").read_text() == f.to_dot()
    X, y = _data(50)
    with px.profile() as prof:
        f(X, y, 0.5, ITERATIONS)
    f.visualize(tmp_path / "p.dot", profile=prof)
    assert (tmp_path / "p.dot").read_text() == f.to_dot(prof)
    assert f.to_dot(prof) != f.to_dot()


def test_svg_png_pdf(tmp_path):
    f = compiled(prog_viz.lra)
    f.visualize(tmp_path / "t.svg")
    root = ET.parse(tmp_path / "t.svg").getroot()
    assert root.tag == f"{SVG}svg"
    drawn = _svg_nodes(root)
    assert len(drawn) == len(_dot_nodes(f.to_dot()))
    seen = collections.Counter((texts[0], texts[1]) for texts in drawn if len(texts) >= 2)
    for (name, line), n in _expected_call_labels(f.tree).items():
        assert seen[(name, line)] >= n, (name, line)
    assert ("__matmul", f"line {source_position(prog_viz.lra, 'X @ w')[0]}") in seen

    f.visualize(tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    f.visualize(tmp_path / "t.pdf")
    assert (tmp_path / "t.pdf").read_bytes()[:4] == b"%PDF"


def test_unknown_extension_raises(tmp_path):
    f = compiled(prog_viz.tiny)
    with pytest.raises(ValueError, match=r"\.svg"):
        f.visualize(tmp_path / "t.gif")
    assert not (tmp_path / "t.gif").exists()


def _cluster_body(dot: str, title: str) -> str:
    """The DOT text inside the subgraph labelled ``title`` (up to its closing brace)."""
    lines = dot.splitlines()
    (start,) = [i for i, s in enumerate(lines) if s.lstrip().startswith('subgraph "cluster_') and
                f'label="{title}"' in s]
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == " " * indent + "}")
    return "\n".join(lines[start + 1:end])


def test_loop_body_is_a_cluster():
    f = compiled(prog_viz.lra)
    dot = f.to_dot()
    for_line = source_position(prog_viz.lra, "for _ in")[0]
    assert f'label="for body, line {for_line}"' in dot
    inside = _dot_nodes(_cluster_body(dot, f"for body, line {for_line}"))
    inside_labels = collections.Counter((lines[0], lines[1]) for lines, _ in inside.values())
    want = _expected_call_labels(the_loop(f).body)
    for k, n in want.items():
        assert inside_labels[k] >= n, k
    zeros_line = source_position(prog_viz.lra, "np.zeros")[0]
    assert ("zeros", f"line {zeros_line}") not in inside_labels


def test_for_loop_iterable_is_drawn_outside_the_body_cluster():
    # ``range(iterations)`` is evaluated once, before the loop: it is not part of the body drawn as a cluster
    f = compiled(prog_viz.lra)
    for_line = source_position(prog_viz.lra, "for _ in")[0]
    inside = _dot_nodes(_cluster_body(f.to_dot(), f"for body, line {for_line}"))
    assert ["range", f"line {for_line}"] not in [lines[:2] for lines, _ in inside.values()]


def test_profile_colours_hot_nodes(tmp_path):
    f = compiled(prog_viz.branchy)
    x = np.linspace(0.0, 1.0, 1000)
    with px.profile() as prof:
        assert_same(f(x, True), prog_viz.branchy(x, True))
    dot = f.to_dot(prof)
    nodes = _dot_nodes(dot)
    stats = {(d["primitive"], f"line {d['line']}"): d for d in prof.to_dict()["nodes"]}
    sin_line = source_position(prog_viz.branchy, "np.sin")[0]
    cos_line = source_position(prog_viz.branchy, "np.cos")[0]
    mul_line = source_position(prog_viz.branchy, "y * 2.0")[0]
    assert set(stats) == {("sin", f"line {sin_line}"), ("__mul", f"line {mul_line}")}
    hottest = max(stats.values(), key=lambda d: d["total_s"])
    found = set()
    for lines, fill in nodes.values():
        k = tuple(lines[:2])
        if k in stats:
            d = stats[k]
            assert lines[2] == f"{d['total_s'] * 1e3:.2f} ms, {d['calls']}x {d['mode']}"
            assert fill != "#ffffff"
            if d is hottest:
                assert fill == "#990000"
            found.add(k)
        else:  # not run (the else branch) or not a primitive: white, no time
            assert fill == "#ffffff" and not any("ms" in s for s in lines[2:]), lines
    assert found == set(stats)
    assert ["cos", f"line {cos_line}"] in [lines for lines, _ in nodes.values()]

    f.visualize(tmp_path / "hot.svg", profile=prof)
    root = ET.parse(tmp_path / "hot.svg").getroot()
    for g in root.iter(f"{SVG}g"):
        texts = [t.text for t in g.iter(f"{SVG}text")]
        if g.get("class") == "node" and texts[:2] == ["sin", f"line {sin_line}"]:
            fills = {e.get("fill") for e in g if e.tag in (f"{SVG}ellipse", f"{SVG}path", f"{SVG}polygon")}
            assert fills and not fills & {"#ffffff", "white", "none"}, fills
            assert texts[2].endswith("ms, 1x inline")
            break
    else:
        raise AssertionError("no sin node in the SVG")


def test_without_graphviz_only_dot_works(tmp_path, monkeypatch):
    f = compiled(prog_viz.lra)
    X, y = _data(50)
    with px.profile() as prof:
        f(X, y, 0.5, ITERATIONS)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for ext in ("svg", "png", "pdf"):
        with pytest.raises(Exception) as info:
            f.visualize(tmp_path / f"t.{ext}")
        assert "'dot'" in str(info.value) and "graphviz" in str(info.value)
        assert not (tmp_path / f"t.{ext}").exists()
    f.visualize(tmp_path / "t.dot")
    assert (tmp_path / "t.dot").read_text() == f.to_dot()
    # the report still writes, saying why there is no drawing
    text = open(prof.to_html(tmp_path / "r.html"), encoding="utf-8").read()
    assert "<svg" not in text and "&#x27;dot&#x27;" in text and "<table" in text


# ---- 4. the HTML report ------------------------------------------------------------------------------------------
class _Dom(HTMLParser):
    """Rows of tables, the text lines of SVG nodes, and all text, from a (rendered) HTML document."""

    def __init__(self):
        super().__init__()
        self.rows: list[list[str]] = []
        self.nodes: list[list[str]] = []
        self.text: list[str] = []
        self._cell = self._node = self._svgtext = None
        self._gdepth = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self._cell = []
        elif tag == "g":
            self._gdepth += 1
            if "node" in (attrs.get("class") or "").split():
                self._node = ([], self._gdepth)
        elif tag == "text" and self._node is not None:
            self._svgtext = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "text" and self._svgtext is not None:
            self._node[0].append("".join(self._svgtext))
            self._svgtext = None
        elif tag == "g":
            if self._node is not None and self._node[1] == self._gdepth:
                self.nodes.append(self._node[0])
                self._node = None
            self._gdepth -= 1

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)
        if self._svgtext is not None:
            self._svgtext.append(data)


def _chromium(tmp_path, name, *args) -> subprocess.CompletedProcess:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is not installed: the HTML report test renders the report in headless Chromium "
                    "(apt-get install chromium)")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / ('chromium-' + name)}", *args]
    done = subprocess.run(cmd, capture_output=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done


@pytest.fixture
def report(tmp_path):
    f = compiled(prog_viz.lra)
    X, y = _data(50)
    with px.runtime.synchronous() as rt, px.using(rt), px.profile() as prof:
        f(X, y, 0.5, ITERATIONS)
    path = prof.to_html(tmp_path / "report.html")
    assert path == str(tmp_path / "report.html")
    return f, prof, path


def _source_lines():
    lines, first = inspect.getsourcelines(prog_viz.lra)
    return [(first + i, s.rstrip("\n")) for i, s in enumerate(lines)]


def _per_line_ms(prof) -> dict[int, str]:
    per_line: dict[int, float] = {}
    for d in prof.to_dict()["nodes"]:
        per_line[d["line"]] = per_line.get(d["line"], 0.0) + d["total_s"]
    return {line: f"{t * 1e3:.2f} ms" for line, t in per_line.items()}


def test_report_is_self_contained(report):
    f, prof, path = report
    text = open(path, encoding="utf-8").read()
    assert text.startswith("<!DOCTYPE html>")
    assert "<script" not in text.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert "<link" not in text.lower() and "@import" not in text and "url(" not in text
    assert "<svg" in text and "<?xml" not in text and "<table" in text
    for lineno, src in _source_lines():
        assert f"{lineno:4d}  {html.escape(src)}" in text, lineno
    for lineno, ms in _per_line_ms(prof).items():
        assert re.search(rf'<span class="t">{re.escape(ms)}</span><span[^>]*>\s*{lineno} ', text), (lineno, ms)


def test_report_renders_in_chromium(report, tmp_path):
    f, prof, path = report
    done = _chromium(tmp_path, "dom", "--dump-dom", f"file://{path}")
    dom = _Dom()
    dom.feed(done.stdout.decode("utf-8"))
    dom.close()
    # every primitive call node of the tree, with its line, is drawn in the rendered page
    seen = collections.Counter((texts[0], texts[1]) for texts in dom.nodes if len(texts) >= 2)
    for (name, line), n in _expected_call_labels(f.tree).items():
        assert seen[(name, line)] >= n, (name, line)
    assert len(dom.nodes) == len(_dot_nodes(f.to_dot(prof)))
    # every row of the table
    header, *rows = [r for r in dom.rows if r]
    assert header[:4] == ["node", "where", "function", "calls"]
    nodes = prof.to_dict()["nodes"]
    assert len(rows) == len(nodes)
    for row, d in zip(rows, nodes):
        assert row[0] == d["primitive"]
        assert row[1] == f"{PROG_BASE}:{d['line']}:{d['col']}"
        assert row[2] == d["function"] and row[3] == str(d["calls"])
        assert float(row[4]) == pytest.approx(d["total_s"] * 1e3, abs=6e-4)
        assert float(row[5]) == pytest.approx(d["mean_s"] * 1e3, abs=6e-4)
        assert float(row[6]) == pytest.approx(d["max_s"] * 1e3, abs=6e-4)
        assert row[7] == d["mode"] and row[8] == ", ".join(d["workers"]) and row[9] == str(d["moved_bytes"])
    # the source, with the time of each line
    text = "".join(dom.text)
    for lineno, src in _source_lines():
        assert f"{lineno:4d}  {src}" in text, lineno
    for lineno, ms in _per_line_ms(prof).items():
        assert re.search(rf"{re.escape(ms)}\s*{lineno} ", text), (lineno, ms)

    shot = tmp_path / "shot.png"
    _chromium(tmp_path, "shot", f"--screenshot={shot}", "--window-size=1200,2000", f"file://{path}")
    assert shot.exists()
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, len(data)


def test_visualize_html_without_profile(tmp_path):
    f = compiled(prog_viz.tiny)
    f.visualize(tmp_path / "t.html")
    text = (tmp_path / "t.html").read_text(encoding="utf-8")
    assert "<svg" in text and "Execution tree of tiny" in text and "<script" not in text


# ---- 5. the text view --------------------------------------------------------------------------------------------
def test_view_of_tiny_function():
    f = compiled(prog_viz.tiny)
    first = source_position(prog_viz.tiny, "def tiny")[0]
    a, r = first + 1, first + 2
    assert f.tree.view() == "\n".join([
        f"function tiny  ({PROG_BASE}:{first}:1)",
        f"  block  (line {a})",
        f"    assign  (line {a})",
        f"      c  (line {a})",
        f"      __add  (line {a})",
        f"        sin  (line {a})",
        f"          a  (line {a})",
        f"        b  (line {a})",
        f"    return  (line {r})",
        f"      __mul  (line {r})",
        f"        c  (line {r})",
        f"        2.0  (line {r})",
    ])


def test_view_has_one_line_per_node():
    f = compiled(prog_viz.lra)
    fn = f.tree.function("lra")
    lines = f.tree.view().splitlines()
    first = source_position(prog_viz.lra, "def lra")[0]
    assert lines[0] == f"function lra  ({PROG_BASE}:{first}:1)"
    # one line per node; an empty else block is not a node worth a line (the drawing leaves it out too)
    shown = [n for n in ir.walk(fn.body) if not (isinstance(n, ir.Block) and not n.stmts)]
    assert len(lines) == 1 + len(shown)
    assert all(re.fullmatch(r"( {2})+\S.*  \(line \d+\)", s) for s in lines[1:]), lines
    mm_line = source_position(prog_viz.lra, "X @ w")[0]
    assert f"                  __matmul  (line {mm_line})" in lines
    for_line = source_position(prog_viz.lra, "for _ in")[0]
    assert f"    for  (line {for_line})" in lines


def test_view_lines_are_the_nodes_source_lines():
    # every node shown under the function header sits on a line of the function's body, not on its ``def``
    f = compiled(prog_viz.lra)
    first = source_position(prog_viz.lra, "def lra")[0]
    last = source_position(prog_viz.lra, "return w")[0]
    shown = [int(m.group(1)) for m in re.finditer(r"\(line (\d+)\)", f.tree.view())]
    assert shown and all(first < n <= last for n in shown), [s for s in f.tree.view().splitlines()
                                                             if f"(line {first})" in s]


# ---- fused groups: named by their contents, timed as they run, the same names in text and drawing ---------------
def test_profile_of_fused_lra_names_groups_by_contents_and_times_what_runs(tmp_path):
    X, y = _data(40_000)  # 160,000 elements of X: the row-product kernel (from 2**17) and fused kernels run
    f = px.compile(prog_viz.lra)
    f(X, y, 0.5, 1)
    with px.profile() as prof:
        got = f(X, y, 0.5, ITERATIONS)
    assert_same(got, prog_viz.lra(X, y, 0.5, ITERATIONS))
    names = {d["name"]: d for d in prof.to_dict()["nodes"]}
    rowdot = names["fused_rowdot[T, matmul, neg, exp, add, truediv, sub]"]
    update = names["fused[mul, truediv, sub]"]
    assert rowdot["calls"] == update["calls"] == ITERATIONS and rowdot["primitive"] == "fused_rowdot"
    # what runs is the groups: none of their operations is a node of its own
    assert not {"exp", "__matmul", "__minus", "__div"} & set(names)
    t = prof.to_dict()["times"]
    assert t["calls"] == 1 and 0 < t["kernel_s"] <= t["wall_s"]
    assert t["overhead_s"] == pytest.approx(t["wall_s"] - t["kernel_s"])
    assert t["kernel_summed_s"] == pytest.approx(sum(d["total_s"] for d in prof.to_dict()["nodes"]))
    table = prof.table()
    assert table.startswith(f"wall {t['wall_s'] * 1e3:.1f} ms in 1 call of lra; kernels {t['kernel_s'] * 1e3:.1f} ms")
    assert "fused_rowdot[T, matmul, neg, exp, add, truediv, sub]" in table
    # the drawing names the groups the same way and draws their members; so does the text tree, with $i inputs
    f.visualize(tmp_path / "p.svg", profile=prof)
    texts = {t.text for t in ET.parse(tmp_path / "p.svg").iter(f"{SVG}text")}
    assert {"fused_rowdot[T, matmul, neg, exp, add, truediv, sub]", "fused[neg, exp, add, truediv]", "exp",
            "$0", "fused_rowdot kernel, line 9"} <= texts
    view = f.tree.view()
    assert "fused_rowdot[T, matmul, neg, exp, add, truediv, sub]  (line 9)" in view
    assert "fused[neg, exp, add, truediv]  (line 8)" in view and "$0  (line 8)" in view and "leaf" not in view
    page = prof.to_html(tmp_path / "p.html")
    assert "fused_rowdot[T, matmul, neg, exp, add, truediv, sub]" in open(page).read()
