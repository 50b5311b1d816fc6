"""Merge models: ``textnb merge A B ... --model OUT``.

Two people (or two machines, or last year's backup and this year's model) each
trained a model; the merge is the model trained on all of their mail. Counts are
the sufficient statistics, so that is addition (``SpamFilter.add_counts``): the
vocabulary is A's columns, then each later input's new tokens in its own order,
which is exactly the vocabulary training on A's mail and then B's builds. The
ledgers are united in the same order.

Settings. Counts made under different settings (another tokenizer, alpha, event
model) do not add up to a model of either: every setting must be equal, and a
difference is refused by name ("'b.tnb' has model.alpha = 0.3, 'a.tnb' has 0.1").
A tuned threshold or calibration belongs to the model it was tuned on, so the merge
has none (run ``textnb tune`` on it); numeric-feature models are not merged.

A message in two inputs (the same ledger digest) was counted twice. The ledger keeps
each message's digest and the hash of its tokens, not the tokens, so one copy can
only be subtracted with the message in hand: merge looks for such messages in the
mail given with ``--mail`` / ``--index`` (tokenised again and checked against the
tokens hash, as ``forget`` does) and refuses, naming how many and where they are,
when any is missing. Then:

- the same label in both: one copy is subtracted, so it counts once;
- different labels (one owner called it spam, the other ham): merge cannot know who
  is right, and any silent choice moves counts, so by default it refuses and lists
  them. ``on_conflict`` says what to do instead: ``first`` keeps the label of the
  first input that has it, ``last`` the label of the last, and ``drop`` removes both
  copies (the message is forgotten: neither label is trusted). The result is then the
  model trained on everyone's mail with each message once, under the chosen label
  (tests/test_merge.py checks the counts and log-odds bit for bit against that model).

Messages learned without a ledger (``SpamFilter.fit``, files from before ledgers) are
"untracked": their overlaps cannot be seen, and the summary says how many there are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TextnbError
from ..mail.sources import RawMessage
from ..models.ledger import Ledger, matches, normalise
from ..spamfilter import SpamFilter

__all__ = ["CONFLICT_POLICIES", "MergeError", "merge_filters", "merge_files"]

CONFLICT_POLICIES = ("refuse", "first", "last", "drop")
_SHOWN = 5  # overlapping messages named in an error; the rest are counted


class MergeError(TextnbError):
    """Models that cannot be merged as asked (settings differ, overlaps unresolved)."""


@dataclass
class _Copy:
    """One message held by several inputs: its label in each (input number -> label)."""

    labels: dict[int, str] = field(default_factory=dict)


def _flat(config) -> dict[str, Any]:
    return {f"{s}.{k}": v for s, keys in config.to_dict().items() for k, v in keys.items()}


def _check_settings(filters: Sequence[SpamFilter], names: Sequence[str]) -> None:
    first = _flat(filters[0].config)
    for f, name in zip(filters[1:], names[1:]):
        for key, value in _flat(f.config).items():
            if value != first[key]:
                # An unset setting cannot be given with --set: retrain the other model
                # with the value that can.
                given, other = ((first[key], name) if first[key] is not None
                                else (value, names[0]))
                raise MergeError(
                    f"'{name}' has {key} = {_show(value)}, '{names[0]}' has {_show(first[key])}; "
                    "models merge only when trained with the same settings (train "
                    f"'{other}' again with --set {key}={_show(given)})")
    kind = filters[0].config.model.numeric_model
    if kind != "none":
        raise MergeError(f"'{names[0]}' has model.numeric_model = \"{kind}\"; merge adds token "
                         "counts only: train the combined mail into one model instead")


def _show(value) -> str:
    import json

    return json.dumps(value)


def _overlaps(filters: Sequence[SpamFilter]) -> dict[bytes, _Copy]:
    """Digests in more than one input's ledger, with the label in each."""
    seen: dict[bytes, _Copy] = {}
    for i, f in enumerate(filters):
        for digest in f.ledger:
            seen.setdefault(digest, _Copy()).labels[i] = f.ledger.label(digest)
    return {d: c for d, c in seen.items() if len(c.labels) > 1}


