"""Baselines of the peer filters on textnb's train/test splits of the public corpora.

usage: python -m bench.peers [--corpus NAME ...] [--peer NAME ...] [--out bench/results/peers.json]

For each corpus (default: all of ``textnb.mail.corpora.CORPORA``) the README split
(test iff md5(relpath) % 5 == 0) is written to a temporary folder, one file per
message (SMS: one file per text), and each peer is trained on the train files
and scores the test files:

- bogofilter, default options (which *are* Robinson-Fisher combining with
  header tagging), and again with ``-H`` (header tagging off) for contrast;
- spamprobe, trained with ``train-spam``/``train-good`` (its train-on-error
  mode) and again with ``spam``/``good`` (learn every message); on Enron and
  SMS also on copies with a blank line after the header ("+sep"), without
  which spamprobe reads Enron bodies and SMS texts as header lines and drops them;
- scikit-learn ``CountVectorizer`` + ``MultinomialNB``, and binary
  ``CountVectorizer`` + ``BernoulliNB``, on the raw bytes decoded as latin-1.

For every corpus and peer it reports (1-AUC)% of the scores the peer prints,
hm% and sm% at the peer's own default verdict, sm% at hm = 0.1%, and train and
classify wall time. Peers that are not installed are skipped with a note.
The corpora are read from ``textnb.mail.corpora.corpora_root()`` and never copied
anywhere but the temporary folder, which is deleted afterwards.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from textnb.evaluation import metrics
from textnb.mail.corpora import (CHRONOLOGICAL, CORPORA, chronological_split, corpora_root,
                                 delivery_order, iter_corpus, split)

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "peers.json"

# Figures claimed in the issue tracker for this machine, (1-AUC)% unless noted.
# Measured here (2 CPUs, shared): every one reproduces to the digits given, but
# only when read the way it was evidently produced -- bogofilter from its -T
# output (six significant digits: 0.0446 on SpamAssassin, 0.0423 at full
# precision); sklearn MNB from the log-odds, not predict_proba (SpamAssassin
# 1.209 vs 1.290, Enron 0.437 vs 0.490: the probabilities saturate at 0 and 1
# and tie); spamprobe from `spam`/`good` training (0.0540), not
# `train-spam`/`train-good` (0.0710). Speeds came out at about half the claim.
REFERENCE = {
    ("spamassassin", "bogofilter"): 0.045,
    ("enron", "bogofilter"): 0.22,
    ("lingspam", "bogofilter"): 0.10,
    ("sms", "bogofilter"): 1.46,
    ("spamassassin", "sklearn MNB"): 1.21,
    ("enron", "sklearn MNB"): 0.44,
    ("lingspam", "sklearn MNB"): 0.33,
    ("sms", "sklearn MNB"): 1.58,
    ("sms", "sklearn BNB"): 0.20,
    ("spamassassin", "spamprobe"): 0.054,
}
REFERENCE_SPEED = {("spamassassin", "bogofilter"): (4100, 3400)}  # msgs/s train, classify

# bogofilter prints spamicity with "%0.6f" by default, which turns every score
# above 0.9999995 into a tie at 1.000000. Sixteen decimals is what its own
# script format (-TT) prints; longer formats are cut at about 20 characters.
_BOGO_FORMATS = "--spamicity-formats=%.16f,%.16f,%.16f"
_BOGO_LINE = re.compile(r"^(\S+) X-Bogosity: (Spam|Ham|Unsure), .*?spamicity=([0-9.eE+-]+)")
_SPAMPROBE_LINE = re.compile(r"^(SPAM|GOOD) ([0-9.eE+-]+) [0-9a-f]+$")
# spamprobe's digest of a message in which it found no text at all.
_MD5_OF_NOTHING = "d41d8cd98f00b204e9800998ecf8427e"


@dataclass
class Split:
    """One corpus's split, written out as files below ``workdir``.

    Paths are relative to ``workdir``, which the peers run in, so the file
    lists stay short on the command line.
    """

    corpus: str
    workdir: Path
    train_spam: list[str]
    train_ham: list[str]
    test: list[str]
    y_test: np.ndarray  # bool, True = spam
    train_raw: list[bytes]
    y_train: np.ndarray
    test_raw: list[bytes]
    # (label, path) of every training message in the order the mail came in (dated
    # corpora: textnb.mail.corpora.delivery_order; else the corpus's own order): what an
    # --index lists, and what textnb's thick regime learns in order.
    train_in_order: list[tuple[str, str]] = dataclasses.field(default_factory=list)


@dataclass
class PeerRun:
    """What one peer did on one split."""

    peer: str
    scores: np.ndarray
    is_spam_pred: np.ndarray
    train_s: float
    classify_s: float
    commands: list[str]
    n_unsure: int = 0
    extra: dict = field(default_factory=dict)
    is_unsure_pred: np.ndarray | None = None  # a peer with a third verdict (bogofilter)


def write_split(corpus: str, workdir: Path, chronological: bool = False) -> Split:
    """Load a corpus, split it (by hash, or per class by date: the corpora README's
    chronological split), and write each message to its own file."""
    if chronological:
        train, test = chronological_split(corpus, iter_corpus(corpus))
    else:
        train, test = split(iter_corpus(corpus))
    paths = {"spam": [], "ham": []}
    rel_of = {}
    for i, example in enumerate(train):
        rel = f"train/{example.label}/{i:06d}"
        paths[example.label].append(rel)
        rel_of[example.relpath] = rel
        write_file(workdir / rel, example.raw)
    ordered = delivery_order(corpus, train) if corpus in CHRONOLOGICAL else train
    test_paths = []
    for i, example in enumerate(test):
        rel = f"test/{i:06d}"
        test_paths.append(rel)
        write_file(workdir / rel, example.raw)
    return Split(
        corpus=corpus,
        workdir=workdir,
        train_spam=paths["spam"],
        train_ham=paths["ham"],
        test=test_paths,
        y_test=np.array([e.label == "spam" for e in test]),
        train_raw=[e.raw for e in train],
        y_train=np.array([e.label == "spam" for e in train]),
        test_raw=[e.raw for e in test],
        train_in_order=[(e.label, rel_of[e.relpath]) for e in ordered],
    )


def write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _run(cmd: list[str], cwd: Path, ok_codes=(0,)) -> tuple[str, float]:
    """Run a peer command; return its stdout and the wall time it took."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok_codes:
        raise RuntimeError(
            f"{' '.join(cmd[:6])} ... exited {proc.returncode}: {proc.stderr.decode(errors='replace')[:500]}"
        )
    return proc.stdout.decode("utf-8", errors="replace"), elapsed


