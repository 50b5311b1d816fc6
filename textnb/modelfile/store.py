"""Save and load a trained filter as one self-describing file. No pickle.

The file is a ZIP archive (readable with any unzip tool) holding:

- ``textnb-model.json``: format name and version, textnb version, the config,
  training statistics, the learned threshold, the SHA-256 of every other member, and
  ``journal_seq``: the number of the last record of the model's journal the file holds
  (``textnb.modelfile.journal``; a file without it is an earlier textnb's, which holds
  none of the journal's numbered records);
- ``vocabulary.json``: the tokens, in column order;
- ``class_count.npy``, ``feature_count.npy``, ``doc_freq.npy``: the counts
  (NumPy's format, loaded with ``allow_pickle=False``, so loading runs no code);
- ``ledger_digest.npy``, ``ledger_label.npy``, ``ledger_tokens.npy``: the ledger of
  learned messages (``textnb.models.ledger``), present when it has entries. They are
  optional members of format 1: a file without them loads with an empty ledger,
  and an older textnb reading a file with them checks and ignores them.
- ``ledger_serial.npy``, ``ledger_born.npy``, ``ledger_last.npy``, ``ledger_state.npy``:
  each learned message's serial, each column's history and the ledger's counters
  (``Ledger``'s docstring), which keep ``forget`` exact under a size bound
  (``textnb.modelfile.prune``); optional as well (a file without them was never pruned).
- ``ledger_hash_version.npy``: which definition made each entry's tokens hash (1 or 2,
  ``textnb.models.ledger``); optional (a file without it holds version 1 alone). An older
  textnb reads version-2 hashes as version 1, so it refuses to relabel or forget
  those messages (its check fails) rather than subtract the wrong counts.

Writes are atomic: the archive goes to a temporary file beside the target,
is fsync'd, and is renamed over the target; a crash leaves the old file or the
new one, never half of either. A truncated or bit-flipped file fails its ZIP
CRC or the SHA-256 check and is reported as damaged.

The code lives in modules by job, and this one is their public face (``store.load``,
``store.save``, ``store.commit``, ...): ``model_bytes`` (the format, the members and the
description, written), ``zip_writer`` (members deflated and hashed on a second thread),
``token_codec`` (the vocabulary's JSON), ``journal_or_rewrite`` (an update appended to the
journal or the file rewritten), ``atomic`` (a file replaced atomically),
``saved_defaults`` (config migration) and ``loaders`` (the file read, checked and its
journal applied).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ModelFormatError
from .atomic import atomic_write
from .journal_or_rewrite import JournalState, commit, journal, save, write_holding
from .loaders import load, load_at, load_for_update, load_while, loads
from .model_bytes import (FORMAT_NAME, FORMAT_VERSION, MAX_META_BYTES, ZLIB_LEVEL, description,
                          dumps, journal_seq_of, write_model)
from .saved_defaults import with_saved_defaults
from .zip_writer import ISAL_LEVEL

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "ISAL_LEVEL", "MAX_META_BYTES", "ZLIB_LEVEL",
           "JournalState", "ModelFormatError", "atomic_write", "commit", "default_model_path",
           "description", "dumps", "journal", "journal_seq_of", "load", "load_at",
           "load_for_update", "load_while", "loads", "save", "with_saved_defaults",
           "write_holding", "write_model"]


def default_model_path() -> Path:
    """$TEXTNB_MODEL, else $XDG_DATA_HOME/textnb/model.tnb (~/.local/share/textnb/model.tnb)."""
    if os.environ.get("TEXTNB_MODEL"):
        return Path(os.environ["TEXTNB_MODEL"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "textnb" / "model.tnb"

