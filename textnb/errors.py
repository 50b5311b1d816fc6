"""Domain exceptions.

The library raises these; only ``textnb.cli`` turns them into messages and exit
codes. Every message names the offending value and says how to fix it.
"""

import errno


class TextnbError(Exception):
    """Base class of every error textnb raises on purpose."""


class SourceError(TextnbError):
    """A message source (file, directory, mbox, Maildir, index) cannot be read."""


class MailboxFormatError(SourceError):
    """A source exists but is not in the format it claims (e.g. a bad index line)."""


class NotFittedError(TextnbError):
    """A model was used before it was trained."""


class EmptyTrainingSetError(TextnbError):
    """Labelled mail (to train, tune or evaluate on) is empty or holds only one class."""


class EmptyVocabularyError(TextnbError):
    """Pruning left no features."""


class ModelFormatError(TextnbError):
    """A model file is missing, damaged, or of another format version."""


class WriteError(TextnbError, OSError):
    """A file cannot be written (read-only or full disk, no permission); any old file
    at that path is left as it was. Also an OSError, which callers caught before."""


def write_fix(err: OSError) -> str:
    """What to do about a failed write, by its errno."""
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some space there (or choose another path)"
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return "choose a writable location (e.g. --model PATH) or fix the permissions"
    return "check the path and the disk"


def write_error(path, exc: OSError) -> WriteError:
    """The WriteError for a failed write of ``path``: the reason and the fix."""
    reason = (exc.strerror or str(exc)).lower()
    return WriteError(f"cannot write '{path}': {reason}; {write_fix(exc)}; the file "
                      "there, if any, is unchanged")


class ConfigError(TextnbError):
    """A configuration value is out of range or of the wrong type."""


class EngineError(TextnbError):
    """An engine is missing (Dask, an optional extra), unreachable, or asked for what it
    cannot do (a regime that cannot be split across workers)."""


class PMMLError(TextnbError):
    """A PMML document is malformed, uses an element textnb does not support, or a record
    holds an invalid value."""