def _shown(cmd: list[str], n_files: int, what: str) -> str:
    """A command line with its file list folded to '<n what files>'."""
    return " ".join(cmd[: len(cmd) - n_files] + [f"<{n_files} {what} files>"])


def run_bogofilter(s: Split, flags: tuple[str, ...] = ()) -> PeerRun:
    """Train a fresh bogofilter database on the split and score the test files.

    ``-C`` skips config files so the compiled-in defaults apply (Debian's
    /etc/bogofilter.cf sets nothing); the same ``flags`` are used for training
    and scoring. Verdicts are bogofilter's: Spam iff spamicity >= spam_cutoff
    0.99, Ham iff <= ham_cutoff 0.45, Unsure between.
    """
    db = s.workdir / ("bogofilter" + "".join(flags).replace("-", "_"))
    db.mkdir()
    base = ["bogofilter", "-C", "-d", db.name, *flags]
    train_spam = [*base, "-s", "-B", *s.train_spam]
    train_ham = [*base, "-n", "-B", *s.train_ham]
    classify = [*base, "-v", _BOGO_FORMATS, "-B", *s.test]
    _, t_spam = _run(train_spam, s.workdir)
    _, t_ham = _run(train_ham, s.workdir)
    # Exit status in bulk mode is the last message's verdict: 0 spam, 1 ham, 2 unsure.
    out, t_classify = _run(classify, s.workdir, ok_codes=(0, 1, 2))
    by_file = {}
    for line in out.splitlines():
        m = _BOGO_LINE.match(line)
        if m:
            by_file[m.group(1)] = (m.group(2), float(m.group(3)))
    missing = [f for f in s.test if f not in by_file]
    if missing:
        raise RuntimeError(f"bogofilter printed no spamicity for {len(missing)} test files, e.g. {missing[0]}")
    verdicts = [by_file[f][0] for f in s.test]
    scores = np.array([by_file[f][1] for f in s.test])
    counts, _ = _run(["bogoutil", "-w", db.name, ".MSG_COUNT"], s.workdir)
    return PeerRun(
        peer="bogofilter" + "".join(f" {f}" for f in flags),
        scores=scores,
        is_spam_pred=np.array([v == "Spam" for v in verdicts]),
        train_s=t_spam + t_ham,
        classify_s=t_classify,
        commands=[
            _shown(train_spam, len(s.train_spam), "train spam"),
            _shown(train_ham, len(s.train_ham), "train ham"),
            _shown(classify, len(s.test), "test"),
        ],
        n_unsure=verdicts.count("Unsure"),
        is_unsure_pred=np.array([v == "Unsure" for v in verdicts]),
        extra={
            "msg_count": " ".join(counts.split()[-2:]) + " (spam good)",
            # The same scores as bogofilter's other outputs print them: -T ("%g", six
            # significant digits) and -v's default "%0.6f". Both tie every score
            # above 0.9999995 at 1; "%0.6f" also ties everything below 5e-7 at 0.
            "one_minus_auc_pct_at_T_format": metrics.one_minus_auc_pct(
                s.y_test, np.array([float(f"{x:g}") for x in scores])
            ),
            "one_minus_auc_pct_at_6_decimals": metrics.one_minus_auc_pct(s.y_test, np.round(scores, 6)),
        },
    )


