"""The ``phylanx-py`` command: ``run`` a script on a chosen runtime, ``profile`` it, draw a compiled function's
execution ``tree``, ``info`` about versions and workers. A ``PhylanxError`` ends a command as its message on stderr
(exit 1; ``PHYLANX_DEBUG=1`` keeps the traceback), Ctrl-C as exit 130, as ``pip`` and ``dask`` do."""
from __future__ import annotations

import argparse
import os
import platform
import runpy
import shutil
import sys
import textwrap

import phylanx_py as px
from phylanx_py.runtime.dask_runtime import check_workers


def _versions() -> dict:
    import importlib.metadata as md

    out = {"phylanx-py": None, "python": platform.python_version()}
    for name in ("phylanx-py", "numpy", "dask", "distributed", "numba"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _runtime(args):
    if args.scheduler:
        return px.runtime.dask(args.scheduler, timeout=args.timeout)
    if args.local_cluster:
        return px.runtime.dask(n_workers=args.local_cluster)
    return None


def _say(text: str) -> None:
    print(f"[phylanx-py] {text}", file=sys.stderr, flush=True)


def _dashboard(rt):
    """The Dask dashboard's address of ``rt`` (``rt.dashboard_link`` where the runtime has it), else None."""
    link = getattr(rt, "dashboard_link", None)
    if link is None:
        client = getattr(getattr(rt, "executor", None), "client", None)
        link = getattr(client, "dashboard_link", None)
    return link


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' if n != 1 else ''}"


def _where_work_ran(rt) -> str:
    """The end-of-run summary: how many tasks went to the workers (or the pool), the segments that ran there
    (parallel training, SPMD loops: one long-running rank per worker each), where the rest ran, and why."""
    c = {"fits": 0, "segments": 0, "ranks": 0, **rt.counts}
    remote = getattr(rt.executor, "client", None) is not None
    why = (f"scalar work, and arrays under the inline threshold of {rt.inline_elements:,} elements whose inputs "
           "were here or that measured cheaper than a task")
    what = _plural(c["calls"], "compiled call") + (f" and {_plural(c['fits'], 'parallel fit')}" if c["fits"] else "")
    kind = "primitive tasks" if c["segments"] else "tasks"
    text = f"{what}: {c['tasks']:,} {kind} ran {'on the workers' if remote else 'on the thread pool'}"
    if c["segments"]:
        text += (f", and {_plural(c['segments'], 'segment')} (parallel training, SPMD loops) ran there as "
                 f"{_plural(c['ranks'], 'long-running rank')}, each running many steps")
    text += "; "
    if remote and not c["tasks"] and not c["segments"]:
        return text + (f"the workers did nothing: every primitive ran inline in this process ({why}); "
                       "px.runtime.dask(..., inline_elements=0) sends all array work to them")
    return text + f"the other primitive calls ran inline in this process ({why})"


def cmd_run(args) -> int:
    own = [a for a in args.script_args if a.split("=", 1)[0] in _OWN_OPTIONS]
    if own:
        _say(f"note: {own[0]} after the script goes to the script (as with python -m); phylanx-py's options come "
             f"before it: phylanx-py {args.command} {own[0]} ... {args.script}")
    rt = _runtime(args)
    if rt is not None:
        link = _dashboard(rt)
        _say(f"running {args.script} on {rt!r}" + (f", dashboard {link}" if link else ""))
    previous = px.runtime.set_default(rt) if rt is not None else None
    sys.argv = [args.script] + list(args.script_args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(args.script)))  # as ``python SCRIPT`` does
    shown = rt or px.runtime.current()
    ended = False  # the script ran to its end (or its own sys.exit): then the summary, never after an error
    try:
        with px.using(shown):
            runpy.run_path(args.script, run_name="__main__")
        ended = True
    except SystemExit:
        ended = True
        raise
    finally:
        if ended and (shown.counts["calls"] or shown.counts.get("segments")):
            _say(_where_work_ran(shown))
        if rt is not None:
            px.runtime.set_default(previous)
            rt.close()
    return 0


def cmd_info(args) -> int:
    for name, version in _versions().items():
        print(f"{name:12} {version}")
    rt = _runtime(args)
    shown = rt or px.runtime.current()
    print(f"{'runtime':12} {shown!r}")
    if _dashboard(shown):
        print(f"{'dashboard':12} {_dashboard(shown)}")
    client = getattr(shown.executor, "client", None)
    if client is not None:
        for worker, version in sorted(check_workers(client).items()):
            print(f"{'worker':12} {worker} phylanx-py {version}")
    if rt is not None:
        rt.close()
    return 0


def _load_function(spec: str):
    """``path/to/script.py:function`` -> the function (compiled if it is plain), running the script's
    top level under a name other than ``__main__`` (its main block does not run)."""
    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise SystemExit(f"phylanx-py tree: expected SCRIPT:FUNCTION, got {spec!r}")
    namespace = runpy.run_path(path, run_name="__phylanx_tree__")
    if name not in namespace:
        raise SystemExit(f"phylanx-py tree: {path} defines no {name!r}")
    fn = namespace[name]
    return fn if isinstance(fn, px.CompiledFunction) else px.compile(fn)


