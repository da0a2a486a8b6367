"""Every ```python block of README.md and of each docs/*.md page runs as written, in order, in one namespace per
page (as a reader pastes them).

A block preceded by the line ``<!-- not run: reason -->`` is skipped; the pages use it only for snippets that
need a cluster at a fixed address. Each page's blocks run as one script in a subprocess (``@px.compile`` reads the
source of the functions it compiles, so they must live in a file), in a temporary directory (the files they
write land there).

The samples of output are checked against what the code prints (the tree, the CompileError and ExecutionError
tracebacks, lu's explain(), the profile's headline, the quick start's output), with ``…`` or ``...`` where a
sample leaves out what varies, on the page each sample lives on; every time, ratio or percentage on README.md,
docs/*.md and benchmarks/README.md is the code's own value, a target, or named with the command that printed it
and the load. The README keeps the quick-start commands CI runs, stays a front page, and links every docs page
from its map of the docs; every relative link of these pages leads to a file (and heading) that exists.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = re.compile(r"<!--\s*not run:.*-->")


def doc_pages() -> list[str]:
    """Every docs/*.md page, as a path from the repository root."""
    docs = os.path.join(ROOT, "docs")
    return sorted(f"docs/{n}" for n in os.listdir(docs) if n.endswith(".md")) if os.path.isdir(docs) else []


PAGES = ["README.md", *doc_pages()]  # the pages whose snippets run and whose figures are checked
# The pages the samples checked below live on (each test reads its sample there).
LANGUAGE = "docs/language.md"  # the supported subset: the CompileError and ExecutionError samples
TREES = "docs/trees-and-profiles.md"  # how to read a tree, and the profile's headline
TIERS = "docs/tiers.md"  # the native tier: lu's explain()
MACHINE = "README.md#where-the-figures-come-from"  # where "this machine" is said, linked from every docs page using it


def readme_blocks(page="README.md"):
    """[(first line number, code, skipped)] of every ```python block of ``page`` (a path from the repository root)."""
    lines = open(os.path.join(ROOT, page), encoding="utf-8").read().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start = i + 1
            j = start
            while lines[j].strip() != "```":
                j += 1
            prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            blocks.append((start + 1, "\n".join(lines[start:j]), bool(SKIP.search(prev))))
            i = j
        i += 1
    return blocks


def test_the_extractor_sees_the_blocks_and_the_marker():
    blocks = [block for page in PAGES for block in readme_blocks(page)]
    assert len(blocks) >= 5
    skipped = [code for _, code, skip in blocks if skip]
    # only snippets that talk to a cluster at a fixed address are not run
    assert skipped and all("tcp://127.0.0.1:8786" in code for code in skipped)


@pytest.mark.parametrize("page", PAGES)
def test_readme_python_blocks_run_as_written(tmp_path, page):
    out: list[str] = []
    for lineno, code, skip in readme_blocks(page):
        if not skip:
            out += [""] * (lineno - 1 - len(out))  # so a traceback's line numbers are the page's
            out += code.splitlines()
    if not out:
        return  # a page without snippets to run
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n".join(out) + "\n")
    env = {**os.environ, "PHYLANX_PROGRESS": "0"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, f"{page} block failed (line numbers are {page}'s):\n{done.stderr[-4000:]}"


def test_readme_sample_tree_is_what_the_example_prints():
    import runpy

    readme = readme_text(TREES)
    start = readme.index("```\ndefine(lra, lambda(X, y, alpha, iterations),") + 4
    sample = readme[start:readme.index("```", start)].rstrip()
    lra = runpy.run_path(os.path.join(ROOT, "examples", "lra.py"), run_name="example")["lra"]
    printed = str(lra.tree).replace(os.path.join(ROOT, "examples"), "/home/me/examples")
    assert sample == printed


# --- what the pages say about themselves, and their samples of output ------------------------------------------------

NUMBER_WORDS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())}


def readme_text(name="README.md") -> str:
    return open(os.path.join(ROOT, name), encoding="utf-8").read()


def fenced_blocks(text) -> list[tuple[str, str]]:
    """[(info string, body)] of every ``` block of ``text``."""
    return re.findall(r"^```(\S*)\n(.*?)^```$", text, flags=re.M | re.S)


def prose_of(text) -> str:
    """``text`` without its fenced blocks, on one line."""
    return re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S).replace("\n", " ")


@pytest.mark.parametrize("page", PAGES)
def test_a_count_of_the_snippets_not_run_is_right_or_not_stated(page):
    """The README once said "the three that need a scheduler" when four did: a count a page states of the snippets
    that are not run ("N [snippets] that/which need ...", "N [snippets] [are] marked") must be the extractor's:
    the page's own, or in the README (which speaks for the docs too) the page's or all pages' (today none is
    stated)."""
    skipped = sum(skip for _, _, skip in readme_blocks(page))
    everywhere = sum(skip for p in PAGES for _, _, skip in readme_blocks(p))
    prose = prose_of(readme_text(page))
    if page == "README.md":
        assert "`<!-- not run: ... -->`" in prose, "the README no longer says how snippets that are not run are marked"
    count = r"\b(\d+|" + "|".join(NUMBER_WORDS) + r")\s+(?:\w+\s+)?(?:(?:that|which)\s+need|(?:are\s+)?marked)\b"
    for m in re.finditer(count, prose, flags=re.I):
        word = m.group(1)
        stated = int(word) if word.isdigit() else NUMBER_WORDS[word.lower()]
        assert stated == skipped or (page == "README.md" and stated == everywhere), \
            f"{page} says {m.group(0)!r}; {skipped} snippets are not run there ({everywhere} on all pages)"


def _run_bad(tmp_path, what):
    """``python bad.py WHAT`` (tests/test_newcomer.py's script) in ``tmp_path``: its stderr, with the paths the
    README shortens shortened (the script's folder is /home/me; phylanx-py's files are .../phylanx_py/...)."""
    from test_newcomer import BAD

    script = tmp_path / "bad.py"
    script.write_text(BAD)
    env = {k: v for k, v in os.environ.items() if k != "PHYLANX_DEBUG"}
    done = subprocess.run([sys.executable, str(script), what], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    err = done.stderr.replace(str(tmp_path), "/home/me")
    return re.sub(r'File "[^"]*?/(phylanx_py/[^"]+)"', r'File ".../\1"', err)


def _without_python_underlines(err: str) -> str:
    """``err`` without the ``^^^^``/``~~~~`` lines Python 3.11+ prints under a frame's expression (their form
    changes between versions; 3.10 prints none). Only the frames' are dropped: the ``^`` under the column in a
    CompileError's message, after the exception line, is phylanx-py's and stays."""
    lines, out, in_frames = err.splitlines(), [], True
    for line in lines:
        if in_frames and re.fullmatch(r"\s+[\^~][\^~ ]*", line):
            continue
        if line.startswith("Traceback"):
            in_frames = True
        elif line and not line.startswith(" "):
            in_frames = False  # the exception's own line: what follows is its message
        out.append(line)
    return "\n".join(out)


def _sample_after(readme: str, marker: str) -> str:
    """The body of the first ``` block whose body contains ``marker``."""
    found = [body for _, body in fenced_blocks(readme) if marker in body]
    assert found, f"no sample containing {marker!r} on its page"
    return found[0].rstrip("\n")


def test_readme_compile_error_sample_is_what_bad_py_prints(tmp_path):
    """The sample's frames of decorator.py once named lines 147 and 109 long after they moved: it is checked here,
    whole, against what the code prints today."""
    sample = _sample_after(readme_text(LANGUAGE), "phylanx_py.errors.CompileError:")
    printed = _without_python_underlines(_run_bad(tmp_path, "compile")).rstrip("\n")
    assert sample == printed, (f"{LANGUAGE}'s CompileError sample is not what `python bad.py compile` prints; "
                               f"replace it with:\n{printed}")


def _matches_with_elisions(sample: str, printed: str) -> bool:
    """Every line of ``sample`` is a line of ``printed``, in order; a sample line ``...`` (any indentation) stands
    for any number of lines, and a line ending in ``...`` for any line starting with what precedes it."""
    want, got = sample.splitlines(), printed.splitlines()

    def match(i, j):
        if i == len(want):
            return j == len(got)
        w = want[i]
        if w.strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        if j == len(got):
            return False
        ok = got[j].startswith(w[:-3]) if w.endswith("...") else got[j] == w
        return ok and match(i + 1, j + 1)

    return match(0, 0)


def test_readme_execution_error_sample_is_what_bad_py_prints(tmp_path):
    sample = _sample_after(readme_text(LANGUAGE), "phylanx_py.errors.ExecutionError:")
    printed = _without_python_underlines(_run_bad(tmp_path, "run"))
    # Python 3.13 also prints the generated line under the <phylanx ...> frame; 3.10-3.12 print only its name
    printed = re.sub(r'(  File "<phylanx [^\n]*\n)    [^\n]*# bad\.py:\d+: [^\n]*\n', r"\1", printed)
    assert _matches_with_elisions(sample, printed), \
        f"{LANGUAGE}'s ExecutionError sample:\n{sample}\nprinted:\n{printed}"


def _pattern(text: str) -> re.Pattern:
    """``text`` as a regular expression in which ``…`` stands for anything (what varies from run to run)."""
    return re.compile(".*?".join(re.escape(part) for part in text.split("…")))


def _comment_lines(lines: list[str]) -> list[str]:
    """README comment lines (``# ...``) with their continuations (``#   ...``) joined by one space."""
    out: list[str] = []
    for line in lines:
        body = line[2:] if line.startswith("# ") else line[1:]
        if line.startswith("#   ") and out:
            out[-1] += " " + body.strip()
        else:
            out.append(body)
    return out


@pytest.mark.timeout(600)
def test_readme_explain_sample_for_lu_is_what_explain_prints(tmp_path):
    """The lu snippet, saved as lu.py and run; its explain() before and after the background compiles, against the
    README's comment lines, ``…`` standing for times and counts."""
    code = next(code for _, code, _ in readme_blocks(TIERS) if "def lu(A):" in code)
    head, comments = code.split("print(f.explain())\n")
    lines = comments.splitlines()
    later = next(i for i, line in enumerate(lines) if line.startswith("# and, a few calls later"))
    end = next(i for i, line in enumerate(lines) if line.startswith("# a loop that prints"))
    first, second = _comment_lines(lines[:later]), _comment_lines(lines[later + 1:end])
    script = tmp_path / "lu.py"
    script.write_text(head + textwrap.dedent("""\
        print(f.explain())
        print("----")
        import time
        def settled(lines):  # every kernel native, and the analysis of its threads done (just after its compile)
            return all("-> native (" in x and ("; sequential: " in x or " may run on " in x) for x in lines)

        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and not settled(f.explain().splitlines()):
            f(A.copy())
            time.sleep(0.01)
        f(A.copy())
        print(f.explain())
        """))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHYLANX_NATIVE")}
    # an empty kernel cache, as the sample's first run has (a kernel built ahead of time by an earlier run of it
    # is native from the first call: runtime/native/aot.py)
    env["PHYLANX_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=500,
                          env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    before, after = (part.strip("\n").splitlines() for part in done.stdout.split("----\n"))
    for want, got in ((first, before), (second, after)):
        assert len(want) == len(got) and all(_pattern(w).fullmatch(g) for w, g in zip(want, got)), \
            f"{TIERS} says:\n" + "\n".join(want) + "\nexplain() printed:\n" + "\n".join(got)


def test_readme_profile_headline_is_what_a_profile_prints():
    import runpy

    import numpy as np

    import phylanx_py as px

    readme = readme_text(TREES).replace("\n", " ")
    headline = re.search(r"the table starts with a headline, `(wall [^`]*)`", readme).group(1)
    example = runpy.run_path(os.path.join(ROOT, "examples", "lra.py"), run_name="example")
    X, y = example["make_data"](2000, 5)
    lra = example["lra"]
    lra(X, y, 0.1, 5)
    with px.profile() as prof:
        lra(X, y, 0.1, 5)
    table = prof.table()
    assert _pattern(headline).fullmatch(table.splitlines()[0]), (headline, table)
    group = re.search(r"named by its contents in the order they are computed, `(fused_rowdot\[[^`]*\])`", readme)
    assert group and re.sub(r"\s+", " ", group.group(1)) in table, table
    assert np.isfinite(lra(X, y, 0.1, 5)).all()


def test_readme_quick_start_sample_has_the_form_examples_quickstart_prints():
    """The quick start's output sample, its figures aside, is what ``python examples/quickstart.py`` prints (run
    small; it waits for the native kernel as the quick start does)."""
    sample = _sample_after(readme_text(), "SOR relaxation: 150 x 150 grid")
    env = {k: v for k, v in os.environ.items() if k != "PHYLANX_NATIVE"}  # the default tiers, as a newcomer has
    done = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "quickstart.py"), "--size", "40",
                           "--sweeps", "2", "--repeats", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    number = r"[0-9][0-9,.]*(?:e[-+]?[0-9]+)?"
    for want, got in zip(sample.splitlines(), done.stdout.splitlines(), strict=True):
        want, got = re.sub(" +", " ", want), re.sub(" +", " ", got)  # columns are aligned to the figures' widths
        parts = re.split(number + r"|faster|slower|<[^>]*>", want)
        pattern = re.compile(f"(?:{number}|faster|slower|<[^>]*>)".join(re.escape(p) for p in parts))
        assert pattern.fullmatch(got), (want, got)


# --- every figure comes with the command that printed it, and the load it ran under -------------------------------

# A time, a ratio or a percentage: "50 ms", "0.2 ms", "1.07x", "0.87-1.01x", "3.7×", "10%", "1.6 GB/s".
FIGURE = re.compile(r"(?<![\w.*])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?(?:\s?(?:ns|µs|us|ms|s|seconds?|minutes?)\b|[x×](?!\w)"
                    r"|%|\s?[GM]B/s\b)")
# Figures that are the code's own values, not measurements: each allowed only in its phrase (checked below).
CODE_VALUES = {
    "has run 50 ms interpreted": "runtime/native/loop.py HOT_SECONDS: a loop compiles once it ran this long",
    "a mean under 200 µs": "runtime/evaluation.py CHEAP_SECONDS: a call site this cheap runs inline",
    "switch interval is 0.2 ms": "runtime/native/loop.py COMPILE_SWITCH_INTERVAL, while a compile runs",
    "with the default 5 ms": "CPython's default switch interval (sys.getswitchinterval())",
    "under 20 µs it stays": "runtime/native/tuning.py MIN_SECONDS: a shorter call stays sequential",
    "2 in flight, 3.1 s": "a sample of the progress line's form (runtime/progress.py)",
    "a connection within 5 s sends": "runtime/segments/service.py CONNECT_SECONDS: a worker port's connect timeout",
    "a dead worker's port for 30 s": "Dask's default connect timeout (distributed.comm.timeouts.connect)",
}
COMMAND = re.compile(r"`(?:python|phylanx-py) [^`]+`")


def figure_units(text: str):
    """The pieces of ``text`` a figure must be explained within: each paragraph, or each item of a list (its lead-in
    paragraph apart), or each row of a table with the table's header row. Fenced blocks are left out: their
    samples are checked by the tests above or carry ``…`` for what varies."""
    prose = re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S)
    for block in re.split(r"\n\s*\n", prose):
        lines = block.strip("\n").splitlines()
        if lines and all(line.startswith("|") for line in lines):
            for row in lines[2:]:
                yield lines[0] + "\n" + row
            continue
        item: list[str] = []
        for line in lines:
            if line.startswith("- ") and item:
                yield "\n".join(item)
                item = []
            item.append(line)
        if item:
            yield "\n".join(item)


def unexplained_figures(text: str) -> list[str]:
    found = []
    for unit in figure_units(text):
        unit = re.sub(r"\s+", " ", unit)
        for phrase in CODE_VALUES:
            unit = unit.replace(phrase, "")  # the code's values, where the page gives them as such
        for m in FIGURE.finditer(unit):
            figure = m.group(0)
            if unit[max(0, m.start() - 2):m.start()].strip() in ("≤", "≥"):
                continue  # a target ("≤ 1.5× NumPy")
            if not (COMMAND.search(unit) and re.search(r"\bload\b", unit)):
                found.append(f"{figure!r} in: {unit!r}")
    return found


@pytest.mark.parametrize("page", [*PAGES, "benchmarks/README.md"])
def test_every_figure_names_its_command_and_load(page):
    """A time, ratio or percentage on the page is the code's own value (CODE_VALUES), a target, or a measurement
    given in the same paragraph, list item or table row (with its header) as the command that printed it
    (`python ...`, `phylanx-py ...`) and the load it ran under; the README says which machine ("this machine"),
    and a docs page that speaks of this machine links to where the README says it."""
    text = readme_text(page)
    assert unexplained_figures(text) == []
    if page == "README.md":
        assert "\"This machine\" is the project's own:" in text
    elif page.startswith("docs/") and re.search(r"\bthis machine\b", text, flags=re.I):
        assert f"](../{MACHINE})" in text, f"{page} speaks of this machine without linking ../{MACHINE}"


def test_the_figures_that_are_code_values_are_the_codes():
    from phylanx_py.runtime import evaluation
    from phylanx_py.runtime.native import background, tiering, tuning

    assert (tiering.HOT_SECONDS, evaluation.CHEAP_SECONDS, background.COMPILE_SWITCH_INTERVAL, tuning.MIN_SECONDS) == \
        (50e-3, 200e-6, 0.2e-3, 20e-6)
    import dask
    import distributed  # noqa: F401 - loads Dask's distributed.* configuration
    from phylanx_py.runtime.segments import service

    assert service.CONNECT_SECONDS == 5.0 and dask.config.get("distributed.comm.timeouts.connect") == "30s"
    fresh = subprocess.run([sys.executable, "-c", "import sys; print(sys.getswitchinterval())"], capture_output=True,
                           text=True, timeout=60)  # (this process's may be lowered while a native compile runs)
    assert float(fresh.stdout) == 0.005
    pages = {page: re.sub(r"\s+", " ", readme_text(page)) for page in PAGES}
    missing = [phrase for phrase in CODE_VALUES if not any(phrase in text for text in pages.values())]
    assert not missing, f"CODE_VALUES lists phrases README.md and docs/ no longer have: {missing}"


def test_the_figure_check_catches_a_figure_without_its_command():
    assert unexplained_figures("NumPy's BLAS passes are fast: 1.19x faster here.\n")
    assert unexplained_figures("| script | ratio |\n|---|---|\n| `lra.py` | 3.7x faster |\n")
    assert not unexplained_figures("`python examples/lra.py` printed 1.07x faster (load 0.6).\n")
    assert not unexplained_figures("| a | `python x.py`, load average 0.6 |\n|---|---|\n| `lra.py` | 3.7x faster |\n")
    assert not unexplained_figures("| script | target |\n|---|---|\n| `lra.py` | ≤ 1.5× NumPy |\n")
    assert unexplained_figures("A call costs about 5 ms on this machine.\n")  # a code value's figure, elsewhere
    assert not unexplained_figures("with the default\n5 ms the busy interpreter starved the compile\n")


# --- the README is a front page: the quick start, a first example, a map of docs/; links lead somewhere --------

QUICK_START = ('pip install -e . && python examples/quickstart.py', 'pip install -e ".[test]" && python -m pytest -q')
FRONT_PAGE_LINES = 300  # what a newcomer reads first; the rest belongs on a docs page
MAP = "## The documentation"  # the README's map of the docs


def test_the_readme_has_the_quick_start_commands_ci_runs():
    """.ci/run runs these two commands and fails when the README no longer says them verbatim; so does this test,
    before CI does."""
    readme, ci = readme_text(), readme_text(".ci/run")
    for command in QUICK_START:
        assert command in readme and command in ci, command


def test_the_readme_is_a_front_page():
    lines = readme_text().splitlines()
    assert len(lines) <= FRONT_PAGE_LINES, (f"README.md has {len(lines)} lines: move what a newcomer does not need "
                                            f"first to a docs/ page (and link it from {MAP!r})")


def _without_code(text: str) -> str:
    """``text`` without fenced blocks and inline code spans (where ``[a](b)`` is code, not a link)."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S))


def links(text: str) -> list[str]:
    """The targets of the page's Markdown links, ``[text](target)``, outside code."""
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", _without_code(text))


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as hyphens, and
    ``-1``, ``-2`` ... on repeats."""
    seen: dict[str, int] = {}
    for line in re.sub(r"^```.*?^```$", "", text, flags=re.M | re.S).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            yield slug if n == 0 else f"{slug}-{n}"


def broken_links(page: str) -> list[str]:
    """The relative links of ``page`` (a path from the repository root) that lead to no file, or to a heading the
    file does not have."""
    text, broken = readme_text(page), []
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...
        path, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(os.path.join(ROOT, where)):
            broken.append(f"{target} (no file {where})")
        elif anchor and where.endswith(".md") and anchor not in set(heading_anchors(readme_text(where))):
            broken.append(f"{target} (no heading #{anchor} in {where})")
    return broken


@pytest.mark.parametrize("page", [*PAGES, "benchmarks/README.md"])
def test_every_relative_link_leads_to_a_file(page):
    assert broken_links(page) == []


def test_the_readme_maps_every_docs_page():
    """Every docs/*.md page, and benchmarks/README.md, is linked from the README's map of the docs."""
    readme = readme_text()
    assert MAP + "\n" in readme, f"README.md has no {MAP!r} section"
    section = readme.split(MAP + "\n", 1)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    mapped = {os.path.normpath(target.partition("#")[0]) for target in links(section)}
    missing = [page for page in [*doc_pages(), "benchmarks/README.md"] if page not in mapped]
    assert not missing, f"{MAP!r} in README.md does not link {missing}"


# "(docs/clusters.md: What to know when you use a cluster)", 'README: "Quick start"' in messages and docstrings
SECTION_REFERENCE = re.compile(r'\b(README(?:\.md)?|docs/[\w-]+\.md):\s+"?([A-Z][^"\n]*?)"?(?=[)."]|\s+gives\b)')


def test_the_code_names_pages_and_headings_that_exist():
    """An error message or docstring that sends the reader to a page's section names a page and a heading that
    exist (they once said "README: Running on a cluster" after the section had grown and was to move)."""
    import glob

    found, broken = 0, []
    for path in sorted(glob.glob(os.path.join(ROOT, "*", "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(("tests", "build")):
            continue
        text = open(path, encoding="utf-8").read()
        for m in SECTION_REFERENCE.finditer(re.sub(r'"\s*\n\s*"', "", text)):  # adjacent literals joined
            found += 1
            page = "README.md" if m.group(1).startswith("README") else m.group(1)
            slug = next(heading_anchors("## " + m.group(2)))
            if not os.path.exists(os.path.join(ROOT, page)) or slug not in set(heading_anchors(readme_text(page))):
                broken.append(f"{rel}: {m.group(0)!r}")
    assert found >= 3 and not broken, broken


def test_the_link_check_catches_what_it_should():
    assert links("[a](docs/x.md) `[b](c)` [d](https://e.org/)\n```\n[f](g)\n```\n") == ["docs/x.md", "https://e.org/"]
    assert list(heading_anchors("# A page\n## Tiers and `explain()`\n## Loops: the native tier\n## A page\n"
                                "```\n# not a heading\n```\n")) == \
        ["a-page", "tiers-and-explain", "loops-the-native-tier", "a-page-1"]
    assert broken_links("README.md") == []
