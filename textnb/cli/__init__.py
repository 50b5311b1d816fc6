"""The textnb command line: one module per command, thin typer wrappers over ``textnb.commands``.

Every module in this package that does not start with ``_`` defines commands on
``app`` and is imported here, so a new command is a new file. The command modules
import the heavy parts (spaCy, NumPy) inside the command functions, never at
import time: ``textnb --help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._util import app

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = ["app"]
