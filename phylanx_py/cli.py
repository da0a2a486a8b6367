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
    client = getattr(shown.executor, "client", None)
    if client is not None:
        from phylanx_py.runtime.dask_runtime import check_workers

        for worker, version in sorted(check_workers(client).items()):
            print(f"{'worker':12} {worker} phylanx-py {version}")
    if rt is not None:
        rt.close()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="phylanx-py", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    for name, helptext in (("run", "run a Python script with compiled functions on a runtime"),
                           ("info", "versions, the runtime, and the workers' phylanx-py versions")):
        p = sub.add_parser(name, help=helptext)
        where = p.add_mutually_exclusive_group()
        where.add_argument("--scheduler", metavar="ADDR", help="address of a running dask scheduler")
        where.add_argument("--local-cluster", metavar="N", type=int, help="start a LocalCluster of N workers")
        p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the scheduler")
        if name == "run":
            p.add_argument("script")
    # ``run SCRIPT [--scheduler ADDR | --local-cluster N] [-- script args]``: options may follow the script;
    # everything after ``--`` belongs to the script.
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    args = ap.parse_args(argv)
    args.script_args = script_args
    return {"run": cmd_run, "info": cmd_info}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
