"""Coverage-guided fuzzing of the mail path: raw bytes -> parse_message -> tokenizer.

    python fuzz/fuzz_parse.py --write-seeds DIR      # the seed corpus: sample corpus + catalogue
    python fuzz/fuzz_parse.py [libFuzzer flags] DIR  # fuzz, growing DIR with new coverage

Needs atheris (``pip install 'textnb[fuzz]'``). Every input runs under small bounds
(MailLimits and TokenizerConfig below), so the fuzzer spends its time on structure
rather than size; the catalogue in tests/hostile_cases.py covers size. A "crash" is:
an exception out of parse_message or the tokenizer; the parser's catch-all floor
being reached (the ``parser-error`` defect: some input our code or the stdlib's did
not handle); a bound not respected; or, with ``-timeout=S``, one input taking longer
than S seconds. Each crash found becomes a case in tests/hostile_cases.py or a
regression test. Long-run figures: docs/hostile-mail.md, "Properties and fuzzing".
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT), str(PROJECT / "tests")]

# Small, so that each input is cheap; the same code paths as the defaults.
LIMITS_ARGS = {"max_bytes": 200_000, "max_parts": 50, "max_depth": 8, "max_headers": 100,
               "max_html_chars": 20_000}
MAX_TOKENS = 2_000
# Seeds larger than this are left out: libFuzzer's mutations of a 50 MB input are slow.
MAX_SEED_BYTES = 100_000


def write_seeds(folder: Path) -> int:
    """The sample corpus's messages and the catalogue's small cases, one file each."""
    from hostile_cases import CASES

    folder.mkdir(parents=True, exist_ok=True)
    seeds = {f"sample-{p.parent.name}-{p.name}": p.read_bytes()
             for p in sorted((PROJECT / "corpora" / "sample").rglob("*")) if p.is_file()}
    for case in CASES:
        # Sizes in the catalogue come from its builders; only call the cheap ones.
        if any(word in case.name for word in ("MB", "100000", "10000", "1000-deep", "1M", "flood")):
            continue
        seeds[f"case-{case.name}"] = case.build()
    n = 0
    for name, data in seeds.items():
        if 0 < len(data) <= MAX_SEED_BYTES:
            (folder / name).write_bytes(data)
            n += 1
    return n


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--write-seeds"]:
        print(f"{write_seeds(Path(argv[2]))} seeds written to {argv[2]}")
        return
    import atheris

    with atheris.instrument_imports():
        from textnb.config import TokenizerConfig
        from textnb.mail.html_text import html_to_text  # noqa: F401 - instrumented for coverage
        from textnb.mail.parse import MailLimits, parse_message
        from textnb.text.tokenize import EmailTokenizer

    limits = MailLimits(**LIMITS_ARGS)
    # libFuzzer saves the input of a crash it sees; an exception raised here ends the
    # run through atheris first, so the harness saves its own input beside them.
    prefix = next((a.split("=", 1)[1] for a in argv if a.startswith("-artifact_prefix=")), "./")
    tokenizer = EmailTokenizer(TokenizerConfig(header_mode="all", bigrams=True,
                                               max_tokens=MAX_TOKENS))

    def test_one_input(data: bytes) -> None:
        try:
            check(data)
        except Exception:
            Path(f"{prefix}crash-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
            raise

    def check(data: bytes) -> None:
        parsed = parse_message(data, limits)
        if "parser-error" in parsed.defects:
            raise AssertionError("parse_message fell back to its catch-all (parser-error)")
        if len(parsed.parts) + len(parsed.attachments) > limits.max_parts:
            raise AssertionError("more parts than max_parts")
        if len(parsed.headers) > limits.max_headers:
            raise AssertionError("more headers than max_headers")
        tokens = tokenizer(parsed)
        content = [t for t in tokens if not t.startswith("control:")]
        if len(content) > MAX_TOKENS or not all(isinstance(t, str) and t for t in tokens):
            raise AssertionError("tokens over max_tokens, or not non-empty strings")

    # spaCy loads on the first call (seconds): not inside the first timed input.
    tokenizer(parse_message(b"Subject: warm up\n\nhello world\n", limits))
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
