"""The one way a filter's counts change through its ledger: learn, relabel, forget.

``Lifecycle`` wraps a SpamFilter and owns every update made through its ledger
(``textnb.models.ledger``), keyed by the digest of each message's normalised bytes.
``textnb train`` and ``retrain``/``forget`` (``textnb.modelfile.retrain``), the
resident scorer's LEARN and FORGET (``textnb.delivery.server``) and both engines
(``textnb.engines``) go through it:

- a message not in the ledger is learned (if the regime says so, see below);
- a message in the ledger under the same label changes nothing, so retraining a
  whole folder again is free of double counting (and cheap: no tokenising);
- a message in the ledger under the other label is *relabelled* (moved): its counts
  leave the old class and join the new one (bogofilter needs an explicit unregister
  first; here a relabelled folder is just retrained);
- ``forget`` removes a message's counts and its entry.

Exactness. Counts are integer-valued floats, exact below 2**53, so the order of
additions does not matter; the vocabulary gets its new columns in the order new
messages are first seen, which does not depend on how the messages are split
into runs. Hence training on A then retraining on B gives, bit for bit, the model
trained on A followed by B; and forgetting B afterwards restores A's counts
exactly (B's tokens keep their columns, with zero counts and document frequency,
which the model's feature mask drops). tests/test_retrain.py asserts both on
the SpamAssassin corpus.

Regimes: which *new* messages are learned
- ``all``: every one (the only regime whose result does not depend on scores;
  ``learn``'s default, what a scorer's LEARN and the Python API do with what they
  are given);
- ``error``: train on error: only messages the current model gets wrong or calls
  unsure (bogofilter's ``-u``, SpamBayes' "train on mistakes");
- ``thick``: thick threshold / train until mature: also messages classified
  right by less than ``margin`` in log-odds beyond the threshold (``train``'s
  default: ``Lifecycle.train`` follows the model's ``training`` settings,
  ``textnb.config.TrainingConfig``; ``retrain`` learns every message unless asked).
``error`` and ``thick`` score each message with the model as it stands after every
earlier message of the run (one at a time, as TREC's online protocol does);
``all`` learns in batches (``spamfilter.learning_batches``). A relabel is made in
every regime: the user said the label is wrong, and a model that keeps a message
under a label it no longer has is wrong whatever its scores.

``SpamFilter.fit`` and ``SpamFilter.learn`` stay below this: they add counts (a message
given twice counted twice, as cross-validation's folds want) and enter each message in
the ledger once, so a model they make can be forgotten here.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np

from ..config import TRAINING_REGIMES, TrainingConfig
from ..errors import ConfigError, EmptyTrainingSetError, NotFittedError, TextnbError
from ..labels import LABELS, require_both_classes
from ..mail.sources import RawMessage
from ..models.ledger import matches, normalise, tokens_hash
from ..models.scores_ahead import ScoresAhead
from ..spamfilter import BATCH_SIZE, SpamFilter, learning_batches

__all__ = ["REGIMES", "DEFAULT_MARGIN", "LearnReport", "LedgerMismatchError", "Lifecycle",
           "Seen", "check_regime", "decide", "learns"]

REGIMES = TRAINING_REGIMES
# The thick regime's margin, in log-odds beyond the threshold (configs/default.toml
# [training] has the experiment that chose it).
DEFAULT_MARGIN = TrainingConfig.margin


class LedgerMismatchError(TextnbError):
    """A learned message no longer tokenises as it did when it was learned."""

    @classmethod
    def of(cls, source: str) -> "LedgerMismatchError":
        return cls(f"message {source!r} tokenises differently now than when it was learned "
                   "(a textnb upgrade changed the tokenizer?), so its counts cannot be "
                   "removed exactly; train the model again from your mail with 'textnb train'")


@dataclass
class LearnReport:
    """What an update did.

    read: messages read; learned: new messages added, per class; moved: messages
    relabelled into each class; known: already in the ledger under the same label (a
    message repeated within the run counts here from its second time); passed:
    new messages the regime did not learn (classified right, by the margin).
    """

    regime: str = "all"
    margin: float = DEFAULT_MARGIN
    read: int = 0
    learned: dict[str, int] = field(default_factory=lambda: {"spam": 0, "ham": 0})
    moved: dict[str, int] = field(default_factory=lambda: {"spam": 0, "ham": 0})
    known: int = 0
    passed: int = 0
    # Moved messages some of whose tokens a size bound had dropped (textnb.modelfile.prune): the
    # counts the model still held for them were moved, exactly; the dropped ones stay gone.
    pruned: int = 0

    @property
    def changed(self) -> bool:
        return any(self.learned.values()) or any(self.moved.values())


@dataclass
class Seen:
    """One message as the ledger sees it: its label, normalised bytes, digest, source."""

    label: str
    norm: bytes
    digest: bytes
    source: str

    @classmethod
    def of(cls, message: RawMessage) -> "Seen":
        if message.label not in LABELS:
            raise EmptyTrainingSetError(
                f"message {message.source!r} has no label ({message.label!r}); give it as "
                "--spam or --ham, or through an index file")
        norm = normalise(message.raw)
        return cls(message.label, norm, hashlib.sha256(norm).digest(), message.source)


_END = object()


@dataclass
class _Pending:
    """A message read ahead of the one being learned: its ledger view (or the error that
    makes one, raised when its turn comes, as if it had not been read early) and its
    tokens when it will be scored."""

    message: RawMessage
    made: Seen | EmptyTrainingSetError
    tokens: list[str] | None

    @classmethod
    def of(cls, message: RawMessage, scored: Callable[[Seen], bool],
           tokens_for: Callable[[RawMessage], list[str] | None] | None,
           tokenise: Callable[[bytes], list[str]]) -> "_Pending":
        try:
            seen = Seen.of(message)
        except EmptyTrainingSetError as error:
            return cls(message, error, None)
        tokens = None
        if scored(seen):
            tokens = tokens_for(message) if tokens_for is not None else None
            if tokens is None:
                tokens = tokenise(seen.norm)
        return cls(message, seen, tokens)

    def seen(self) -> Seen:
        if isinstance(self.made, Seen):
            return self.made
        raise self.made


def learns(label: str, score: float | None, costs, regime: str, margin: float) -> bool:
    """Whether a new message with ``label`` is learned by ``regime``, given its log-odds
    under the model of the messages before it (None: that model cannot score yet, a
    class has no messages) and the decision ``costs`` (``decision.costs.CostModel``):
    ``all`` learns every one, ``error`` the ones called wrong or unsure, ``thick`` those
    too and the ones right by less than ``margin`` beyond the threshold."""
    if regime == "all" or score is None:
        return True
    if str(costs.labels([score])[0]) != label:  # wrong, or unsure
        return True
    beyond = score - costs.log_threshold if label == "spam" else costs.log_threshold - score
    return regime == "thick" and beyond < margin


def decide(digests: Sequence[bytes], labels: Sequence[str],
           label_of: Callable[[bytes], str | None]) -> tuple[int, list[tuple[int, str, str | None]]]:
    """The ledger's decision on a run of labelled messages, from their digests alone: the
    plan step of every way of learning (``Lifecycle.sort``, the Dask engine's whole-run
    plan).

    A message new to the ledger is added once, at its first place in the run where it
    changes anything (new tokens get columns in order of first sight), under the last
    label the run gives it; one in the ledger under the other label is relabelled; under
    the same label it is known (so is a repeat under the label it has just been given).

    label_of (callable): the ledger's label of a digest, None when it holds none.
    RETURNS (int, list): how many are known, and the changes in order of first place:
        (that place, the label the message ends with, the label it leaves or None: new).
    """
    before: dict[bytes, str | None] = {}  # label in the ledger when the run began
    after: dict[bytes, list] = {}  # [first place, last label given], if it changed
    known = 0
    for place, (d, label) in enumerate(zip(digests, labels)):
        if d not in before:
            before[d] = label_of(d)
        current = after[d][1] if d in after else before[d]
        if current == label:
            known += 1
        elif d in after:
            after[d][1] = label  # keeps its first place
        else:
            after[d] = [place, label]
    return known, [(place, label, before[d]) for d, (place, label) in after.items()
                   if label != before[d]]


def check_regime(regime: str, margin: float) -> None:
    """TextnbError for an unknown regime or a negative margin."""
    if regime not in REGIMES:
        raise TextnbError(f"unknown regime '{regime}'; use one of {', '.join(REGIMES)}")
    if not margin >= 0:
        raise TextnbError(f"margin {margin} must be >= 0 (log-odds beyond the threshold)")


class Lifecycle:
    """Learn, relabel and forget messages in a filter, through its ledger (in place).

    spam_filter (SpamFilter): the filter whose counts and ledger change.
    """

    def __init__(self, spam_filter: SpamFilter):
        if spam_filter.numeric is not None:
            # The engines hand this class token counts, not the mail, and the ledger keeps
            # no numeric features to take back on a relabel or forget: learned here they
            # would be missing, or inexact.
            raise ConfigError(
                f"model.numeric_model = {spam_filter.config.model.numeric_model!r} is learned "
                "only by SpamFilter.fit and .learn in Python; train, retrain, forget, tune "
                "--write and a scorer's learning count tokens through the ledger, which keeps "
                "no numeric features: set model.numeric_model = 'none' (the default; "
                "docs/configuration.md, numeric features)")
        self.spam_filter = spam_filter

    # -- the acts ----------------------------------------------------------------------
    def train(self, messages: Iterable[RawMessage],
              progress: Callable[[int], None] | None = None) -> LearnReport:
        """Train from scratch (``textnb train``): what was learned goes, then ``learn`` with
        the filter's ``training`` settings (regime, margin), so a message given twice is
        learned once (with the last label given)."""
        self.spam_filter.reset()
        training = self.spam_filter.config.training
        report = self.learn(messages, training.regime, training.margin, progress)
        require_both_classes(self.spam_filter.n_learned)
        return report

    def learn(self, messages: Iterable[RawMessage], regime: str = "all",
              margin: float = DEFAULT_MARGIN, progress: Callable[[int], None] | None = None,
              on_score: Callable[[RawMessage, float | None], None] | None = None,
              tokens_for: Callable[[RawMessage], list[str] | None] | None = None
              ) -> LearnReport:
        """Learn new labelled messages and relabel known ones, in order.

        regime (str): 'all', 'error' or 'thick' (module docstring).
        margin (float): log-odds margin of the 'thick' regime.
        on_score (callable | None): called with every message and its log-odds under the
            model as it stands just before that message (None while the model cannot
            score yet: a class has no messages); forces one-at-a-time updates. The
            online benchmark's hook (classify, then train, in order).
        tokens_for (callable | None): a message's tokens (of its normalised bytes) made
            ahead, or None: then they are made here (``textnb.engines.local``: workers
            tokenise while this process scores and learns, one message at a time).
        RETURNS (LearnReport).
        """
        check_regime(regime, margin)
        report = LearnReport(regime=regime, margin=margin)
        if regime == "all" and on_score is None:
            self._learn_batches(messages, report, progress)
        else:
            self._learn_one_by_one(messages, report, progress, on_score, tokens_for)
        return report

    def forget(self, messages: Iterable[RawMessage],
               progress: Callable[[int], None] | None = None) -> dict[str, Any]:
        """Remove messages' counts and ledger entries; labels given with them are ignored
        (the ledger knows what each was learned as).

        RETURNS (dict): ``forgotten`` per class, ``not_found`` (not in the ledger, or
            repeated), ``read``, ``pruned``: forgotten messages some of whose tokens a size
            bound had dropped before (textnb.modelfile.prune; the counts still held for them
            were removed exactly, the dropped ones were gone already).
        """
        spam_filter, ledger = self.spam_filter, self.spam_filter.ledger
        result = {"read": 0, "forgotten": {"spam": 0, "ham": 0}, "not_found": 0, "pruned": 0}
        iterator = iter(messages)
        while batch := list(islice(iterator, BATCH_SIZE)):
            gone: dict[bytes, tuple[str, list[str]]] = {}
            for message in batch:
                result["read"] += 1
                norm = normalise(message.raw)
                digest = hashlib.sha256(norm).digest()
                label = ledger.label(digest)
                if label is None or digest in gone:
                    result["not_found"] += 1
                    continue
                seen = Seen(label, norm, digest, message.source)
                held, whole = self.held_tokens(digest, self._checked_tokens(seen))
                gone[digest] = (label, held)
                result["pruned"] += not whole
            if gone:
                spam_filter.learn_tokens([t for _, t in gone.values()],
                                         [label for label, _ in gone.values()], weight=-1.0)
            for digest, (label, _) in gone.items():
                ledger.remove(digest)
                result["forgotten"][label] += 1
            if progress:
                progress(len(batch))
        return result

    def update(self, kind: str, raw: bytes, label: str | None = None) -> str:
        """One message's update, as the resident scorer's clients ask for it.

        kind (str): 'LEARN' (with ``label`` 'spam' or 'ham') or 'FORGET'.
        RETURNS (str): for LEARN 'new', 'moved' (relabelled) or 'known'; for FORGET the
            label the message was learned as, or 'not-found'.
        """
        message = RawMessage("-", raw, label)
        if kind == "LEARN":
            report = self.learn([message])
            return ("new" if any(report.learned.values())
                    else "moved" if any(report.moved.values()) else "known")
        if kind == "FORGET":
            result = self.forget([message])
            gone = [name for name, n in result["forgotten"].items() if n]
            return gone[0] if gone else "not-found"
        raise ValueError(f"unknown update kind {kind!r}; use LEARN or FORGET")

    # -- the steps -----------------------------------------------------------------------
    def sort(self, batch: Sequence[RawMessage], report: LearnReport
             ) -> tuple[list[Seen], list[tuple[Seen, str]]]:
        """Decide, from digests alone (no tokens), what a batch changes: the messages to
        add and those to relabel, each with the label it leaves; counts the batch's
        ``read`` and ``known`` into ``report``. Changes nothing else.

        A message new to the ledger is added once, at its first place in the batch (new
        tokens get columns in order of first sight), under the last label the batch
        gives it; one in the ledger under the other label is relabelled; under the same
        label it is known. The local engine plans its workers' batches with this too.
        """
        seen = [Seen.of(message) for message in batch]
        known, changes = decide([s.digest for s in seen], [s.label for s in seen],
                                self.spam_filter.ledger.label)
        report.read += len(seen)
        report.known += known
        # The message at its first place, with the label it ends with.
        final = [(Seen(label, seen[place].norm, seen[place].digest, seen[place].source), old)
                 for place, label, old in changes]
        return [s for s, old in final if old is None], [(s, old) for s, old in final
                                                        if old is not None]

    def enter(self, digest: bytes, label: str, tokens_hash: int | None = None) -> int:
        """Record in the ledger that a message's counts are now under ``label``.

        tokens_hash (int | None): the hash of the tokens of a message new to the ledger
            (``textnb.models.ledger.tokens_hash``; an engine whose worker has not answered
            yet enters 0 and enters the message again with it); None for a relabelled
            message, which keeps the hash it was learned with.
        RETURNS (int): the entry's serial.
        """
        ledger = self.spam_filter.ledger
        if tokens_hash is None:
            tokens_hash = ledger.tokens_hash(digest)
        return ledger.record(digest, label, tokens_hash)

    def held_tokens(self, digest: bytes, tokens: list[str]) -> tuple[list[str], bool]:
        """The tokens of a learned message whose counts the model still holds, and whether
        that is all of them (False: a size bound dropped some since it was learned)."""
        columns = self.spam_filter.vocabulary.columns(tokens)
        held = self.spam_filter.ledger.held(digest, columns)
        if held.all():
            return tokens, True
        return [t for t, h in zip(tokens, held.tolist()) if h], False

    def _checked_tokens(self, seen: Seen, tokens: list[str] | None = None) -> list[str]:
        """The tokens of a message in the ledger, verified against what was learned."""
        tokens = self.spam_filter.tokens(seen.norm) if tokens is None else tokens
        if not matches(self.spam_filter.ledger.tokens_hash(seen.digest), tokens):
            raise LedgerMismatchError.of(seen.source)
        return tokens

    def _apply(self, adds: list[tuple[Seen, list[str]]],
               moves: list[tuple[Seen, list[str], str]], report: LearnReport) -> None:
        """Learn new messages and relabel known ones (additions first: counts never dip
        below 0). A relabelled message moves the counts the model holds for it
        (``held_tokens``)."""
        spam_filter, ledger = self.spam_filter, self.spam_filter.ledger
        ledger.cover(len(spam_filter.vocabulary))  # columns made outside the ledger, if any
        held_moves = []
        for seen, tokens, old in moves:
            held, whole = self.held_tokens(seen.digest, tokens)
            held_moves.append((seen, held, old))
            report.pruned += not whole
        plus = [(s.label, t) for s, t in adds] + [(s.label, t) for s, t, _ in held_moves]
        if plus:  # the adds' rows come first: each one's distinct columns, for the ledger
            added = spam_filter.learn_tokens([t for _, t in plus],
                                             [label for label, _ in plus])
        if held_moves:
            spam_filter.learn_tokens([t for _, t, _ in held_moves],
                                     [old for _, _, old in held_moves], weight=-1.0)
        for row, (seen, tokens) in enumerate(adds):
            serial = self.enter(seen.digest, seen.label, tokens_hash(tokens))
            ledger.saw(added.indices[added.indptr[row]:added.indptr[row + 1]], serial)
            report.learned[seen.label] += 1
        for seen, _, _ in moves:
            self.enter(seen.digest, seen.label)
            report.moved[seen.label] += 1

    def _learn_batches(self, messages, report, progress) -> None:
        spam_filter = self.spam_filter
        for batch in learning_batches(messages):
            new, relabelled = self.sort(batch, report)
            adds = list(zip(new, spam_filter.tokens_many([s.norm for s in new])))  # --jobs
            moves = [(s, self._checked_tokens(s), old) for s, old in relabelled]
            self._apply(adds, moves, report)
            if progress:
                progress(len(batch))

    def _scores(self, token_lists: list[list[str]]) -> list[float | None]:
        try:
            return self.spam_filter.log_odds_tokens(token_lists).tolist()
        except (NotFittedError, EmptyTrainingSetError):  # a class has no messages yet
            return [None] * len(token_lists)

    def _should_learn(self, label: str, score: float | None, regime: str,
                      margin: float) -> bool:
        return learns(label, score, self.spam_filter.cost_model(), regime, margin)

    def _learn_one_by_one(self, messages, report, progress, on_score, tokens_for=None) -> None:
        """Each message scored by the model of the messages before it, then learned if the
        regime says so; the scores come a block ahead (``ScoresAhead``: the same numbers)."""
        ledger, spam_filter = self.spam_filter.ledger, self.spam_filter
        source = iter(messages)
        pending: deque[_Pending] = deque()
        done = 0  # the position of pending[0]

        def pull(n: int) -> None:
            while len(pending) < n and (message := next(source, _END)) is not _END:
                pending.append(_Pending.of(message, lambda seen: (
                    on_score is not None
                    or (report.regime != "all" and ledger.label(seen.digest) is None)),
                    tokens_for, spam_filter.tokens))

        def score_span(start: int, stop: int) -> list[float | None]:
            pull(stop - done)
            items = list(islice(pending, start - done, stop - done))
            scored = [i for i, item in enumerate(items) if item.tokens is not None]
            scores: list[float | None] = [None] * len(items)
            for i, score in zip(scored, self._scores([items[i].tokens for i in scored])):
                scores[i] = score
            return scores

        ahead = ScoresAhead(score_span)
        while True:
            pull(1)
            if not pending:
                return
            message, seen, tokens = pending[0].message, pending[0].seen(), pending[0].tokens
            report.read += 1
            current = ledger.label(seen.digest)
            score = None
            if on_score is not None or (current is None and report.regime != "all"):
                # Tokenised when read: a message new to the ledger then is new now (a pass
                # only adds entries), so its score was foreseen.
                score = ahead.at(done)
            if on_score is not None:
                on_score(message, score)
            changed = False
            if current == seen.label:
                report.known += 1
            elif current is None:
                if self._should_learn(seen.label, score, report.regime, report.margin):
                    if tokens is None:
                        tokens = spam_filter.tokens(seen.norm)
                    self._apply([(seen, tokens)], [], report)
                    changed = True
                else:
                    report.passed += 1
            else:
                moved = self._checked_tokens(seen, tokens)
                self._apply([], [(seen, moved, current)], report)
                changed = True
            ahead.done(done, changed)
            pending.popleft()
            done += 1
            if progress:
                progress(1)
