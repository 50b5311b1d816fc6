"""textnb against bogofilter, spamprobe and scikit-learn: speed, memory, size, accuracy.

    python -m bench.compare [--corpus spamassassin --corpus enron] [--repeats 3]
        [--jobs 1 --jobs 0] [--regime all] [--peer NAME ...] [--json bench/results/compare.json]
    python -m bench.compare --scaling 1000,5000,20000,100000,1x,2x,4x [--corpus NAME]
        [--jobs 2] [--json bench/results/scaling.json]

Peers mode. The corpus's README split (test iff md5(relpath) % 5 == 0) is written
to a temporary folder once, one file per message (``bench/peers.py``'s
``write_split``), and every filter trains on the train files and scores the test
files, ``--repeats`` times in rotating order. Each filter is measured as the
process(es) a user would run:

- textnb: ``python -m textnb train --index`` (the training mail listed in delivery
  order, which the default thick regime learns in) and ``classify --json`` (the CLI, so
  start-up, spaCy's import, reading files and writing the model are all counted),
  once per ``--jobs`` value, and with ``--regime R`` once more per regime named;
- bogofilter and spamprobe: ``bench/peers.py``'s runners (bogofilter ``-B`` bulk
  mode for training and scoring, spamprobe ``spam``/``good``), each inside a forked
  process so that its commands' peak RSS is theirs alone;
- scikit-learn: ``bench/peers.py``'s ``run_sklearn`` in a freshly spawned Python
  process that reads the same files. Its times are fit and predict on bytes in
  memory, as peers.py measures them: no start-up, no file reading.

Reported per filter: training wall time and messages/s, classification messages/s,
each as the median and min-max over the repeats and as a ratio to bogofilter's
median; peak RSS (the largest process; textnb with --jobs N also the peak of its
process tree's summed RSS); model size on disk; and the accuracy figures of
``bench/peers.py`` ((1-AUC)%, hm%, sm% at each filter's own threshold, sm% at
hm = 0.1%) from the first repeat (they do not change between repeats). The load
average before and after each repeat is recorded: the machine is shared.

Scaling mode. Training only, on N messages made by repeating the corpus's train
split (copy k > 0 of a message gets a first line ``X-Bench-Copy: k``, which the
default header selection ignores, so the ledger counts it as a new message while
its tokens stay the same): wall time, messages/s and peak RSS of ``textnb train``
(with workers, also its process tree's summed RSS and, sampled every 0.5 s, summed PSS)
and of bogofilter's training. Repeats make the tokenizer's caches (and
bogofilter's database pages) warm, so later copies cost less than first sights.

Peers that are not installed are skipped with a note. Files live in a temporary
folder that is deleted afterwards; the corpora are never copied anywhere else.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pickle
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench import peers
from bench.bytecode import compile_textnb
from textnb.mail.corpora import CORPORA, corpora_root, iter_corpus, split

DEFAULT_PEERS = ("bogofilter", "spamprobe (spam/good)", "spamprobe (spam/good) +sep",
                 "sklearn MNB", "sklearn BNB")
MB = 1024 * 1024


# -- measuring one process (and its children) ---------------------------------------


@dataclass
class Usage:
    """What a command cost: wall seconds, CPU seconds (user + system, children
    included), the peak RSS of its largest process and of its process tree (sampled)."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    max_rss: int = 0  # bytes
    tree_rss: int = 0  # bytes; 0 when not sampled
    tree_pss: int = 0  # bytes; 0 when not sampled (scaling mode samples it)

    def add(self, other: Usage) -> Usage:
        """Two commands run one after the other: times add, peaks take the larger."""
        return Usage(self.wall_s + other.wall_s, self.cpu_s + other.cpu_s,
                     max(self.max_rss, other.max_rss), max(self.tree_rss, other.tree_rss),
                     max(self.tree_pss, other.tree_pss))


def _descendants(pid: int) -> list[int]:
    """pid and every process below it (Linux /proc; threads' children included)."""
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        found.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    stack.extend(int(c) for c in fh.read().split())
        except OSError:  # the process ended meanwhile
            pass
    return found


