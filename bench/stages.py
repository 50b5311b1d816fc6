"""Where textnb's time goes, per stage, beside bogofilter in the same run.

    python -m bench.stages [--corpus spamassassin] [--json OUT.json] [--before DIR]

On the corpus's README split (written to a temporary folder, one file a message,
``bench/peers.py``'s ``write_split``):

1. Stages alone, in this process, CPU seconds over the training split: reading the
   files, the ledger's normalisation and digest, ``parse_message``, tokenising
   (a new tokenizer: cold caches, as training sees them; spaCy's load is start-up),
   counting as the one-process command does (``engines.counting.count_tokens`` in
   batches of ``spamfilter.BATCH_SIZE``, which also takes the ledger's tokens hashes in
   its sort, then ``Counts.add_to`` the model), and the same without the hashes (to
   show their share), saving; and for the test split, scoring the token lists.
2. The commands a user runs, CPU and wall seconds: ``textnb train --index`` and
   ``textnb classify --json`` with ``--jobs 1`` and with the default (every core),
   and bogofilter's bulk training and scoring (``peers.run_bogofilter``).
   "Everything else" = the single-process command's CPU minus its parse, tokenise
   and count (or score) stages: start-up, reading, digests, the ledger's bookkeeping,
   saving. Then the one-process commands once more under ``bench.command_stages``,
   which splits one run's CPU by stage from inside it: the same table with every
   part from one process (stages timed alone move 15-40% between runs here, so
   their difference from a command run minutes later is partly the machine's).
3. ``textnb filter`` on one message, its start-up split into parts that add up to the
   whole: the command run under a probe that stamps the end of each part (the
   interpreter's start, importing the CLI, dispatch, importing the scoring modules,
   loading the model, spaCy's tokenizer, scoring, writing the message, exit;
   ``STARTUP_PARTS``), the fastest of ``--repeats`` runs, with the plain command's best
   beside it. ``--startup-only`` runs just this.

With ``--before DIR`` (a folder holding an earlier ``textnb/``, e.g. from ``git
archive REV textnb | tar -x -C DIR``) the commands of 2. and the start-up of 3. are
also run with that code, in the same run (3. interleaved round by round), for a
before/after table.

The machine is shared: the load average is recorded before and after, and speeds
are reported as ratios to bogofilter's, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import peers
from bench.bytecode import compile_textnb
from textnb import spamfilter
from textnb.config import FilterConfig
from textnb.engines.counting import count_tokens
from textnb.mail.parse import parse_message
from textnb.mail.sources import plan_unlabelled, read_planned
from textnb.modelfile import store
from textnb.models.ledger import normalise
from textnb.spamfilter import SpamFilter

# ``textnb filter`` itself (``python -m textnb filter``, run as runpy runs it), with a
# timestamp at each boundary: the in-process scorer is swapped for one that does the
# same work (the same imports, ``store.load``, the tokenizer, ``score_with``) and marks
# where each part ends. time.perf_counter is CLOCK_MONOTONIC on Linux, one clock for
# every process, so the parent's stamps before the start and after the exit line up
# with the child's: the parts of one run add up to that run's whole.
STARTUP_PROBE = r"""
import atexit, json, runpy, sys, time
stamps = [("python", time.perf_counter())]          # the interpreter is up (site, -c)
model, marks_path = sys.argv[1:3]
import textnb.cli                                   # what every command imports
stamps.append(("import_cli", time.perf_counter()))
import textnb.delivery.verdict_headers


def timed_scorer(model_path, cost_ratio=None):  # verdict_headers.in_process_scorer's work
    def score(raw):
        stamps.append(("dispatch", time.perf_counter()))
        from textnb.modelfile import store                    # NumPy, SciPy, the pipeline
        from textnb.delivery.verdict_headers import score_with
        stamps.append(("import_scoring", time.perf_counter()))
        if hasattr(store, "load_while"):            # an older --before code may lack it
            from textnb.text.tokenize import import_spacy_modules
            spam_filter = store.load_while(model_path, import_spacy_modules)
        else:
            spam_filter = store.load(model_path)
        stamps.append(("load_model", time.perf_counter()))
        spam_filter.tokenizer.spacy                 # spaCy's tokenizer and attributes
        stamps.append(("tokenizer", time.perf_counter()))
        verdict = score_with(spam_filter, raw, cost_ratio)
        stamps.append(("score", time.perf_counter()))
        return verdict
    return score


def write_marks():
    stamps.append(("output", time.perf_counter()))
    with open(marks_path, "w") as fh:
        json.dump(stamps, fh)