def _with_header_separator(corpus: str, raw: bytes) -> bytes:
    """The message with the blank line that ends an RFC 822 header.

    Enron-Spam files are a ``Subject:`` line followed at once by the body, and
    SMS texts have no header at all; spamprobe reads such a body as header
    lines and drops it (an Enron message shrinks to its subject, an SMS to
    nothing). The other corpora already have the blank line.
    """
    if corpus == "enron":
        first, _, rest = raw.partition(b"\n")
        return first + b"\n\n" + rest
    if corpus == "sms":
        return b"\n" + raw
    return raw


def run_spamprobe_separated(s: Split) -> PeerRun | None:
    """spamprobe (spam/good) on copies given a header/body separator; None where one exists."""
    if s.corpus not in ("enron", "sms"):
        return None
    fixed = dataclasses.replace(s, workdir=s.workdir / "separated")
    for rel in [*s.train_spam, *s.train_ham, *s.test]:
        write_file(fixed.workdir / rel, _with_header_separator(s.corpus, (s.workdir / rel).read_bytes()))
    run = run_spamprobe(fixed, learn_all=True)
    run.peer = "spamprobe (spam/good) +sep"
    return run


def run_spamprobe(s: Split, learn_all: bool = False) -> PeerRun:
    """Train a fresh spamprobe database on the split and score the test files.

    ``train-spam``/``train-good`` learn only messages spamprobe finds hard or
    gets wrong; ``spam``/``good`` learn every message. Either way spamprobe
    skips a message whose digest it has seen, so exact duplicates count once.
    Verdicts are spamprobe's (SPAM iff score above its default 0.7).
    """
    db = s.workdir / ("spamprobe_all" if learn_all else "spamprobe")
    db.mkdir()
    spam_cmd, good_cmd = ("spam", "good") if learn_all else ("train-spam", "train-good")
    train_spam = ["spamprobe", "-d", db.name, spam_cmd, *s.train_spam]
    train_ham = ["spamprobe", "-d", db.name, good_cmd, *s.train_ham]
    score = ["spamprobe", "-d", db.name, "score", *s.test]
    _, t_spam = _run(train_spam, s.workdir)
    _, t_ham = _run(train_ham, s.workdir)
    out, t_classify = _run(score, s.workdir)
    rows = [m.groups() for m in map(_SPAMPROBE_LINE.match, out.splitlines()) if m]
    n_empty = sum(line.endswith(_MD5_OF_NOTHING) for line in out.splitlines())
    if len(rows) != len(s.test):
        raise RuntimeError(
            f"spamprobe scored {len(rows)} messages in {len(s.test)} test files; "
            "a file was read as several messages (try -M)"
        )
    return PeerRun(
        peer="spamprobe (spam/good)" if learn_all else "spamprobe",
        scores=np.array([float(score) for _, score in rows]),
        is_spam_pred=np.array([verdict == "SPAM" for verdict, _ in rows]),
        train_s=t_spam + t_ham,
        classify_s=t_classify,
        commands=[
            _shown(train_spam, len(s.train_spam), "train spam"),
            _shown(train_ham, len(s.train_ham), "train ham"),
            _shown(score, len(s.test), "test"),
        ],
        extra={"n_test_read_as_empty": n_empty},
    )