def _proc_kb(path: str, field: str) -> int:
    """The kB figure of ``field`` (e.g. "VmRSS:") in a /proc file, in bytes; 0 when the
    process has ended."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _rss(pid: int) -> int:
    """A process's resident set in bytes (0 once it has ended).

    From /proc/PID/status, which reads counters; /proc/PID/smaps_rollup would give
    the proportional set (shared pages split) but walks the page tables under the
    process's memory lock, and sampling it slowed the processes it measured.
    """
    return _proc_kb(f"/proc/{pid}/status", "VmRSS:")


def _pss(pid: int) -> int:
    """A process's proportional set in bytes (each page it shares with others counted
    as its share), 0 once it has ended. Walks the page tables (``_rss`` says why that
    is sampled only where asked)."""
    return _proc_kb(f"/proc/{pid}/smaps_rollup", "Pss:")


class _TreeSampler(threading.Thread):
    """Samples the summed RSS of a process tree every ``interval`` seconds (pages the
    processes share after a fork count once per process: an upper bound), and with
    ``pss`` its summed proportional set every ``pss_interval`` seconds (what the tree
    holds, shared pages counted once)."""

    def __init__(self, pid: int, interval: float = 0.1, pss: bool = False,
                 pss_interval: float = 0.5):
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0
        self.pss_every = max(1, round(pss_interval / interval)) if pss else 0
        self.peak_pss = 0
        self.done = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.done.wait(self.interval):
            pids = _descendants(self.pid)
            self.peak = max(self.peak, sum(_rss(p) for p in pids))
            n += 1
            if self.pss_every and n % self.pss_every == 0:
                self.peak_pss = max(self.peak_pss, sum(_pss(p) for p in pids))


def measured(cmd: list[str], cwd: Path, sample_tree: bool = False, pss: bool = False
             ) -> tuple[str, Usage]:
    """Run ``cmd``; return its stdout and Usage. RuntimeError on a non-zero exit.
    sample_tree: sample the process tree's summed RSS; pss: its summed PSS too."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err)
        sampler = _TreeSampler(proc.pid, pss=pss) if sample_tree else None
        if sampler:
            sampler.start()
        _, status, rusage = os.wait4(proc.pid, 0)  # this child's own resource usage
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if sampler:
            sampler.done.set()
            sampler.join()
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:6])} exited {proc.returncode}: "
                               f"{err.read().decode(errors='replace')[-800:]}")
        usage = Usage(wall, rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss * 1024,
                      sampler.peak if sampler else 0, sampler.peak_pss if sampler else 0)
        return out.read().decode("utf-8", errors="replace"), usage


def _dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- the filters ---------------------------------------------------------------------


@dataclass
class Run:
    """One filter on one split, once: peers.PeerRun plus resources and model size."""

    name: str
    peer_run: peers.PeerRun
    train: Usage
    classify: Usage
    model_bytes: int
    notes: list[str] = field(default_factory=list)


def run_textnb(s: peers.Split, jobs: int, regime: str | None = None) -> Run:
    """textnb's CLI in subprocesses: train from an index file (the training mail in
    delivery order), classify the test folder; ``regime``: train's ``--regime`` (None:
    its default)."""
    index = s.workdir / "train.index"
    index.write_text("".join(f"{label} {p}\n" for label, p in s.train_in_order))
    model = s.workdir / f"textnb-j{jobs}{'-' + regime if regime else ''}.tnb"
    model.unlink(missing_ok=True)
    textnb = [sys.executable, "-m", "textnb"]
    jobs_args = ["--jobs", str(jobs)] if jobs else []  # 0: the default, every core
    train_cmd = [*textnb, "train", "--model", model.name, "--index", index.name, "--json",
                 *jobs_args, *(["--regime", regime] if regime else [])]
    classify_cmd = [*textnb, "classify", "--model", model.name, "--json", *jobs_args, "test"]
    out, train = measured(train_cmd, s.workdir, sample_tree=jobs != 1)
    summary = json.loads(out)
    out, classify = measured(classify_cmd, s.workdir, sample_tree=jobs != 1)
    verdicts = {}
    for line in out.splitlines():
        v = json.loads(line)
        verdicts[v["source"]] = v
    order = [verdicts[str(Path("test") / Path(p).name)] for p in s.test]
    run = peers.PeerRun(
        peer=(f"textnb --jobs {jobs}" if jobs else "textnb (default jobs)")
        + (f" --regime {regime}" if regime else ""),
        scores=np.array([v["log_odds"] for v in order]),
        is_spam_pred=np.array([v["label"] == "spam" for v in order]),
        train_s=train.wall_s,
        classify_s=classify.wall_s,
        commands=[" ".join(train_cmd[1:]), " ".join(classify_cmd[1:])],
        n_unsure=sum(v["label"] == "unsure" for v in order),
        extra={"textnb_train_seconds_in_process": summary["seconds"]},
    )
    return Run(run.peer, run, train, classify, model.stat().st_size)


