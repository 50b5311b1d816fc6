"""A message's token counts as the shared ledger keeps them, and the log's records.

The ledger row of a learned message holds its token counts (its distinct tokens in order
of first sight and each one's term frequency), so that relabelling or forgetting it from
any host removes exactly what was added, without the mail and whatever the host's
tokenizer makes of it now. A row that came with a model file has none (a file's ledger
keeps a tokens hash per message): the counts of the message a host has in hand stand in,
once they give the row's hash (``counts_match``). A log record is one of three kinds:

- **changes**: what one transaction changed, message by message: the label each now has
  (or none: forgotten), the label it left (or none: new), its tokens hash and its counts;
- **reset**: the model starts afresh with a configuration (no changes);
- **tuning**: the decision settings and the calibration ``textnb tune --write`` chose,
  the counts kept. It has no ``changes`` list, so a textnb that predates it stops at the
  record (and logs why) instead of scoring on without the calibration the others use.

Every host applies the records in their order (``apply``),
so every host's vocabulary gets its columns in the same order and its counts are, bit for
bit, those of one ``textnb train`` on the final labels (integer-valued floats are exact in
any order of addition; tests/test_shared_store.py checks it on SpamAssassin).

Encoded as zlib-compressed JSON, as the journal's count patches are
(``textnb.modelfile.count_patch``): no pickle, nothing that runs code, inflated within the
model file's bound.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ...labels import LABELS
from ...models.ledger import DIGEST_SIZE, matches
from ..count_patch import decode, encode

__all__ = ["REFUSALS", "Change", "Record", "Tuning", "apply", "apply_tuning", "counts_match",
           "decode_counts", "decode_record", "encode_counts", "encode_record", "encode_tuning",
           "message_counts", "refusal", "row_counts"]

# Outcomes of a relabel or forget the store refuses, for a message whose ledger row came
# with a model file (no counts), and why.
REFUSALS = {
    "mismatch": "tokenises differently now than when the imported model file learned it "
                "(a textnb upgrade changed the tokenizer?), so the counts it added are not "
                "known and cannot be moved or removed exactly; keep its label, or train the "
                "model again from your mail with 'textnb train --store'",
    "needs-mail": "was learned by the imported model file, whose ledger keeps no message's "
                  "counts, so relabelling or forgetting it needs the message itself; forget "
                  "it with 'textnb forget --store URL --store-model NAME FILE' or through a "
                  "scorer, which send its tokens",
}


def refusal(outcome: str, source: str) -> str:
    """A refused change (``REFUSALS``) as a message, naming the message by ``source``."""
    return f"{source} {REFUSALS[outcome]}"


def message_counts(tokens: list[str]) -> tuple[list[str], list[int]]:
    """A token list as (distinct tokens in order of first sight, term frequencies)."""
    counter = Counter(tokens)
    return list(counter), list(counter.values())


def encode_counts(tokens: list[str], tf: list[int]) -> bytes:
    """A message's counts as its ledger row keeps them."""
    return encode([tokens, tf])


def decode_counts(data: bytes) -> tuple[list[str], list[int]]:
    """The inverse of ``encode_counts``; ValueError for anything else."""
    value = decode(bytes(data))
    if not (isinstance(value, list) and len(value) == 2 and len(value[0]) == len(value[1])):
        raise ValueError("a ledger row's counts are not [tokens, term frequencies]")
    return value[0], value[1]


def counts_match(stored_hash: int, tokens: list[str], tf: list[int]) -> bool:
    """Whether a message's counts are those that made the tokens hash ``stored_hash``
    (either definition, ``textnb.models.ledger.matches``): the tokens of a message a
    model file learned, which its ledger row does not hold, are then known exactly."""
    return matches(stored_hash, [t for t, n in zip(tokens, tf) for _ in range(n)])


def row_counts(counts: bytes | None, stored_hash: int, tokens: list[str] | None,
               tf: list[int] | None) -> tuple[list[str], list[int]] | str:
    """The counts a ledger row holds for its message (``counts``, its tokens hash
    ``stored_hash``); for a row without them (a model file's), those of the message in
    hand (``tokens``, ``tf``; None: not in hand), when they give the row's hash.
    RETURNS (tokens, term frequencies), or the key of ``REFUSALS`` that says why not."""
    if counts is not None:
        return decode_counts(counts)
    if tokens is None:
        return "needs-mail"
    if not counts_match(stored_hash, tokens, tf):
        return "mismatch"
    return tokens, tf


@dataclass
class Change:
    """One message's change, as a transaction decided it.

    label (str | None): the label its counts are now under; None: forgotten.
    old (str | None): the label its counts leave; None: new to the ledger.
    """

    digest: bytes
    label: str | None
    old: str | None
    tokens_hash: int
    tokens: list[str]
    tf: list[int]

    def to_list(self) -> list:
        code = {None: -1, "ham": 0, "spam": 1}
        return [self.digest.hex(), code[self.label], code[self.old], str(self.tokens_hash),
                self.tokens, self.tf]

    @classmethod
    def from_list(cls, item) -> "Change":
        if not (isinstance(item, list) and len(item) == 6 and isinstance(item[0], str)
                and len(item[0]) == 2 * DIGEST_SIZE and item[1] in (-1, 0, 1)
                and item[2] in (-1, 0, 1) and len(item[4]) == len(item[5])):
            raise ValueError("a log record holds a change of the wrong shape")
        label = None if item[1] < 0 else LABELS[item[1]]
        old = None if item[2] < 0 else LABELS[item[2]]
        return cls(bytes.fromhex(item[0]), label, old, int(item[3]), item[4], item[5])