textnb.delivery.verdict_headers.in_process_scorer = timed_scorer
atexit.register(write_marks)  # registered first, so it runs after the command's own
sys.argv = ["textnb", "filter", "--model", model]
runpy.run_module("textnb", run_name="__main__", alter_sys=True)
"""
# What each part of the probe is (``startup``), in order; they add up to the whole.
STARTUP_PARTS = {
    "python": "the interpreter's start: exec, site (with this site-packages' .pth hooks), "
              "until the first line runs",
    "import_cli": "importing textnb.cli (typer, click, every command's module)",
    "dispatch": "runpy, typer building and parsing the command line, reading the message",
    "import_scoring": "importing the scoring modules (textnb.modelfile.store, the spamfilter, "
                      "NumPy, SciPy)",
    "load_model": "store.load: reading the file, unzipping, checksums, building the filter "
                  "(on a second thread, spaCy's modules imported meanwhile: store.load_while)",
    "tokenizer": "spaCy's tokenizer, with the lexical attributes (and spaCy's import, for a "
                 "--before code without store.load_while)",
    "score": "parsing, tokenising and scoring the message",
    "output": "adding the headers, writing the message, typer's exit, atexit handlers",
    "exit": "the interpreter's shutdown, until the parent sees the process end",
}


def load() -> float:
    return os.getloadavg()[0]


def cpu(fn, *args):
    start = time.process_time()
    result = fn(*args)
    return result, time.process_time() - start


def stages(s: peers.Split) -> dict[str, float]:
    """CPU seconds of each stage alone, one process (module docstring, 1.)."""
    out = {}
    files = plan_unlabelled([str(s.workdir / "train")])
    raws, out["read"] = cpu(lambda: [m.raw for m in read_planned(files)])
    norms, out["digest"] = cpu(lambda: [__import__("hashlib").sha256(n).digest() and n
                                        for n in map(normalise, raws)])
    spam_filter = SpamFilter(FilterConfig())
    limits = spam_filter.mail_limits
    parsed, out["parse"] = cpu(lambda: [parse_message(n, limits) for n in norms])
    spam_filter.tokenizer.spacy  # start-up, not tokenising
    tokens, out["tokenise"] = cpu(lambda: [spam_filter.tokenizer(p) for p in parsed])
    codes = [1 if "/spam/" in f.path else 0 for f in files]
    size = spamfilter.BATCH_SIZE

    def count(into: SpamFilter, hashes: bool) -> None:
        for i in range(0, len(tokens), size):
            counts, _ = count_tokens(tokens[i:i + size], codes[i:i + size],
                                     into.counts_presence, hashes)
            counts.add_to(into)

    _, out["count_without_hashes"] = cpu(count, SpamFilter(FilterConfig()), False)
    _, out["count"] = cpu(count, spam_filter, True)
    with tempfile.TemporaryDirectory() as tmp:
        _, out["save"] = cpu(store.save, spam_filter, Path(tmp) / "m.tnb")
    test = [m.raw for m in read_planned(plan_unlabelled([str(s.workdir / "test")]))]
    parsed = [parse_message(raw, limits) for raw in test]
    out["test_parse"] = cpu(lambda: [parse_message(raw, limits) for raw in test])[1]
    test_tokens, out["test_tokenise"] = cpu(lambda: [spam_filter.tokenizer(p) for p in parsed])
    _, out["score"] = cpu(lambda: [spam_filter.log_odds_tokens(test_tokens[i:i + size])
                                   for i in range(0, len(test_tokens), size)])
    return {k: round(v, 3) for k, v in out.items()}


def run(cmd: list[str], cwd: Path, code: Path | None = None) -> dict[str, float]:
    """Wall and CPU seconds (children's user + system) of one command (``code``: the
    folder whose ``textnb`` it imports, first on PYTHONPATH)."""
    env = dict(os.environ, PYTHONPATH=str(code)) if code else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(used, 3)}


def train_default(s: peers.Split, code: Path | None = None, model: str = "m-default.tnb"
                  ) -> Path:
    """``model``: the training split learned by the default ``textnb train`` of ``code``
    (a folder holding a ``textnb/``; None: this checkout)."""
    index = s.workdir / "train.index"
    index.write_text("".join(f"spam {p}\n" for p in s.train_spam)
                     + "".join(f"ham {p}\n" for p in s.train_ham))
    run([sys.executable, "-m", "textnb", "train", "--model", model, "--index", index.name],
        s.workdir, code)
    return s.workdir / model


def commands(s: peers.Split, before: Path | None = None) -> dict[str, dict]:
    """textnb's train and classify, one process and the default (and the same commands
    of the ``before`` code), and bogofilter's."""
    index = s.workdir / "train.index"
    index.write_text("".join(f"spam {p}\n" for p in s.train_spam)
                     + "".join(f"ham {p}\n" for p in s.train_ham))
    textnb = [sys.executable, "-m", "textnb"]
    out = {}
    runs = [("jobs1", ["--jobs", "1"], None), ("default", [], None)]
    if before:
        runs += [("before_jobs1", ["--jobs", "1"], before), ("before_jobs2", ["--jobs", "2"], before)]
    for name, jobs, code in runs:
        model = f"m-{name}.tnb"
        out[f"train_{name}"] = run([*textnb, "train", "--model", model, "--index", index.name,
                                    "--json", *jobs], s.workdir, code)
        out[f"classify_{name}"] = run([*textnb, "classify", "--model", model, "--json", *jobs,
                                       "test"], s.workdir, code)
    # The one-process commands again, split by stage from inside (bench.command_stages).
    inside = [sys.executable, str(Path(__file__).with_name("command_stages.py"))]
    for what, args in (("train", ["--model", "m-inside.tnb", "--index", index.name]),
                       ("classify", ["--model", "m-inside.tnb", "test"])):
        subprocess.run([*inside, f"{what}-inside.json", what, *args, "--json", "--jobs", "1"],
                       cwd=s.workdir, check=True, stdout=subprocess.DEVNULL)
        out[f"{what}_inside"] = json.loads((s.workdir / f"{what}-inside.json").read_text())
    bogo = peers.run_bogofilter(s)
    out["bogofilter"] = {"train_s": round(bogo.train_s, 3), "classify_s": round(bogo.classify_s, 3)}
    return out


