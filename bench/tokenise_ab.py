"""The training stages of two versions of textnb, interleaved in one process.

    python -m bench.tokenise_ab --before DIR [--corpus spamassassin] [--rounds 3]

``DIR`` holds an earlier ``textnb/`` (``git archive REV textnb | tar -x -C DIR``); it is
imported as the package ``textnb_before`` beside this checkout's ``textnb``. On the
corpus's training split (the md5 split), CPU seconds of: the ledger's normalisation
and digest, ``parse_message``, tokenising the parsed messages (a new tokenizer each
round: cold caches, as training sees them; spaCy's import is start-up) and the
ledger's tokens hash (the cyclic collector off throughout). The versions take turns batch by batch (``--batch`` messages, the
first to go alternating), each with its own tokenizer, and each stage's time is
summed over the batches; the fastest of ``--rounds`` rounds is kept. On a shared
machine only ratios measured this close together mean anything. Both
versions tokenise the same parsed messages (this checkout's parser), and the
before/after token lists are compared too.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path

from textnb.config import FilterConfig
from textnb.mail.corpora import iter_corpus, split


def import_before(folder: Path):
    """``folder/textnb`` imported as the package ``textnb_before``."""
    init = folder / "textnb" / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        "textnb_before", init, submodule_search_locations=[str(init.parent)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["textnb_before"] = package
    spec.loader.exec_module(package)
    return package


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--corpus", default="spamassassin")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stages", default="digest,parse,tokenise,tokens_hash",
                        help="tokenise always runs")
    parser.add_argument("--batch", type=int, default=50,
                        help="messages timed with one version before the other takes its turn")
    args = parser.parse_args(argv)
    import_before(args.before)
    from textnb_before import ledger as ledger_a, mail as mail_a, tokenize as tokenize_a
    from textnb.mail import parse as mail_b
    from textnb.models import ledger as ledger_b
    from textnb.text import tokenize as tokenize_b

    train, _ = split(iter_corpus(args.corpus))
    raws = [e.raw for e in train]
    cfg = FilterConfig().tokenizer
    codes = {
        "before": (ledger_a, mail_a, tokenize_a),
        "after": (ledger_b, mail_b, tokenize_b),
    }
    parsed = [mail_b.parse_message(raw) for raw in raws]
    for _, _, tok in codes.values():
        tok.EmailTokenizer(cfg).spacy  # spaCy's import and first build: start-up
    wanted = set(args.stages.split(",")) | {"tokenise"}
    best: dict[tuple[str, str], float] = {}
    load = [os.getloadavg()[0]]
    same = True
    pt = time.process_time
    for r in range(args.rounds):
        times = {(name, stage): 0.0 for name in codes for stage in wanted}
        tokenizers = {name: tokenize.EmailTokenizer(cfg) for name, (_, _, tokenize) in codes.items()}
        for tokenizer in tokenizers.values():
            tokenizer.spacy
        gc.collect()
        gc.disable()  # its passes grow with what is alive, favouring whichever runs first
        for b, i in enumerate(range(0, len(raws), args.batch)):
            batch, batch_parsed = raws[i:i + args.batch], parsed[i:i + args.batch]
            lists = {}
            for name in (["before", "after"] if (b + r) % 2 == 0 else ["after", "before"]):
                ledger, mail, _ = codes[name]
                tokenizer = tokenizers[name]
                if "digest" in wanted:
                    t = pt()
                    for raw in batch:
                        hashlib.sha256(ledger.normalise(raw)).digest()
                    times[(name, "digest")] += pt() - t
                if "parse" in wanted:
                    t = pt()
                    for raw in batch:
                        mail.parse_message(raw)
                    times[(name, "parse")] += pt() - t
                t = pt()
                lists[name] = [tokenizer(p) for p in batch_parsed]
                times[(name, "tokenise")] += pt() - t
                if "tokens_hash" in wanted:
                    t = pt()
                    for tokens in lists[name]:
                        ledger.tokens_hash(tokens)
                    times[(name, "tokens_hash")] += pt() - t
            same = same and lists["before"] == lists["after"]
        gc.enable()
        for key, seconds in times.items():
            best[key] = min(best.get(key, float("inf")), seconds)
        print(f"round {r + 1} " + "  ".join(f"{k[1]} {k[0]} {v:.3f}" for k, v in sorted(times.items())),
              flush=True)
        load.append(os.getloadavg()[0])
    print(f"\n{args.corpus}: {len(raws):,} messages, best of {args.rounds} rounds; load average "
          f"{min(load):.2f}-{max(load):.2f}; token lists identical: {same}")
    print(f"{'stage':<12} {'before':>8} {'after':>8} {'ratio':>6}")
    for stage in ["digest", "parse", "tokenise", "tokens_hash"]:
        if ("before", stage) in best:
            a, b = best[("before", stage)], best[("after", stage)]
            print(f"{stage:<12} {a:>8.3f} {b:>8.3f} {b / a:>6.3f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