def _find_tokens(merged: SpamFilter, filters: Sequence[SpamFilter], names: Sequence[str],
                 overlaps: dict[bytes, _Copy], mail: Iterable[RawMessage]) -> dict[bytes, list[str]]:
    """The tokens of each overlapping message, from the mail, checked against every input's
    tokens hash (one digest means one normalised text, so one token list)."""
    found: dict[bytes, list[str]] = {}
    for message in mail:
        if len(found) == len(overlaps):
            break
        norm = normalise(message.raw)
        digest = hashlib.sha256(norm).digest()
        if digest not in overlaps or digest in found:
            continue
        tokens = merged.tokens(norm)
        for i in overlaps[digest].labels:  # each by the definition its entry was made with
            if not matches(filters[i].ledger.tokens_hash(digest), tokens):
                raise MergeError(
                    f"message {message.source!r} tokenises differently now than when "
                    f"'{names[i]}' learned it (another textnb version?), so its second copy "
                    "cannot be subtracted exactly; train the models again from their mail")
        found[digest] = tokens
    return found


def _describe(digests: list[bytes], overlaps: dict[bytes, _Copy], names: Sequence[str]) -> str:
    shown = []
    for d in digests[:_SHOWN]:
        labels = ", ".join(f"{overlaps[d].labels[i]} in '{names[i]}'" for i in overlaps[d].labels)
        shown.append(f"{d.hex()[:12]} ({labels})")
    more = f" and {len(digests) - _SHOWN} more" if len(digests) > _SHOWN else ""
    return "; ".join(shown) + more


