"""Draw the LRA execution tree and profile it: writes lra_tree.svg, lra_profile.svg and lra_report.html.

    python examples/see_the_tree.py [OUTPUT_DIR]

Needs graphviz's ``dot`` program for the drawings (apt-get install graphviz); ``.dot`` output needs nothing.
"""
from __future__ import annotations

import os
import sys

import phylanx_py as px

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lra import lra, make_data  # noqa: E402


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    X, y = make_data()
    print(lra.tree.view())
    lra.visualize(os.path.join(out, "lra_tree.svg"))
    lra(X, y, 1.0, 1)  # the first call compiles the kernels: the profile below times runs, not compiling
    with px.profile() as prof:
        lra(X, y, 1.0, 50)
    print(prof.table())
    lra.visualize(os.path.join(out, "lra_profile.svg"), profile=prof)
    prof.to_html(os.path.join(out, "lra_report.html"))
    print(f"wrote lra_tree.svg, lra_profile.svg and lra_report.html in {os.path.abspath(out)}")


if __name__ == "__main__":
    main()
