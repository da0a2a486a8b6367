"""Functions that import what they use inside their body (``import numpy as np`` in a kernel, as NPBench's and many
users' code does); this module's own globals have no ``np``."""
from __future__ import annotations

import numpy as _numpy

TABLE = _numpy.arange(4.0)


def local_import_numpy(x):
    import numpy as np

    return np.exp(x).sum() + np.pi


def local_from_imports(x):
    from math import pi, sqrt

    from numpy import linalg as la

    return sqrt(2.0) * pi + la.norm(x)


def local_import_submodule(x):
    import numpy.linalg

    return numpy.linalg.norm(x) + numpy.sum(x)


def local_import_loop(a):
    import numpy as np

    out = np.zeros_like(a)
    for i in range(1, a.shape[0]):
        out[i] = out[i - 1] + np.sqrt(a[i]) * 0.5
    return out


def local_import_module_data(x):
    from prog_imports import TABLE as table

    return x * table


def local_import_in_nested_function(x):
    import numpy as np

    def inner(v):
        return np.maximum(v, 0.0)

    return inner(x - 1.0) + np.array([inner(v) for v in x])
