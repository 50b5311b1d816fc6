"""Two start-up steps at once: a model load on a second thread while spaCy is imported.

A command that scores or learns first loads its model and imports spaCy, two steps of
about the same length (docs/design/startup.md#the-load-beside-spacys-import). The load
spends most of its time in C that releases the GIL (inflating, SHA-256, hashing and
sorting the vocabulary with NumPy); the import is Python and holds it. Run side by
side, the load mostly uses the second core, for a little more CPU in all as the threads
hand the GIL back and forth. A forked child instead of the thread was tried and
removed: it lost on large models
(docs/design/startup.md#tried-and-removed-the-load-in-a-forked-child).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["beside"]

T = TypeVar("T")


def beside(task: Callable[[], T], work: Callable[[], object]) -> T:
    """``task()`` on a second thread while ``work()`` runs on this one; RETURNS what
    ``task`` returns. An error of either is raised here once both are done (``work``'s
    first), so no thread outlives the call."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = task()
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread below
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="textnb-load", daemon=True)
    thread.start()
    try:
        work()
    finally:
        thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
