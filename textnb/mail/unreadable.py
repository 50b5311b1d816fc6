"""Inputs that cannot be read: skipped and counted, or the end of the run (``--strict``).

A batch command reads many inputs, and one unreadable file among 70,000 (a
permission bit, a message moved away mid-run, an index line naming a file that
is gone) should not throw away the work done on the rest. So the readers in
:mod:`textnb.mail.sources` hand each such failure to :func:`unreadable`. With no
collector installed (library use) or a strict one (``--strict``), it raises the
SourceError, which stops the command before the model is written. Inside
``collecting()`` it records the input and the reader skips it; the command reports
the count and the first few paths at the end.

The collector is a context variable, as ``decimal.localcontext`` and
``numpy.errstate`` are: a policy for handling errors, set around a block, rather
than an argument threaded through every reader and command between the CLI and
the place where a file is opened.

Never skipped, in either mode: a path named on the command line that does not
exist (a typo, which should fail before any work) and a source in the wrong
format (an index line without a path, an unknown label): those are fixed by
editing the command or the file, not by reading the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import SourceError

__all__ = ["Skipped", "collecting", "lenient", "unreadable"]


class Skipped:
    """The inputs a run skipped, in the order met; an input met twice counts once.

    strict (bool): raise at the first instead of recording it.
    """

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.inputs: dict[str, str] = {}  # where -> why

    def add(self, where: str, why: str) -> None:
        self.inputs.setdefault(where, why)

    def __len__(self) -> int:
        return len(self.inputs)

    def summary(self, shown: int = 3) -> str:
        """One line for stderr: the count, the first ``shown`` inputs and the way to stop."""
        n = len(self.inputs)
        first = [f"'{where}' ({why})" for where, why in list(self.inputs.items())[:shown]]
        if n > shown:
            first.append(f"{n - shown:,} more")
        noun = "input could not be read and was" if n == 1 else "inputs could not be read and were"
        return (f"{n:,} {noun} skipped: {', '.join(first)}; fix them and run again, "
                "or use --strict to stop at the first")


_current: ContextVar[Skipped | None] = ContextVar("textnb_skipped", default=None)


@contextmanager
def collecting(strict: bool = False) -> Iterator[Skipped]:
    """Skip and record unreadable inputs met inside the block (raise them if ``strict``)."""
    skipped = Skipped(strict)
    token = _current.set(skipped)
    try:
        yield skipped
    finally:
        _current.reset(token)


def lenient() -> bool:
    """True when an unreadable input would be skipped rather than raised."""
    skipped = _current.get()
    return skipped is not None and not skipped.strict


def unreadable(error: SourceError, where: str, why: str) -> None:
    """Record ``where`` as skipped (``why``: the reason, a few words), or raise ``error``."""
    skipped = _current.get()
    if skipped is None or skipped.strict:
        raise error
    skipped.add(where, why)
