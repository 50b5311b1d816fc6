"""The one thing pyproject.toml cannot say: textnb._speedups, a C extension that is
optional. Without a C compiler (or Python's headers) the build skips it and textnb
runs the same loops in Python (textnb/speedups.py), slower, with the same results."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("textnb._speedups", ["textnb/_speedups.c"], optional=True)])