def _in_fork(runner, s: peers.Split, conn) -> None:
    try:
        run = runner(s)
        conn.send((run, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, None))
    except Exception as exc:  # noqa: BLE001 - reported by the parent, which skips this peer
        conn.send((None, 0, f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_isolated(name: str, runner, s: peers.Split) -> Run | None:
    """A bench/peers.py runner in a forked process, so RUSAGE_CHILDREN is its commands'.

    The peak RSS is the largest of the peer's commands (training and scoring); its
    model size is that of the database folder the runner leaves in the workdir (in
    ``separated/`` for the +sep variant), which is then deleted for the next repeat.
    """
    before = set(s.workdir.iterdir())
    parent, child = multiprocessing.get_context("fork").Pipe(duplex=False)
    proc = multiprocessing.get_context("fork").Process(target=_in_fork, args=(runner, s, child))
    proc.start()
    child.close()
    run, max_rss, error = parent.recv()
    proc.join()
    if error:
        raise RuntimeError(error)
    if run is None:  # the variant does not apply to this corpus
        return None
    made = set(s.workdir.iterdir()) - before
    separated = s.workdir / "separated"  # the +sep variant's copies, its database inside
    databases = [p for p in made if p != separated]
    if separated in made:
        databases += [p for p in separated.iterdir() if p.name not in ("train", "test")]
    model_bytes = sum(_dir_size(p) for p in databases)
    for p in made:
        shutil.rmtree(p)
    train = Usage(run.train_s, 0.0, max_rss)
    classify = Usage(run.classify_s, 0.0, max_rss)
    return Run(name, run, train, classify, model_bytes,
               notes=["peak RSS: the largest of its training and scoring commands"])


def _sklearn_child(conn, workdir: str, train_spam, train_ham, test, y_test, bernoulli: bool):
    """In a spawned process: read the split's files, run peers.run_sklearn, report back."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import BernoulliNB, MultinomialNB

    root = Path(workdir)
    train_raw = [(root / p).read_bytes() for p in [*train_spam, *train_ham]]
    y_train = np.array([True] * len(train_spam) + [False] * len(train_ham))
    s = peers.Split("", root, list(train_spam), list(train_ham), list(test), np.array(y_test),
                    train_raw, y_train, [(root / p).read_bytes() for p in test])
    run = peers.run_sklearn(s, bernoulli=bernoulli)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # Its size on disk, were it saved with pickle (refitted: run_sklearn keeps no model).
    vectorizer = CountVectorizer(encoding="latin-1", decode_error="replace", binary=bernoulli)
    model = (BernoulliNB() if bernoulli else MultinomialNB()).fit(
        vectorizer.fit_transform(train_raw), y_train)
    conn.send((run, peak, len(pickle.dumps((vectorizer, model)))))
    conn.close()


def run_sklearn_spawned(name: str, s: peers.Split) -> Run:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe(duplex=False)
    proc = context.Process(target=_sklearn_child, args=(
        child, str(s.workdir), s.train_spam, s.train_ham, s.test, s.y_test.tolist(),
        name == "sklearn BNB"))
    proc.start()
    child.close()
    run, peak, size = parent.recv()
    proc.join()
    usage = Usage(run.train_s, 0.0, peak)
    return Run(name, run, usage, Usage(run.classify_s, 0.0, peak), size,
               notes=[("times: fit/predict on bytes in memory (no start-up, no file reading); "
                       "peak RSS: the whole Python process; model: pickled size")])


def _runners(only: list[str] | None) -> tuple[list[tuple[str, object]], list[str]]:
    """(name, runner) of every peer to run besides textnb, and notes on skipped ones."""
    available, notes = peers.available_peers()
    wanted = only or list(DEFAULT_PEERS)
    runners = []
    for name, runner in available:
        if name not in wanted:
            continue
        if name.startswith("sklearn"):
            runners.append((name, lambda s, name=name: run_sklearn_spawned(name, s)))
        else:
            runners.append((name, lambda s, name=name, runner=runner: run_isolated(name, runner, s)))
    known = {name for name, _ in available}
    notes += [f"{name}: not available, skipped" for name in wanted if name not in known]
    return runners, notes


# -- peers mode --------------------------------------------------------------------


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def compare(corpus: str, repeats: int, jobs: list[int], only: list[str] | None,
            log=print, regimes: list[str] = ()) -> dict:
    runners, notes = _runners(only)
    runners = [(f"textnb --jobs {j}" if j else "textnb (default jobs)",
                lambda s, j=j: run_textnb(s, j)) for j in jobs] + [
        (f"textnb (default jobs) --regime {r}", lambda s, r=r: run_textnb(s, 0, r))
        for r in regimes] + runners
    runs: dict[str, list[Run]] = {name: [] for name, _ in runners}
    errors, loads = [], []
    with tempfile.TemporaryDirectory(prefix=f"textnb-compare-{corpus}-") as tmp:
        s = peers.write_split(corpus, Path(tmp))
        n_train = len(s.train_spam) + len(s.train_ham)
        log(f"{corpus}: {n_train} train, {len(s.test)} test messages")
        for r in range(repeats):
            load_before = os.getloadavg()
            shift = r % len(runners)  # rotate the order: load hits every filter alike
            for name, runner in runners[shift:] + runners[:shift]:
                try:
                    run = runner(s)
                except Exception as exc:  # noqa: BLE001 - one failing peer must not sink the run
                    errors.append({"corpus": corpus, "peer": name, "repeat": r, "error": str(exc)})
                    log(f"  {name}: FAILED: {exc}")
                    continue
                if run is None:
                    runs.pop(name, None)
                    continue
                runs[name].append(run)
                log(f"  repeat {r + 1}: {name}: train {run.train.wall_s:.2f} s, classify "
                    f"{run.classify.wall_s:.2f} s, peak RSS {run.train.max_rss / MB:.0f} MB")
            loads.append({"before": load_before, "after": os.getloadavg()})
        rows = [_row(s, name, rs, n_train) for name, rs in runs.items() if rs]
    _add_ratios(rows)
    return {"corpus": corpus, "n_train": n_train, "n_test": len(s.test), "repeats": repeats,
            "load_average_1_5_15": loads, "notes": notes, "errors": errors, "rows": rows}


def _row(s: peers.Split, name: str, runs: list[Run], n_train: int) -> dict:
    first = peers.evaluate(s, runs[0].peer_run, n_train)
    n_test = len(s.test)
    row = {
        "peer": name,
        "train_s": _spread([r.train.wall_s for r in runs]),
        "train_msgs_per_s": _spread([n_train / r.train.wall_s for r in runs]),
        "classify_s": _spread([r.classify.wall_s for r in runs]),
        "classify_msgs_per_s": _spread([n_test / r.classify.wall_s for r in runs]),
        "train_cpu_s": _spread([r.train.cpu_s for r in runs]) if runs[0].train.cpu_s else None,
        "peak_rss_bytes": _spread([max(r.train.max_rss, r.classify.max_rss) for r in runs]),
        "peak_tree_rss_bytes": (_spread([max(r.train.tree_rss, r.classify.tree_rss) for r in runs])
                                if runs[0].train.tree_rss else None),
        "model_bytes": runs[0].model_bytes,
        "notes": runs[0].notes,
    }
    for key in ("one_minus_auc_pct", "hm_pct", "sm_pct", "sm_pct_at_hm_0.1pct", "n_unsure",
                "fp", "fn", "commands"):
        row[key] = first[key]
    row.update({k: v for k, v in runs[0].peer_run.extra.items() if isinstance(v, (int, float, str))})
    return row


def _add_ratios(rows: list[dict]) -> None:
    """Each filter's median throughput as a multiple of bogofilter's (> 1: faster)."""
    bogo = next((r for r in rows if r["peer"] == "bogofilter"), None)
    for r in rows:
        for key in ("train_msgs_per_s", "classify_msgs_per_s"):
            r[f"{key}_vs_bogofilter"] = (r[key]["median"] / bogo[key]["median"]) if bogo else None


def format_compare_table(result: dict) -> str:
    def cell(spread: dict, fmt: str) -> str:
        return f"{spread['median']:{fmt}} ({spread['min']:{fmt}}-{spread['max']:{fmt}})"

    def ratio(x):
        return "" if x is None else f"{x:.2f}x"

    head = (f"{'filter':<24} {'train s':>17} {'train msg/s':>19} {'vs bogo':>7} "
            f"{'classify msg/s':>19} {'vs bogo':>7} {'peak RSS MB':>11} {'model MB':>8} "
            f"{'1-AUC%':>7} {'hm%':>5} {'sm%':>5} {'sm%@hm.1%':>9}")
    title = (f"{result['corpus']}: train {result['n_train']:,}, test {result['n_test']:,}; "
             f"median (min-max) of {result['repeats']} repeats")
    lines = [title, head, "-" * len(head)]
    for r in result["rows"]:
        rss = r["peak_rss_bytes"]["median"] / MB
        tree = r["peak_tree_rss_bytes"]
        rss_cell = f"{rss:.0f}" + (f"/{tree['median'] / MB:.0f}" if tree else "")
        lines.append(
            f"{r['peer']:<24} {cell(r['train_s'], '.2f'):>17} {cell(r['train_msgs_per_s'], '.0f'):>19} "
            f"{ratio(r['train_msgs_per_s_vs_bogofilter']):>7} {cell(r['classify_msgs_per_s'], '.0f'):>19} "
            f"{ratio(r['classify_msgs_per_s_vs_bogofilter']):>7} {rss_cell:>11} "
            f"{r['model_bytes'] / MB:>8.1f} {r['one_minus_auc_pct']:>7.3f} {r['hm_pct']:>5.2f} "
            f"{r['sm_pct']:>5.2f} {r['sm_pct_at_hm_0.1pct']:>9.2f}")
    loads = ", ".join(f"{l['before'][0]:.1f}->{l['after'][0]:.1f}" for l in result["load_average_1_5_15"])
    lines.append(f"load average (1 min) before->after each repeat: {loads} on {os.cpu_count()} CPUs")
    lines.append("peak RSS: largest process; 'a/b': b is the peak summed RSS of the process tree")
    lines += [f"note: {n}" for n in result["notes"]]
    lines += [f"note: {r['peer']}: {n}" for r in result["rows"] for n in r["notes"]]
    lines += [f"error: {e['peer']} (repeat {e['repeat'] + 1}): {e['error']}" for e in result["errors"]]
    return "\n".join(lines)


# -- scaling mode ------------------------------------------------------------------


def _sizes(spec: str, n_corpus: int) -> list[int]:
    """'1000,5x' -> [1000, 5 * n_corpus]."""
    sizes = []
    for item in spec.split(","):
        item = item.strip()
        sizes.append(int(float(item[:-1]) * n_corpus) if item.endswith("x") else int(item))
    return sizes


def perturbed(raw: bytes, copy: int) -> bytes:
    """Copy ``copy`` of a message with new words: in every fourth line of its body the
    ASCII letters are rotated by ``copy`` places (ROT-k), so each copy brings new words
    as a real mailbox keeps doing (a real one's 30,168 training messages held 1.48
    million distinct tokens, 49 a message; every other line rotated gave 104 a message
    on SpamAssassin), while headers and the other lines repeat. Base64 and quoted-printable lines rotate too
    (they decode to other bytes: new junk words, as real attachments bring)."""
    head, sep, body = raw.partition(b"\n\n")
    if not sep:
        return raw
    table = bytes.maketrans(
        bytes(range(65, 91)) + bytes(range(97, 123)),
        bytes(65 + (c - 65 + copy) % 26 for c in range(65, 91))
        + bytes(97 + (c - 97 + copy) % 26 for c in range(97, 123)))
    lines = body.split(b"\n")
    lines[::4] = [line.translate(table) for line in lines[::4]]
    return head + sep + b"\n".join(lines)


def write_repeated(corpus: str, n: int, folder: Path, perturb: bool = False
                   ) -> tuple[Path, list[str], list[str]]:
    """n labelled messages cycling through the train split, shuffled (seed 0: the
    corpora list spam and ham in separate runs); copy k > 0 of a message gets a header
    line 'X-Bench-Copy: k' (and with ``perturb``, new words: :func:`perturbed`).
    Returns the index file and the spam and ham paths."""
    train, _ = split(iter_corpus(corpus))
    random.Random(0).shuffle(train)
    folder.mkdir(parents=True)
    lines, paths = [], {"spam": [], "ham": []}
    for i in range(n):
        example = train[i % len(train)]
        copy = i // len(train)
        raw = example.raw
        if copy:  # after an mbox 'From ' line, which must stay first
            envelope = raw.partition(b"\n")[0] + b"\n" if raw.startswith(b"From ") else b""
            raw = envelope + b"X-Bench-Copy: %d\n" % copy + raw[len(envelope):]
            if perturb:
                raw = perturbed(raw, copy)
        rel = f"{example.label}/{i:06d}"
        paths[example.label].append(rel)
        lines.append(f"{example.label} {rel}\n")
        peers.write_file(folder / rel, raw)
    index = folder / "index"
    index.write_text("".join(lines))
    return index, paths["spam"], paths["ham"]


def _vocabulary_size(model: Path) -> int:
    with zipfile.ZipFile(model) as zf:
        return len(json.loads(zf.read("vocabulary.json")))


def scaling(corpus: str, spec: str, jobs: list[int], log=print, perturb: bool = False) -> dict:
    n_corpus = len(split(iter_corpus(corpus))[0])
    rows = []
    for n in _sizes(spec, n_corpus):
        with tempfile.TemporaryDirectory(prefix=f"textnb-scaling-{corpus}-") as tmp:
            index, spam, ham = write_repeated(corpus, n, Path(tmp) / "mail", perturb)
            row = {"n_messages": n, "load_before": os.getloadavg()}
            for j in jobs:
                model = Path(tmp) / f"j{j}.tnb"
                cmd = [sys.executable, "-m", "textnb", "train", "--model", str(model),
                       "--index", str(index), "--json", *(["--jobs", str(j)] if j else [])]
                _, usage = measured(cmd, Path(tmp), sample_tree=j != 1, pss=True)
                row[f"textnb --jobs {j}"] = {"wall_s": usage.wall_s, "msgs_per_s": n / usage.wall_s,
                                             "peak_rss_bytes": usage.max_rss,
                                             "peak_tree_rss_bytes": usage.tree_rss or None,
                                             "peak_tree_pss_bytes": usage.tree_pss or None,
                                             "model_bytes": model.stat().st_size,
                                             "vocabulary": _vocabulary_size(model)}
                log(f"  {n:,} messages: textnb --jobs {j}: {usage.wall_s:.1f} s, "
                    f"{usage.max_rss / MB:.0f} MB, {row[f'textnb --jobs {j}']['vocabulary']:,} "
                    f"tokens, model {model.stat().st_size / MB:.1f} MB")
            if shutil.which("bogofilter"):
                db = Path(tmp) / "bogofilter"
                db.mkdir()
                usage = Usage()
                for flag, files in (("-s", spam), ("-n", ham)):
                    _, u = measured(["bogofilter", "-C", "-d", str(db), flag, "-B", *files],
                                    Path(tmp) / "mail")
                    usage = usage.add(u)
                row["bogofilter"] = {"wall_s": usage.wall_s, "msgs_per_s": n / usage.wall_s,
                                     "peak_rss_bytes": usage.max_rss, "model_bytes": _dir_size(db)}
                log(f"  {n:,} messages: bogofilter: {usage.wall_s:.1f} s, {usage.max_rss / MB:.0f} MB")
            row["load_after"] = os.getloadavg()
            rows.append(row)
    return {"corpus": corpus, "train_split_messages": n_corpus, "rows": rows}


def format_scaling(result: dict) -> str:
    names = [k for k in result["rows"][0] if k.startswith(("textnb", "bogofilter"))]
    head = f"{'messages':>9} " + " ".join(f"{n + ': s, msg/s, RSS MB':>40}" for n in names)
    lines = [f"{result['corpus']} (train split of {result['train_split_messages']:,} repeated)",
             head, "-" * len(head)]
    for row in result["rows"]:
        cells = []
        for name in names:
            c = row[name]
            rss = f"{c['peak_rss_bytes'] / MB:.0f}"
            if c.get("peak_tree_rss_bytes"):
                rss += f"/{c['peak_tree_rss_bytes'] / MB:.0f}"
            if c.get("peak_tree_pss_bytes"):
                rss += f"/{c['peak_tree_pss_bytes'] / MB:.0f}"
            cells.append(f"{c['wall_s']:>10.1f} {c['msgs_per_s']:>8.0f} {rss:>13}".rjust(40))
        lines.append(f"{row['n_messages']:>9,} " + " ".join(cells)
                     + f"   load {row['load_before'][0]:.1f}->{row['load_after'][0]:.1f}")
    lines.append("RSS MB 'a/b/c': the largest process, the process tree's summed RSS "
                 "(shared pages once per process) and its summed PSS (shared pages once)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", choices=CORPORA,
                        help="corpus (repeatable; default: spamassassin and enron)")
    parser.add_argument("--repeats", type=int, default=3, help="runs of every filter (default 3)")
    parser.add_argument("--jobs", type=int, action="append",
                        help="textnb --jobs values to run (repeatable; 0: the default, every "
                             "core; default: 1 and 0)")
    parser.add_argument("--peer", action="append", help=f"peers to run (default: {', '.join(DEFAULT_PEERS)})")
    parser.add_argument("--scaling", metavar="SIZES",
                        help="scaling mode: training sizes, e.g. 1000,5000,20000,100000,1x,2x,4x")
    parser.add_argument("--perturb", action="store_true",
                        help="scaling mode: copies bring new words (bench.compare.perturbed), so "
                             "the vocabulary grows with the messages as a real mailbox's does")
    parser.add_argument("--regime", action="append", default=[],
                        help="also run textnb train --regime R, default jobs (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    compile_textnb(None)  # before any command is timed (bench.bytecode)
    if corpora_root() is None:
        print("error: public corpora not found; set TEXTNB_CORPORA or place them in "
              "../shared/corpora", file=sys.stderr)
        return 1
    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    corpora = args.corpus or ["spamassassin", "enron"]
    results = []
    for corpus in corpora:
        if args.scaling:
            result = scaling(corpus, args.scaling, args.jobs or [2], log, args.perturb)
            print(format_scaling(result), flush=True)
        else:
            result = compare(corpus, args.repeats, args.jobs or [1, 0], args.peer, log,
                             args.regime)
            print(format_compare_table(result) + "\n", flush=True)
        results.append(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        machine = {"cpus": os.cpu_count(), **peers.versions()}
        args.json.write_text(json.dumps({"machine": machine, "results": results}, indent=2) + "\n")
        log(f"wrote {args.json}")
    return 1 if any(r.get("errors") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