def merge_filters(filters: Sequence[SpamFilter], names: Sequence[str] | None = None,
                  mail: Iterable[RawMessage] = (), on_conflict: str = "refuse"
                  ) -> tuple[SpamFilter, dict[str, Any]]:
    """The model trained on all the inputs' mail, each message once.

    filters (Sequence[SpamFilter]): two or more trained filters with equal settings.
    names (Sequence[str] | None): how errors name them (default 'input 1', ...).
    mail (Iterable[RawMessage]): messages among which those held by several inputs are
        found (only they are tokenised); not needed when the ledgers do not overlap.
    on_conflict (str): for a message under different labels: 'refuse', 'first',
        'last' or 'drop' (module docstring).
    RETURNS (tuple[SpamFilter, dict]): the merged filter and a report: ``duplicates``
        (same label, counted once), ``conflicts`` (different labels) and how each was
        settled, ``untracked`` messages whose overlaps could not be checked, ``notes``.
    """
    if on_conflict not in CONFLICT_POLICIES:
        raise MergeError(f"unknown conflict policy '{on_conflict}'; use one of "
                         f"{', '.join(CONFLICT_POLICIES)}")
    if len(filters) < 2:
        raise MergeError(f"merge needs two or more models, got {len(filters)}")
    names = list(names) if names is not None else [f"input {i + 1}" for i in range(len(filters))]
    _check_settings(filters, names)
    # A pruned model's columns count from different points of its own history
    # (textnb.modelfile.prune); summed with another's they would no longer say which messages
    # they hold, and forget would stop being exact.
    pruned = [name for f, name in zip(filters, names) if f.ledger.pruned_at]
    if pruned:
        raise MergeError(f"{', '.join(repr(n) for n in pruned)} had rare tokens pruned "
                         "(textnb compact --prune); merge models before pruning them, then "
                         "prune the merge")
    overlaps = _overlaps(filters)
    conflicts = [d for d, c in overlaps.items() if len(set(c.labels.values())) > 1]
    if conflicts and on_conflict == "refuse":
        raise MergeError(
            f"{len(conflicts)} message(s) are in the inputs under different labels: "
            f"{_describe(conflicts, overlaps, names)}; choose with --on-conflict first|last "
            "(keep the first or last input's label) or drop (forget them)")

    counts = filters[0].counts()
    merged = SpamFilter.from_counts(
        filters[0].config, list(counts["tokens"]), counts["class_count"].copy(),
        counts["feature_count"].copy(), counts["doc_freq"].copy(),
        n_learned=dict(filters[0].n_learned), ledger=Ledger())
    for f in filters[1:]:
        c = f.counts()
        merged.add_counts(c["tokens"], c["class_count"], c["feature_count"], c["doc_freq"])

    tokens = _find_tokens(merged, filters, names, overlaps, mail) if overlaps else {}
    missing = [d for d in overlaps if d not in tokens]
    if missing:
        raise MergeError(
            f"{len(overlaps)} message(s) are in more than one input, {len(missing)} of them "
            f"not found in the mail given: {_describe(missing, overlaps, names)}; pass the "
            "mail that holds them with --mail SRC or --index FILE, so each is counted once")

    # Which labels each message ends with, and the copies to take out.
    final: dict[bytes, str | None] = {}
    minus_tokens: list[list[str]] = []
    minus_labels: list[str] = []
    for digest, copy in overlaps.items():
        labels = list(copy.labels.values())  # in input order
        keep = labels[0]
        if len(set(labels)) > 1:  # a conflict: on_conflict is first, last or drop here
            keep = {"first": labels[0], "last": labels[-1], "drop": None}[on_conflict]
        kept_once = False
        for label in labels:
            if label == keep and not kept_once:
                kept_once = True
                continue
            minus_tokens.append(tokens[digest])
            minus_labels.append(label)
        final[digest] = keep
    if minus_tokens:
        merged.learn_tokens(minus_tokens, minus_labels, weight=-1.0)

    ledger = merged.ledger
    for f in filters:
        for digest in f.ledger:
            if digest in ledger or final.get(digest, "") is None:
                continue
            ledger.record(digest, final.get(digest) or f.ledger.label(digest),
                          f.ledger.tokens_hash(digest))

    notes = []
    if any(f.threshold is not None or f.calibration is not None for f in filters):
        notes.append("the inputs' tuned thresholds do not carry over: run 'textnb tune' "
                     "on the merged model")
    untracked = {name: f.ledger.summary(f.n_learned)["untracked"]
                 for f, name in zip(filters, names)}
    if any(untracked.values()):
        notes.append(f"{sum(untracked.values())} learned message(s) are not in the inputs' "
                     "ledgers (trained without one): any of them learned twice is counted "
                     "twice")
    settled = {"first": "kept the first input's label", "last": "kept the last input's label",
               "drop": "forgotten", "refuse": "none"}[on_conflict]
    report = {"inputs": list(names), "duplicates": len(overlaps) - len(conflicts),
              "conflicts": len(conflicts), "conflicts_settled": settled if conflicts else None,
              "untracked": untracked, "notes": notes}
    return merged, report


def merge_files(inputs: Sequence[str | Path], out: str | Path, mail: Sequence[str] = (),
                index: Sequence[str] = (), on_conflict: str = "refuse",
                lock_timeout: float | None = None) -> dict[str, Any]:
    """``textnb merge``: load the inputs, merge them, write ``out`` atomically under its lock.

    RETURNS (dict): the merge report and the merged model's summary (messages per class,
        vocabulary size, ledger).
    """
    from ..mail.sources import iter_index, iter_messages
    from . import store
    from .lock import model_lock

    out = Path(out)
    sources = [iter_messages(s) for s in mail] + [iter_index(p) for p in index]  # check paths now
    with model_lock(out, timeout=lock_timeout):
        filters = [store.load(p) for p in inputs]
        merged, report = merge_filters(filters, [str(p) for p in inputs],
                                       (m for it in sources for m in it), on_conflict)
        store.save(merged, out)
    return {**report, "model": str(out), "messages": dict(merged.n_learned),
            "vocabulary_size": len(merged.vocabulary),
            "ledger": merged.ledger.summary(merged.n_learned)}
