"""The textnb command line: one module per command, thin typer wrappers over ``textnb.commands``.

Every module in this package that does not start with ``_`` defines commands on
``app`` and is imported here, so a new command is a new file. The command modules
import the heavy parts (spaCy, NumPy) inside the command functions, never at
import time: ``textnb --help`` stays fast.

``main`` (the ``textnb`` script, ``python -m textnb``) runs ``app`` and then leaves
without tearing the interpreter down (``_leave``).
"""

from __future__ import annotations

import atexit
import importlib
import os
import pkgutil
import sys
import threading

# One BLAS thread. OpenBLAS starts a thread a core as NumPy is imported, and they spin
# before they sleep, CPU that every command pays for nothing
# (docs/design/startup.md#one-blas-thread). textnb
# multiplies nothing dense enough for them to help (its products are sparse, or 2 x 2),
# and its parallelism is its own worker processes, so the threads could only compete
# with those; joblib's workers set the same limits for the same reason. Set before
# NumPy is imported; a limit the user sets is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from ._util import app  # noqa: E402 - after the limit above

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["app", "main"]


def main() -> None:
    """Run the command line and exit with its code."""
    try:
        app()
        code: object = 0
    except SystemExit as exc:  # typer (click) always ends this way
        code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int) or threading.active_count() > 1:
        sys.exit(code)  # a message to print, or threads to join: the usual way out
    _leave(code)


def _leave(code: int) -> None:
    """Exit with ``code`` as the interpreter would, minus freeing every object one by one.

    A command's work is in its files and its output by now. Freeing the model's
    hundreds of thousands of strings and arrays at exit took a tenth of a second or
    more after ``train`` or ``classify``
    (docs/design/startup.md#the-collector-in-a-one-message-run). The
    exit handlers still run (multiprocessing's, weakref finalizers such as
    temporary folders') and the standard streams are flushed; every file textnb
    writes is closed (and the model fsynced) before its command returns.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe: what is lost was unreadable anyway
            if stream is sys.stdout and code == 0:
                code = 120  # as the interpreter does when stdout cannot be flushed
    os._exit(code)