def cmd_tree(args) -> int:
    out = args.output or f"{args.function.rpartition(':')[2]}.svg"
    if args.output is None and os.path.exists(out):
        raise SystemExit(f"phylanx-py tree: {os.path.abspath(out)} exists; give -o {out} to overwrite it, or "
                         "-o another path")
    fn = _load_function(args.function)
    if args.text:
        print(fn.tree.view())
    fn.visualize(out)
    print(f"wrote {os.path.abspath(out)}")
    return 0


def cmd_profile(args) -> int:
    with px.profile() as prof:
        cmd_run(args)
    print(prof.table())
    prof.to_html(args.output)
    print(f"wrote {args.output}")
    return 0


_OWN_OPTIONS = {"--scheduler", "--local-cluster", "--timeout"}
# name -> (what it does, in one line; more for its own --help, or None; an example), in ``--help``'s order
_SCRIPT_ARGS = "arguments after SCRIPT go to the script (as with python -m and mpirun)"
COMMANDS = {
    "run": ("run a Python script with compiled functions on a runtime", _SCRIPT_ARGS,
            "phylanx-py run --local-cluster 2 examples/lra.py --iterations 50"),
    "profile": ("run a script under px.profile(); print the table, write the HTML report", _SCRIPT_ARGS,
                "phylanx-py profile -o report.html examples/lra.py --iterations 50"),
    "tree": ("draw the execution tree of SCRIPT:FUNCTION (.svg/.png/.pdf/.dot/.html)",
             "the script's top level runs (its main block does not), and a plain function is compiled",
             "phylanx-py tree examples/lra.py:lra -o lra.svg"),
    "info": ("versions, the runtime, and the workers' phylanx-py versions", None,
             "phylanx-py info --scheduler tcp://127.0.0.1:8786"),
}
_DESCRIPTION = ("Run Python scripts whose functions are compiled with @px.compile on a runtime of your choice (the "
                "local thread pool, a Dask scheduler, or a local Dask cluster), profile them, draw a compiled "
                "function's execution tree, or show versions and workers. 'phylanx-py COMMAND --help' describes "
                "each command.")
_ERRORS = ("An error of phylanx-py's (a px.PhylanxError: a cluster that cannot be reached, a refused kernel "
           "cache, an error at a line of your script) ends the command with its message on stderr and exit status "
           "1; PHYLANX_DEBUG=1 shows the Python traceback too. Ctrl-C ends it with status 130.")


def _paragraphs(*texts: str) -> str:
    width = min(shutil.get_terminal_size().columns - 2, 100)  # as argparse wraps the rest
    return "\n\n".join(textwrap.fill(t, width) for t in texts)


def _parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter  # paragraphs and examples as written
    examples = "\n".join(f"  {example}" for _, _, example in COMMANDS.values())
    ap = argparse.ArgumentParser(prog="phylanx-py", formatter_class=raw, description=_paragraphs(_DESCRIPTION),
                                 epilog=f"examples:\n{examples}\n\n{_paragraphs(_ERRORS)}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (helptext, more, example) in COMMANDS.items():
        p = sub.add_parser(name, help=helptext, formatter_class=raw, epilog=f"example:\n  {example}",
                           description=_paragraphs(f"{helptext}; {more}" if more else helptext))
        if name == "tree":
            p.add_argument("function", metavar="SCRIPT:FUNCTION",
                           help="a script and a function it defines, as examples/lra.py:lra")
            p.add_argument("-o", "--output", help="the drawing to write, replaced if it exists (default "
                           "FUNCTION.svg in the current directory, never replaced)")
            p.add_argument("--text", action="store_true", help="also print the tree as indented text")
            continue
        where = p.add_mutually_exclusive_group()
        where.add_argument("--scheduler", metavar="ADDR", help="address of a running dask scheduler")
        where.add_argument("--local-cluster", metavar="N", type=int, help="start a LocalCluster of N workers")
        p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")
        if name == "profile":
            p.add_argument("-o", "--output", default="profile.html", help="the HTML report (default profile.html)")
        if name in ("run", "profile"):
            p.add_argument("script", metavar="SCRIPT", help="the Python script to run")
            p.add_argument("script_args", metavar="ARGS", nargs=argparse.REMAINDER,
                           help="the script's own arguments (everything after SCRIPT)")
    return ap


def _debug() -> bool:
    return os.environ.get("PHYLANX_DEBUG", "0") not in ("", "0")


def main(argv=None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(args, "script_args", [])[:1] == ["--"]:  # ``run SCRIPT -- ARGS``, as before: the same
        args.script_args = args.script_args[1:]
    run = {"run": cmd_run, "info": cmd_info, "tree": cmd_tree, "profile": cmd_profile}[args.command]
    try:
        return run(args)
    except KeyboardInterrupt:
        if _debug():
            raise
        return 130  # 128 + SIGINT, quietly, as a shell reports it
    except px.PhylanxError as e:
        if _debug():
            raise
        # its message, whole: one line, followed by the source lines it shows when it names a line of the script
        print(f"phylanx-py {args.command}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