def startup(models: dict[str, Path], message: Path, codes: dict[str, Path | None],
            repeats: int = 5) -> dict[str, dict]:
    """``textnb filter`` on one message with each code folder (None: this checkout), the
    codes interleaved round by round (module docstring, 3.).

    Each round runs, per code, the command under the probe (``STARTUP_PROBE``: the
    command itself, its parts stamped, ``STARTUP_PARTS``) and the plain command. Of the
    probed runs the fastest whole is kept with its own parts, which add up to it; beside
    it, the plain command's best ("plain_filter": what the probe itself costs) and each
    part's median over the runs ("median"; medians need not add up). The parts and the
    whole come from the same run: taken from separate processes, each the best of any
    round, a round whose probe ran slow would give a negative "rest".

    The folders' modules are compiled before (``main``, ``bench.bytecode``).
    """
    best: dict[str, dict[str, float]] = {}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in codes}
    plain: dict[str, float] = {}
    # Each code reads a model it trained itself (a newer model may hold settings an
    # older textnb does not know).
    marks = models["now"].parent / "startup-marks.json"
    for turn in range(repeats):
        # Which code goes first alternates: each then follows the other's runs as often.
        for name, code in list(codes.items())[::-1 if turn % 2 else 1]:
            env = dict(os.environ, PYTHONPATH=str(code)) if code else None
            # Out of this checkout (cwd comes first on sys.path, before PYTHONPATH).
            model = models[name]
            cwd = model.parent
            with open(message, "rb") as stdin:
                start = time.perf_counter()
                done = subprocess.run([sys.executable, "-c", STARTUP_PROBE, str(model), str(marks)],
                                      stdin=stdin, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, env=env, cwd=cwd)
                end = time.perf_counter()
            if done.returncode not in (0, 1, 2) or done.stderr:  # 3: the message passed through
                raise RuntimeError(f"the probed filter failed ({done.returncode}): "
                                   f"{done.stderr.decode(errors='replace')}")
            stamps = json.loads(marks.read_text())
            names = [k for k, _ in stamps]
            if names != list(STARTUP_PARTS)[:-1]:
                raise RuntimeError(f"the probe stamped {names}")
            times = [start, *(t for _, t in stamps), end]
            parts = {k: b - a for k, a, b in zip(STARTUP_PARTS, times, times[1:])}
            parts["whole_filter"] = end - start
            rounds[name].append(parts)
            if name not in best or parts["whole_filter"] < best[name]["whole_filter"]:
                best[name] = parts
            with open(message, "rb") as stdin:
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "textnb", "filter", "--model", str(model)],
                               stdin=stdin, stdout=subprocess.DEVNULL, check=False, env=env,
                               cwd=cwd)
                plain[name] = min(plain.get(name, 1e9), time.perf_counter() - start)
    return {name: {**{k: round(v, 3) for k, v in parts.items()},
                   "plain_filter": round(plain[name], 3),
                   "median": {k: round(statistics.median(r[k] for r in rounds[name]), 3)
                              for k in parts}}
            for name, parts in best.items()}