@dataclass
class Tuning:
    """What ``textnb tune --write`` sets on a model beside its counts.

    decision (dict): the configuration's ``[decision]`` section (``DecisionConfig``: the
        default cost ratio, the review cost, the unsure band).
    calibration (dict | None): the map from log-odds to P(spam)
        (``textnb.decision.calibration``, JSON-able); None: the model's own posterior.
    """

    decision: dict
    calibration: dict | None


@dataclass
class Record:
    """A decoded log record, applied in this order: the model started afresh with
    ``reset`` (a configuration's ``to_dict``; None: not), its ``changes`` (maybe none),
    then ``tuning`` set (None: not)."""

    changes: list[Change]
    reset: dict | None = None
    tuning: Tuning | None = None


def encode_record(changes: list[Change], reset: dict | None = None) -> bytes:
    """A log record: the changes, in order; ``reset`` (a config's ``to_dict``): the model
    starts afresh with that configuration first (``textnb train`` into a store)."""
    body = {"changes": [c.to_list() for c in changes]}
    if reset is not None:
        body["reset"] = reset
    return encode(body)


def encode_tuning(tuning: Tuning) -> bytes:
    """A tuning record (no ``changes``: see the module docstring)."""
    return encode({"tuning": {"decision": tuning.decision,
                              "calibration": tuning.calibration}})


def decode_record(data: bytes) -> Record:
    """A record of any kind; ValueError for anything else."""
    body = decode(bytes(data))
    if isinstance(body, dict) and isinstance(body.get("tuning"), dict):
        tuning = body["tuning"]
        if not (isinstance(tuning.get("decision"), dict)
                and isinstance(tuning.get("calibration"), (dict, type(None)))):
            raise ValueError("a tuning record is not {'decision': {...}, 'calibration': ...}")
        return Record([], tuning=Tuning(tuning["decision"], tuning["calibration"]))
    if not isinstance(body, dict) or not isinstance(body.get("changes"), list):
        raise ValueError("a log record is neither {'changes': [...]} nor {'tuning': {...}}")
    return Record([Change.from_list(item) for item in body["changes"]], body.get("reset"))


def apply_tuning(spam_filter, tuning: Tuning, source: str) -> None:
    """Set a tuning record's decision settings and calibration on a filter, as
    ``textnb tune --write`` sets them on a model file: the calibration answers every cost
    ratio, so no single learned threshold is kept. Both are checked first, as a model
    file's are (``textnb.modelfile.checks``): InvalidModelError naming the field, the
    filter left as it was.

    source (str): how messages name the model, e.g. "postgresql://... model 'default'".
    """
    from dataclasses import replace

    from ..checks import check_calibration, model_config

    nested = {**spam_filter.config.to_dict(), "decision": tuning.decision}
    config = replace(spam_filter.config, decision=model_config(nested, source).decision)
    if tuning.calibration is not None:
        check_calibration(tuning.calibration, source)
    spam_filter.config = config
    spam_filter.calibration = tuning.calibration
    spam_filter.threshold = None


def apply(spam_filter, changes: list[Change]) -> None:
    """Apply a record's changes to a filter in memory: every message's counts join its
    new label, then leave its old one (additions first, so counts never dip below 0), and
    its ledger entry is set or removed, in order."""
    presence = spam_filter.counts_presence
    _add(spam_filter, [(c.tokens, c.tf, c.label) for c in changes if c.label], 1.0, presence)
    _add(spam_filter, [(c.tokens, c.tf, c.old) for c in changes if c.old], -1.0, presence)
    ledger = spam_filter.ledger
    for c in changes:
        if c.label is None:
            if c.digest in ledger:
                ledger.remove(c.digest)
        else:
            ledger.record(c.digest, c.label, c.tokens_hash)


def _add(spam_filter, messages, weight: float, presence: bool) -> None:
    """Add (weight 1) or remove (-1) messages' counts: (tokens, term frequencies, label)."""
    if not messages:
        return
    column: dict[str, int] = {}
    for tokens, _, _ in messages:
        for token in tokens:
            column.setdefault(token, len(column))
    n = len(column)
    at = np.fromiter((column[t] for tokens, _, _ in messages for t in tokens), np.int64)
    tf = np.fromiter((f for _, tfs, _ in messages for f in tfs), np.float64, count=at.size)
    codes = np.repeat([LABELS.index(label) for _, _, label in messages],
                      [len(tokens) for tokens, _, _ in messages])
    weights = np.ones(at.size) if presence else tf
    feature_count = np.bincount(codes * n + at, weights=weights, minlength=2 * n).reshape(2, n)
    doc_freq = np.bincount(at, minlength=n).astype(np.float64)
    class_count = np.bincount([LABELS.index(m[2]) for m in messages], minlength=2)
    spam_filter.add_counts(list(column), class_count.astype(np.float64), feature_count,
                           doc_freq, weight)
