"""The one thing pyproject.toml cannot say: textnb._c._speedups, a C extension that is
optional. Without a C compiler (or Python's headers) the build skips it and textnb
runs the same loops in Python (textnb/_c/speedups.py), slower, with the same results."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("textnb._c._speedups", ["textnb/_c/_speedups.c"], optional=True)])
