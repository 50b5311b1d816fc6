"""Whether two versions of textnb make the same tokens: every message of the public
corpora, token list by token list, in order.

    python -m bench.same_tokens --before DIR [--corpus spamassassin ...] [--config FILE]

``DIR`` holds an earlier ``textnb/`` (``git archive REV textnb | tar -x -C DIR``).
Each version runs in its own process (one after the other: one CPU at a time) and
writes, per message, an 8-byte BLAKE2b of its tokens joined by NUL, with their
number; the two files are then compared. A speed change to the parser or the
tokenizer must leave every list as it was: the model's counts and the ledger's
tokens hashes (part of the model format) depend on it.

One tokenizer learns the whole corpus in sorted order (warm caches, as ``textnb
train`` sees them); ``--config`` takes a TOML file like configs/default.toml, so
the non-default paths (no bigrams, a header list) can be checked too.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from textnb.mail.corpora import corpora_root

DEFAULT_CORPORA = ("spamassassin", "enron", "lingspam", "sms")


def record(corpora: list[str], config: str | None, out: Path) -> None:
    """Write one line per message: corpus, relpath, token count, digest (hex)."""
    import textnb
    from textnb.config import FilterConfig, load_config
    from textnb.mail.corpora import iter_corpus
    from textnb.spamfilter import SpamFilter

    spam_filter = SpamFilter(load_config(config) if config else FilterConfig())
    start = time.process_time()
    with out.open("w") as f:
        for corpus in corpora:
            for example in iter_corpus(corpus):
                tokens = spam_filter.tokens(example.raw)
                data = "\x00".join(tokens).encode("utf-8", "surrogatepass")
                digest = hashlib.blake2b(data, digest_size=8).hexdigest()
                f.write(f"{corpus}\t{example.relpath}\t{len(tokens)}\t{digest}\n")
    print(f"{Path(textnb.__file__).parent}: {time.process_time() - start:.1f} CPU s",
          file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True,
                        help="a folder holding an earlier textnb/")
    parser.add_argument("--corpus", action="append", choices=DEFAULT_CORPORA,
                        help="repeatable; default: all four")
    parser.add_argument("--config", help="a TOML configuration (default: the built-in one)")
    parser.add_argument("--record", type=Path, help=argparse.SUPPRESS)  # the worker's mode
    args = parser.parse_args(argv)
    corpora = args.corpus or list(DEFAULT_CORPORA)
    if args.record:
        record(corpora, args.config, args.record)
        return 0
    here = Path(__file__).resolve()
    root = corpora_root()  # found from this checkout: DIR's copy has no ../shared beside it
    if root is None:
        print("error: public corpora not found; set TEXTNB_CORPORA", file=sys.stderr)
        return 1
    extra = [f"--corpus={c}" for c in corpora] + ([f"--config={args.config}"] if args.config else [])
    with tempfile.TemporaryDirectory() as tmp:
        outs = []
        for name, code in (("before", args.before.resolve()), ("after", here.parents[1])):
            out = Path(tmp) / name
            # Run by file path from a neutral folder, so PYTHONPATH decides which textnb.
            env = dict(os.environ, PYTHONPATH=str(code), TEXTNB_CORPORA=str(root))
            subprocess.run([sys.executable, str(here), "--before", str(args.before),
                            "--record", str(out), *extra], cwd=tmp, env=env, check=True)
            outs.append(out.read_text().splitlines())
    before, after = outs
    differ = [a for a, b in zip(before, after) if a != b]
    print(f"{len(before):,} messages before, {len(after):,} after; "
          f"{len(differ):,} token lists differ ({', '.join(corpora)}; "
          f"config {args.config or 'default'})")
    for line in differ[:10]:
        print("  differs:", line.split("\t")[1])
    return 0 if len(before) == len(after) and not differ else 1


if __name__ == "__main__":
    sys.exit(main())
