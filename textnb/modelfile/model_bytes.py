"""A model file's bytes: its format, the members it holds and its description, written
(``write_model``, through ``zip_writer``), and the description's journal number read back
(``journal_seq_of``)."""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from pathlib import Path

from .. import __version__
from ..spamfilter import SpamFilter
from .checks import loads_json
from .token_codec import write_json_list
from .zip_writer import MemberWriter, write_npy

FORMAT_NAME = "textnb-model"
FORMAT_VERSION = 1
META = "textnb-model.json"
# zlib level 1, not 6: about a third of the CPU for a file a fifth larger; every train
# and retrain writes the whole file, so the time is paid often
# (docs/design/counting-and-scoring.md#saving).
ZLIB_LEVEL = 1
ARRAYS = ("class_count", "feature_count", "doc_freq")
# ``journal_seq_of`` reads only the description, and none larger than this (one with a
# calibration map is a few kB).
MAX_META_BYTES = 1 << 20


def description(spam_filter: SpamFilter, format_name: str = FORMAT_NAME,
                format_version: int = FORMAT_VERSION) -> dict:
    """What a model file says about its model besides the arrays (textnb's PMML Extension
    says the same under its own format name and version)."""
    return {
        "format": format_name,
        "format_version": format_version,
        "textnb_version": __version__,
        "config": spam_filter.config.to_dict(),
        "n_learned": spam_filter.n_learned,
        "threshold": spam_filter.threshold,
        "calibration": spam_filter.calibration,
    }


def write_model(spam_filter: SpamFilter, fh, journal_seq: int = 0) -> None:
    """Write the model file's bytes to ``fh`` (a binary file), one member at a time;
    ``journal_seq``: the last journal record the filter holds (``save``).

    Each member is encoded straight into the archive, its SHA-256 taken on the way, and
    the description with the checksums goes last: no member's bytes are ever held
    whole. Holding them all (as bytes, then compressed) had been the peak of a
    training run's memory: 70 bytes a token on top of the model itself
    (docs/design/memory.md#the-save-streams-spacys-vocabulary-is-bounded).
    """
    model = spam_filter.model
    if not hasattr(model, "class_count_"):
        from ..errors import NotFittedError
        raise NotFittedError("the filter is not trained; nothing to save")
    arrays = {"class_count": model.class_count_, "feature_count": model.feature_count_,
              "doc_freq": spam_filter.doc_freq_}
    if len(spam_filter.ledger) or spam_filter.ledger.next_serial:
        arrays.update(spam_filter.ledger.to_arrays(len(spam_filter.vocabulary.tokens_)))
    # model.numeric_model (textnb.models.numeric)
    if getattr(spam_filter, "numeric", None) is not None:
        arrays.update({f"numeric_{name}": array
                       for name, array in spam_filter.numeric.to_arrays().items()})
    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED,
                         compresslevel=ZLIB_LEVEL) as zf:
        with MemberWriter(zf) as members:
            members.add("vocabulary.json",
                        lambda out: write_json_list(out, spam_filter.vocabulary.tokens_))
            for name, array in arrays.items():
                members.add(f"{name}.npy", lambda out, a=array: write_npy(out, a))
        meta = {**description(spam_filter), "sha256": members.checksums,
                "journal_seq": int(journal_seq)}
        # A ZipInfo of its own: writestr(name) would stamp the member with the clock, and
        # the same model saved twice must be the same bytes (as the members, 1980-01-01).
        zf.writestr(zipfile.ZipInfo(META), json.dumps(meta, indent=2, sort_keys=True),
                    compress_type=zipfile.ZIP_DEFLATED, compresslevel=ZLIB_LEVEL)


def dumps(spam_filter: SpamFilter, journal_seq: int = 0) -> bytes:
    """The model file's bytes."""
    buffer = io.BytesIO()
    write_model(spam_filter, buffer, journal_seq)
    return buffer.getvalue()


def journal_seq_of(path: str | Path) -> int | None:
    """The ``journal_seq`` the model file at ``path`` records now (None: no file, an
    earlier textnb's, or one that cannot be read: the load reports why)."""
    try:
        with zipfile.ZipFile(path) as zf:
            info = zf.getinfo(META)
            if info.file_size > MAX_META_BYTES:
                return None
            meta = loads_json(zf.read(info), META)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, zlib.error, RuntimeError,
            NotImplementedError, EOFError):
        return None
    return journal_seq_in(meta) if isinstance(meta, dict) else None


def journal_seq_in(meta: dict) -> int | None:
    """The description's ``journal_seq`` (None: absent, an earlier textnb's file)."""
    seq = meta.get("journal_seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
