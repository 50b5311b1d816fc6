"""Import spaCy without its command line: what ``textnb filter`` needs of spaCy is the
tokenizer, and ``spacy/__init__`` imports ``spacy.cli`` only for ``spacy.info``.

``spacy.cli`` brings weasel, httpx, requests, jinja2, rich and about 200 modules with
them: about 0.1 s of a one-message ``textnb filter``
(docs/design/startup.md#spacy-without-its-command-line).
While spaCy's package runs, ``spacy.cli`` and ``spacy.cli.info`` are stand-ins whose
``info`` imports the real one when called; they leave ``sys.modules`` as soon as
spaCy is imported, so ``import spacy.cli`` later imports the real package. When spaCy
is already imported, or its package cannot be imported this way (a release that takes
more from ``spacy.cli``), spaCy is imported as usual.
"""

from __future__ import annotations

import importlib
import sys
import types

__all__ = ["import_spacy"]

_STAND_INS = ("spacy.cli", "spacy.cli.info")


def _info(*args, **kwargs):
    """``spacy.info`` (``spacy.cli.info.info``), imported on first call."""
    from spacy.cli.info import info

    return info(*args, **kwargs)


def import_spacy() -> types.ModuleType:
    """The ``spacy`` module, imported without ``spacy.cli`` when not imported yet."""
    if "spacy" in sys.modules:
        return sys.modules["spacy"]
    cli, info = (types.ModuleType(name) for name in _STAND_INS)
    info.info, cli.info = _info, info
    sys.modules.update(zip(_STAND_INS, (cli, info)))
    try:
        return importlib.import_module("spacy")
    except Exception:  # noqa: BLE001 - a spaCy that needs more of its CLI: the usual import
        sys.modules.pop("spacy", None)
        for name in _STAND_INS:
            sys.modules.pop(name, None)
        return importlib.import_module("spacy")
    finally:
        for name, stand_in in zip(_STAND_INS, (cli, info)):
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
