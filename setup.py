"""Only the compiled parts live here; everything else is in pyproject.toml.

``optional=True``: where no C compiler is found the build goes on without the extension, and
fourfold uses the pure-Python code it speeds up (same results, slower).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("fourfold.reports._records_scan", ["fourfold/reports/_records_scan.c"], optional=True,
                  extra_compile_args=["-O2"]),
        Extension("fourfold.client._hotpath", ["fourfold/client/_hotpath.c"], optional=True,
                  extra_compile_args=["-O2"]),
    ],
)
