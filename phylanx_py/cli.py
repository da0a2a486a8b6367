"""The ``phylanx-py`` command: ``run`` a script on a chosen runtime, ``info`` about versions and workers."""
from __future__ import annotations

import argparse
import platform
import runpy
import sys


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
    import phylanx_py as px

    if args.scheduler:
        return px.runtime.dask(args.scheduler, timeout=args.timeout)
    if args.local_cluster:
        return px.runtime.dask(n_workers=args.local_cluster)
    return None


def cmd_run(args) -> int:
    import phylanx_py as px

    rt = _runtime(args)
    previous = px.runtime.set_default(rt) if rt is not None else None
    sys.argv = [args.script] + list(args.script_args)
    try:
        with px.using(rt or px.runtime.current()):
            runpy.run_path(args.script, run_name="__main__")
    finally:
        if rt is not None:
            px.runtime.set_default(previous)
            rt.close()
    return 0


def cmd_info(args) -> int:
    for name, version in _versions().items():
        print(f"{name:12} {version}")
    rt = _runtime(args)
    import phylanx_py as px

    shown = rt or px.runtime.current()
    print(f"{'runtime':12} {shown!r}")
    if getattr(shown, "dashboard_link", None):
        print(f"{'dashboard':12} {shown.dashboard_link}")
    client = getattr(shown.executor, "client", None)
    if client is not None:
        from phylanx_py.runtime.dask_runtime import check_workers

        for worker, version in sorted(check_workers(client).items()):
            print(f"{'worker':12} {worker} phylanx-py {version}")
    if rt is not None:
        rt.close()
    return 0


def _load_function(spec: str):
    """``path/to/script.py:function`` -> the function (compiled if it is plain), running the script's
    top level under a name other than ``__main__`` (its main block does not run)."""
    import phylanx_py as px

    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise SystemExit(f"phylanx-py tree: expected SCRIPT:FUNCTION, got {spec!r}")
    namespace = runpy.run_path(path, run_name="__phylanx_tree__")
    if name not in namespace:
        raise SystemExit(f"phylanx-py tree: {path} defines no {name!r}")
    fn = namespace[name]
    return fn if isinstance(fn, px.CompiledFunction) else px.compile(fn)


def cmd_tree(args) -> int:
    fn = _load_function(args.function)
    if args.text:
        print(fn.tree.view())
    out = args.output or f"{args.function.rpartition(':')[2]}.svg"
    fn.visualize(out)
    print(f"wrote {out}")
    return 0


def cmd_profile(args) -> int:
    import phylanx_py as px

    with px.profile() as prof:
        cmd_run(args)
    print(prof.table())
    prof.to_html(args.output)
    print(f"wrote {args.output}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="phylanx-py", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    tree = sub.add_parser("tree", help="draw the execution tree of SCRIPT:FUNCTION (.svg/.png/.pdf/.dot/.html)")
    tree.add_argument("function", metavar="SCRIPT:FUNCTION")
    tree.add_argument("-o", "--output", help="the drawing to write (default FUNCTION.svg)")
    tree.add_argument("--text", action="store_true", help="also print the tree as indented text")
    for name, helptext in (("run", "run a Python script with compiled functions on a runtime"),
                           ("profile", "run a script under px.profile(); print the table, write the HTML report"),
                           ("info", "versions, the runtime, and the workers' phylanx-py versions")):
        p = sub.add_parser(name, help=helptext)
        where = p.add_mutually_exclusive_group()
        where.add_argument("--scheduler", metavar="ADDR", help="address of a running dask scheduler")
        where.add_argument("--local-cluster", metavar="N", type=int, help="start a LocalCluster of N workers")
        p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")
        if name in ("run", "profile"):
            p.add_argument("script")
        if name == "profile":
            p.add_argument("-o", "--output", default="profile.html", help="the HTML report (default profile.html)")
    # ``run SCRIPT [--scheduler ADDR | --local-cluster N] [-- script args]``: options may follow the script;
    # everything after ``--`` belongs to the script.
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    args = ap.parse_args(argv)
    args.script_args = script_args
    return {"run": cmd_run, "info": cmd_info, "tree": cmd_tree, "profile": cmd_profile}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
