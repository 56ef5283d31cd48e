"""Builds the compiled topology scorer; everything else is declared in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

# Three modules over one set of types (scorer/_types.pxd): phase 1 counts, phase 2 placement,
# and the Python edge that validates and calls them; `_native` is the kube-scheduler's PodGroup mode. Ordering helpers are inlined (_order.pxd).
# `_build` is the snapshot build: `_columns` reads the nodes into integer columns, `_layout` makes
# the tree's shape from them without the GIL (its contract: scorer/_layout.pxd).
extensions = [
    Extension(name, [f"scorer/{name.split('.')[1]}.pyx"], extra_compile_args=["-O3"])
    for name in (
        "scorer._counts", "scorer._place", "scorer._core", "scorer._native",
        "scorer._columns", "scorer._layout", "scorer._build",
    )
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "initializedcheck": False,
            "cdivision": True,
            "nonecheck": False,
        },
    )
)