def run_sklearn(s: Split, bernoulli: bool = False) -> PeerRun:
    """CountVectorizer (default token pattern, latin-1) + MultinomialNB or BernoulliNB.

    The score is ``predict_proba``'s spam column, which saturates to exactly
    0.0 or 1.0 on long messages; the unsaturated log-odds (joint log
    likelihood of spam minus ham) are reported beside it.
    """
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB

    vectorizer = CountVectorizer(encoding="latin-1", decode_error="replace", binary=bernoulli)
    model = BernoulliNB() if bernoulli else MultinomialNB()
    start = time.perf_counter()
    model.fit(vectorizer.fit_transform(s.train_raw), s.y_train)
    train_s = time.perf_counter() - start
    start = time.perf_counter()
    X_test = vectorizer.transform(s.test_raw)
    proba = model.predict_proba(X_test)
    classify_s = time.perf_counter() - start
    spam = list(model.classes_).index(True)
    jll = model.predict_joint_log_proba(X_test)
    log_odds = jll[:, spam] - jll[:, 1 - spam]
    return PeerRun(
        peer="sklearn BNB" if bernoulli else "sklearn MNB",
        scores=proba[:, spam],
        is_spam_pred=proba[:, spam] > 0.5,
        train_s=train_s,
        classify_s=classify_s,
        commands=[
            f"CountVectorizer(encoding='latin-1', decode_error='replace', binary={bernoulli}) + "
            f"{type(model).__name__}() on raw bytes"
        ],
        extra={
            "one_minus_auc_pct_log_odds": metrics.one_minus_auc_pct(s.y_test, log_odds),
            "sm_pct_at_hm_0.1pct_log_odds": metrics.sm_at_hm(s.y_test, log_odds, 0.001),
            "n_features": len(vectorizer.vocabulary_),
        },
    )


def _tied_pairs_pct(y: np.ndarray, scores: np.ndarray) -> float:
    """Share of spam-ham pairs whose scores tie; half of it is in (1-AUC)%."""
    values, level = np.unique(scores, return_inverse=True)
    spam_at = np.bincount(level[y], minlength=values.size)
    ham_at = np.bincount(level[~y], minlength=values.size)
    return 100.0 * float((spam_at * ham_at).sum()) / (y.sum() * (~y).sum())


def evaluate(s: Split, run: PeerRun, n_train: int) -> dict:
    """The reported figures for one peer on one split."""
    y = s.y_test
    counts = metrics.confusion(y, run.is_spam_pred)
    n_ham, n_spam = int((~y).sum()), int(y.sum())
    hm = 100.0 * counts["fp"] / n_ham
    sm = 100.0 * counts["fn"] / n_spam
    return {
        "corpus": s.corpus,
        "peer": run.peer,
        "n_train": n_train,
        "n_test_ham": n_ham,
        "n_test_spam": n_spam,
        "one_minus_auc_pct": metrics.one_minus_auc_pct(y, run.scores),
        "reference_one_minus_auc_pct": REFERENCE.get((s.corpus, run.peer)),
        "tied_pairs_pct": _tied_pairs_pct(y, run.scores),
        **counts,
        "n_unsure": run.n_unsure,
        "hm_pct": hm,
        "sm_pct": sm,
        "lam_pct": metrics.lam_pct(hm, sm, n_ham=n_ham, n_spam=n_spam),
        "sm_pct_at_hm_0.1pct": metrics.sm_at_hm(y, run.scores, 0.001),
        "train_s": run.train_s,
        "classify_s": run.classify_s,
        "train_msgs_per_s": n_train / run.train_s,
        "classify_msgs_per_s": len(y) / run.classify_s,
        "reference_msgs_per_s": REFERENCE_SPEED.get((s.corpus, run.peer)),
        "commands": run.commands,
        **run.extra,
    }


def available_peers() -> tuple[list[tuple[str, object]], list[str]]:
    """The peers to run, and notes on the ones that cannot be."""
    peers, notes = [], []
    if shutil.which("bogofilter") and shutil.which("bogoutil"):
        peers += [("bogofilter", run_bogofilter), ("bogofilter -H", lambda s: run_bogofilter(s, ("-H",)))]
    else:
        notes.append("bogofilter not installed (needs bogofilter and bogoutil on PATH): skipped")
    if shutil.which("spamprobe"):
        peers += [
            ("spamprobe", run_spamprobe),
            ("spamprobe (spam/good)", lambda s: run_spamprobe(s, True)),
            ("spamprobe (spam/good) +sep", run_spamprobe_separated),
        ]
    else:
        notes.append("spamprobe not installed: skipped")
    try:
        import sklearn  # noqa: F401
    except ImportError:
        notes.append("scikit-learn not installed: sklearn MNB/BNB skipped")
    else:
        peers += [("sklearn MNB", run_sklearn), ("sklearn BNB", lambda s: run_sklearn(s, True))]
    return peers, notes