def startup_codes(before: Path | None) -> dict[str, Path | None]:
    return {"before": before, "now": None} if before else {"now": None}


def table(result: dict) -> list[str]:
    st, cm = result["stages"], result["commands"]
    n_train, n_test = result["n_train"], result["n_test"]
    bogo = cm["bogofilter"]
    lines = [f"{result['corpus']}: {n_train:,} training, {n_test:,} test messages; "
             f"load {result['load_before']:.2f} -> {result['load_after']:.2f}"]
    for what, stage_names, n in (("train", ("parse", "tokenise", "count"), n_train),
                                 ("classify", ("test_parse", "test_tokenise", "score"), n_test)):
        single = cm[f"{what}_jobs1"]
        parts = [st[k] for k in stage_names]
        other = single["cpu_s"] - sum(parts)
        lines.append(f"{what}: " + ", ".join(f"{k} {v:.2f}" for k, v in zip(stage_names, parts))
                     + f", everything else {other:.2f} s CPU ({other / single['cpu_s']:.0%} of "
                     f"{single['cpu_s']:.2f})")
        for name in ("before_jobs1", "before_jobs2", "jobs1", "default"):
            if f"{what}_{name}" not in cm:
                continue
            r = cm[f"{what}_{name}"]
            ratio = bogo[f"{what}_s"] / r["wall_s"]
            lines.append(f"  {what} {name}: {r['wall_s']:.2f} s wall ({n / r['wall_s']:,.0f} msg/s, "
                         f"{ratio:.2f}x bogofilter's {n / bogo[f'{what}_s']:,.0f}), "
                         f"{r['cpu_s']:.2f} s CPU")
    for what, main in (("train", ("parse", "tokenise", "count")),
                       ("classify", ("parse", "tokenise", "score"))):
        if f"{what}_inside" not in cm:  # a result written without bench.command_stages
            continue
        inside = cm[f"{what}_inside"]
        parts = inside["stages"]
        other = inside["cpu_s"] - sum(parts.get(k, 0.0) for k in main)
        lines.append(f"{what}, inside one run of the one-process command: " + ", ".join(
            f"{k} {parts.get(k, 0.0):.2f}" for k in main) + f", everything else {other:.2f} s "
            f"CPU ({other / inside['cpu_s']:.0%} of {inside['cpu_s']:.2f}: " + ", ".join(
                f"{k} {v:.2f}" for k, v in parts.items() if k not in main) + ")")
    lines.append("train's other parts alone (CPU s): " + ", ".join(
        f"{k} {st[k]:.2f}" for k in ("read", "digest", "save"))
        + f"; count without the tokens hashes {st['count_without_hashes']:.2f}")
    return lines + startup_table(result)


def startup_table(result: dict) -> list[str]:
    lines = []
    for name, parts in result["startup"].items():
        lines.append(f"filter start-up, {name}, fastest run (s): " + ", ".join(
            f"{k} {v:.3f}" for k, v in parts.items() if k != "median"))
        lines.append("  medians of the runs (s): " + ", ".join(
            f"{k} {v:.3f}" for k, v in parts["median"].items()))
    if "load_startup" in result:
        lines.append(f"start-up load average {result['load_startup'][0]:.2f} -> "
                     f"{result['load_startup'][1]:.2f}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--before", type=Path, help="a folder with an earlier textnb/ to "
                        "run the same commands with")
    parser.add_argument("--startup-only", action="store_true", help="only 3. (textnb filter's "
                        "start-up, best of --repeats), on a model trained with the default command")
    parser.add_argument("--repeats", type=int, default=5, help="rounds of the start-up probe")
    args = parser.parse_args(argv)
    compile_textnb(None, args.before)  # before any command is timed (bench.bytecode)
    with tempfile.TemporaryDirectory(prefix="textnb-stages-") as tmp:
        s = peers.write_split(args.corpus, Path(tmp))
        result = {"corpus": args.corpus, "n_train": len(s.train_spam) + len(s.train_ham),
                  "n_test": len(s.test), "cores": os.cpu_count(), "load_before": load()}
        models = {"now": s.workdir / "m-default.tnb"}
        if args.startup_only:
            train_default(s)
        else:
            result["stages"] = stages(s)
            result["commands"] = commands(s, args.before)
        if args.before:
            models["before"] = train_default(s, args.before, "m-before-default.tnb")
        start_load = load()
        result["startup"] = startup(models, s.workdir / s.test[0],
                                    startup_codes(args.before), args.repeats)
        result["load_startup"] = [start_load, load()]
        result["startup_parts"] = STARTUP_PARTS
        result["load_after"] = load()
    for line in startup_table(result) if args.startup_only else table(result):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