def versions() -> dict:
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for cmd, key in ((["bogofilter", "-V"], "bogofilter"), (["spamprobe", "-V"], "spamprobe")):
        if shutil.which(cmd[0]):
            out = subprocess.run(cmd, capture_output=True, text=True, check=False)
            lines = (out.stdout + out.stderr).strip().splitlines()
            versions[key] = next((line.strip() for line in lines if "ersion" in line or "v1" in line), "?")
    try:
        import sklearn

        versions["scikit-learn"] = sklearn.__version__
    except ImportError:
        pass
    return versions


def run_peers(corpora: list[str], only: list[str] | None = None, log=print,
              chronological: bool = False) -> dict:
    """Run every available peer (or those named in ``only``) on every corpus; return the results."""
    peers, notes = available_peers()
    if only:
        unknown = sorted(set(only) - {name for name, _ in peers})
        if unknown:
            raise ValueError(f"unknown or unavailable peers {unknown}; available: {[n for n, _ in peers]}")
        peers = [(name, runner) for name, runner in peers if name in only]
    for note in notes:
        log(f"note: {note}")
    rows, errors = [], []
    for corpus in corpora:
        with tempfile.TemporaryDirectory(prefix=f"textnb-peers-{corpus}-") as tmp:
            s = write_split(corpus, Path(tmp), chronological)
            n_train = len(s.train_spam) + len(s.train_ham)
            log(f"{corpus}: {n_train} train, {len(s.test)} test ({int(s.y_test.sum())} spam)")
            for name, runner in peers:
                try:
                    run = runner(s)
                    if run is None:  # the variant does not apply to this corpus
                        continue
                    row = evaluate(s, run, n_train)
                except Exception as exc:  # one failing peer must not sink the run
                    errors.append({"corpus": corpus, "peer": name, "error": str(exc)})
                    log(f"  {name}: FAILED: {exc}")
                    continue
                rows.append(row)
                log(f"  {name}: (1-AUC)% {row['one_minus_auc_pct']:.4f}  {row['train_s']:.2f}s train")
    return {
        "split": ("per class, the latest fifth by date (textnb.mail.corpora.chronological_split)"
                  if chronological else
                  "test iff int(md5(relpath).hexdigest(), 16) % 5 == 0 "
                  "(textnb.mail.corpora.is_test)"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), **versions()},
        "notes": notes,
        "errors": errors,
        "results": rows,
    }


def format_table(results: dict) -> str:
    """The results as a fixed-width text table."""
    head = (
        f"{'corpus':<12} {'peer':<26} {'1-AUC%':>8} {'(ref)':>6} {'ties%':>6} {'hm%':>6} {'sm%':>6} "
        f"{'unsure':>6} {'sm%@hm.1%':>9} {'lam%':>6} {'train s':>8} {'msg/s':>7} {'class s':>8} {'msg/s':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in results["results"]:
        ref = r["reference_one_minus_auc_pct"]
        lines.append(
            f"{r['corpus']:<12} {r['peer']:<26} {r['one_minus_auc_pct']:>8.4f} "
            f"{'' if ref is None else f'{ref:g}':>6} {r['tied_pairs_pct']:>6.3f} {r['hm_pct']:>6.2f} "
            f"{r['sm_pct']:>6.2f} {r['n_unsure']:>6d} {r['sm_pct_at_hm_0.1pct']:>9.2f} {r['lam_pct']:>6.2f} "
            f"{r['train_s']:>8.2f} {r['train_msgs_per_s']:>7.0f} {r['classify_s']:>8.2f} "
            f"{r['classify_msgs_per_s']:>7.0f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus", action="append", choices=CORPORA, help="corpus to run (repeatable; default: all four)"
    )
    parser.add_argument("--peer", action="append", help="peer to run, e.g. 'bogofilter' (repeatable; default: all)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results file (default: %(default)s)")
    parser.add_argument("--split", choices=("hash", "chronological"), default="hash",
                        help="the corpora README's hash split, or its split per class by date")
    args = parser.parse_args(argv)
    if corpora_root() is None:
        print("error: public corpora not found; set TEXTNB_CORPORA or place them in ../shared/corpora", file=sys.stderr)
        return 1
    try:
        results = run_peers(args.corpus or list(CORPORA), args.peer,
                            log=lambda msg: print(msg, file=sys.stderr),
                            chronological=args.split == "chronological")
    except ValueError as exc:
        parser.error(str(exc))
    print(format_table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
