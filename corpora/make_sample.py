#!/usr/bin/env python3
"""Derive and check the sample corpus in ``corpora/sample/``.

The messages are plain files, ``sample/{ham,spam,unlabelled}/NNN.eml``, written by
the project (corpora/PROVENANCE.md says how). This script makes what follows from
them and checks all of it:

- ``sample/index``: the labelled files in delivery order (``<label> <path>`` lines);
- ``sample/mbox``: the unlabelled files as one mbox (mboxo quoting);
- the MIME feature table in corpora/PROVENANCE.md, read from the bytes;
- the checks below, and that PROVENANCE.md's counts, size and tree digest are the tree's.

Usage::

    python corpora/make_sample.py           # rewrite index and mbox from the .eml files, then check
    python corpora/make_sample.py --check   # exit 1 if anything is stale or broken (tests run this)
    python corpora/make_sample.py --table   # print the MIME feature table for PROVENANCE.md

Standard library only, so it runs before textnb is installed.
"""

from __future__ import annotations

import argparse
import email
import email.policy
import email.utils
import hashlib
import mailbox
import re
import sys
from datetime import timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "sample"
PROVENANCE = HERE / "PROVENANCE.md"
FOLDERS = ("ham", "spam", "unlabelled")

# The deliberately broken messages and how (PROVENANCE.md, "The deliberately malformed
# messages"); the check below confirms each is broken that way and no other file is.
MALFORMED = {
    "ham/047.eml": "invalid base64 in attachment",
    "ham/049.eml": "lying charset (utf-8 declared, windows-1252 bytes)",
    "spam/002.eml": "raw 8-bit UTF-8 in the Subject header",
    "spam/009.eml": "broken multipart boundary",
    "spam/037.eml": "NUL bytes in the body",
    "spam/040.eml": "no headers at all",
}
BROKEN_WAYS = ("no headers", "boundary", "base64", "lying charset", "NUL", "8-bit")

WDAY = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
MON = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def messages(root: Path = OUT) -> dict[str, bytes]:
    """Every message file, by its path relative to ``root`` ('ham/001.eml')."""
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for folder in FOLDERS for p in sorted((root / folder).glob("*.eml"))}


def arrival(data: bytes):
    """When the message reached our MX: the date of its top-most Received header (None
    for a message without one, such as the header-less spam/040.eml)."""
    received = email.message_from_bytes(data).get_all("Received")
    if not received:
        return None
    return email.utils.parsedate_to_datetime(received[0].rsplit(";", 1)[1].strip())


def delivery_order(names: list[str], files: dict[str, bytes]) -> list[str]:
    """By arrival; messages without a Received header last, in file order."""
    def key(name):
        when = arrival(files[name])
        return (when is None, when.timestamp() if when else 0.0, name)
    return sorted(names, key=key)


def make_index(files: dict[str, bytes]) -> bytes:
    labelled = [n for n in files if not n.startswith("unlabelled/")]
    return "".join(f"{n.split('/')[0]} {n}\n" for n in delivery_order(labelled, files)).encode()


def quote_from(data: bytes) -> bytes:
    """mboxo quoting: a line that starts with 'From ' gets a leading '>'."""
    return re.sub(rb"(?m)^From ", b">From ", data)


def mbox_from_line(data: bytes) -> bytes:
    """'From <envelope sender> <asctime of arrival, UTC>', the sender from Return-Path."""
    path = email.message_from_bytes(data)["Return-Path"] or ""
    sender = path.strip().strip("<>") or "MAILER-DAEMON"
    t = arrival(data).astimezone(timezone.utc)
    return (f"From {sender} {WDAY[t.weekday()]} {MON[t.month - 1]} {t.day:2d} "
            f"{t:%H:%M:%S} {t.year}\n").encode("ascii")


def make_mbox(files: dict[str, bytes]) -> bytes:
    unlabelled = [n for n in files if n.startswith("unlabelled/")]
    return b"".join(mbox_from_line(files[n]) + quote_from(files[n]) + b"\n"
                    for n in delivery_order(unlabelled, files))


def tree_digest(root: Path = OUT) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# -- the feature table (read from the bytes, so it cannot drift) ---------------------

def features(name: str, data: bytes) -> list[str]:
    msg = email.message_from_bytes(data)
    out = []
    heads = re.split(rb"\r?\n\r?\n", data, maxsplit=1)[0]
    if name in MALFORMED:
        out.append("malformed: " + MALFORMED[name])
    if b"\r\n" in data:
        out.append("CRLF line endings")
    for hdr in ("Subject", "From"):
        mo = re.search(rb"(?im)^" + hdr.encode() + rb":(.*(?:\r?\n[ \t].*)*)", heads)
        if mo:
            for cs, enc in sorted(set(re.findall(rb"=\?([^?]+)\?([BbQq])\?", mo.group(1)))):
                out.append(f"RFC 2047 {enc.decode().upper()} in {hdr} ({cs.decode().lower()})")
    if msg.is_multipart():
        types = [p.get_content_type() for p in msg.walk() if p.is_multipart()]
        out.append(("nested " if len(types) > 1 else "") + " + ".join(types))
    elif msg.get_content_type() == "text/html":
        out.append("HTML only")
    for p in msg.walk():
        if p.is_multipart():
            continue
        ct = p.get_content_type()
        cte = (p.get("Content-Transfer-Encoding") or "7bit").lower()
        cs = (p.get_content_charset() or "").lower()
        if ct.startswith("text/") and ct != "text/calendar":
            if cte in ("base64", "quoted-printable", "8bit"):
                out.append(f"{cte} text part")
            if cs and cs not in ("utf-8", "us-ascii"):
                out.append(f"charset {cs}")
        if ct == "text/calendar":
            out.append("calendar invitation (text/calendar)")
        disp = (p.get("Content-Disposition") or "").split(";")[0].strip().lower()
        if disp in ("attachment", "inline") and not ct.startswith("text/"):
            out.append(f"{disp} binary part ({ct}, base64)")
    for hdr in ("List-Id", "Reply-To", "In-Reply-To"):
        if msg[hdr] is not None:
            out.append(f"{hdr} header")
    if any(b"href=" in (p.get_payload(decode=True) or b"") for p in msg.walk()
           if p.get_content_type() == "text/html"):
        out.append("URL in an HTML href")
    return list(dict.fromkeys(out))


def feature_table(files: dict[str, bytes]) -> str:
    rows: dict[str, list[str]] = {}
    for name, data in files.items():
        for feature in features(name, data):
            rows.setdefault(feature, []).append(name)
    lines = ["| feature | files |", "|---|---|"]
    order = {folder: i for i, folder in enumerate(FOLDERS)}
    for feature in sorted(rows, key=lambda k: (k.startswith("malformed"), k.lower())):
        names = sorted(rows[feature], key=lambda n: (order[n.split("/")[0]], n))
        lines.append(f"| {feature} | {', '.join('`' + n + '`' for n in names)} |")
    return "\n".join(lines) + "\n"


# -- checks ---------------------------------------------------------------------------

def _decodes(data: bytes, cs: str) -> bool:
    try:
        data.decode(cs)
    except (UnicodeDecodeError, LookupError):
        return False
    return True


def check_message(name: str, data: bytes) -> list[str]:
    problems = []
    msg = email.message_from_bytes(data)
    leaves = [p for p in msg.walk() if not p.is_multipart()]
    payloads = [p.get_payload(decode=True) or b"" for p in leaves]  # decoding records defects
    defects = [type(d).__name__ for p in msg.walk() for d in p.defects]
    head = re.split(rb"\r?\n\r?\n", data, maxsplit=1)[0]
    if name not in MALFORMED:
        if defects:
            problems.append(f"unexpected defects {defects}")
        if msg["Date"] is None or email.utils.parsedate_to_datetime(msg["Date"]) is None:
            problems.append("no usable Date")
        if not all(msg[h] for h in ("From", "To", "Subject", "Message-ID", "Received")):
            problems.append("missing a standard header")
        if any(b > 127 for b in head):
            problems.append("8-bit bytes in the header")
        for part, payload in zip(leaves, payloads):
            if part.get_content_maintype() == "text" and \
                    not _decodes(payload, part.get_content_charset() or "us-ascii"):
                problems.append(f"a text part does not decode as {part.get_content_charset()}")
        modern = email.message_from_bytes(data, policy=email.policy.default)
        for _, value in modern.items():
            str(value)
        for part in modern.walk():
            if not part.is_multipart() and part.get_content_maintype() == "text":
                part.get_content()
    else:
        # Broken on purpose: the parser must still get *something* out of it.
        text = b"".join(payloads)
        if not text:
            problems.append("malformed message yields no payload at all")
        broken = {
            "no headers": "MissingHeaderBodySeparatorDefect" in defects,
            "boundary": "StartBoundaryNotFoundDefect" in defects,
            "base64": any(d.startswith("InvalidBase64") for d in defects),
            "lying charset": not _decodes(text, "utf-8"),
            "NUL": b"\x00" in text,
            "8-bit": any(b > 127 for b in head),
        }
        if not any(ok for way, ok in broken.items() if way in MALFORMED[name]):
            problems.append(f"tagged {MALFORMED[name]!r} but is not broken that way")
    for ip in re.findall(rb"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])", data):
        if all(int(o) < 256 for o in ip.split(b".")) and \
                not ip.startswith((b"192.0.2.", b"198.51.100.", b"203.0.113.")):
            problems.append(f"IP outside the RFC 5737 documentation ranges: {ip!r}")
    for host in re.findall(rb"https?://([A-Za-z0-9.-]+)", head + b"".join(payloads)):
        if not re.search(rb"(^|\.)example(\.(com|net|org))?$", host):
            problems.append(f"URL host not under example: {host!r}")
    if re.search(rb"(?im)^X-Spam", data):
        problems.append("carries a spam-filter header (X-Spam-*), which would leak the label")
    return [f"{name}: {p}" for p in problems]


def check_tree(root: Path = OUT, provenance: Path = PROVENANCE) -> list[str]:
    """Everything --check verifies; a list of problems, empty when all is well."""
    files = messages(root)
    problems = [p for name, data in files.items() for p in check_message(name, data)]
    problems += [f"{name}: listed in MALFORMED but missing" for name in MALFORMED if name not in files]
    for folder in FOLDERS:  # numbered 001, 002, ... in delivery order within each folder
        names = [n for n in files if n.startswith(folder + "/")]
        want = [f"{folder}/{i:03d}.eml" for i in range(1, len(names) + 1)]
        if delivery_order(names, files) != want:
            problems.append(f"{folder}/ is not numbered 001, 002, ... in delivery order")
    for made, product in (("index", make_index(files)), ("mbox", make_mbox(files))):
        if (root / made).read_bytes() != product:
            problems.append(f"sample/{made} is stale: run python corpora/make_sample.py")
    box = mailbox.mbox(str(root / "mbox"), create=False)
    try:
        got = [box.get_bytes(k) for k in box.keys()]
    finally:
        box.close()
    want = [files[n] for n in files if n.startswith("unlabelled/")]
    if [re.sub(rb"(?m)^>From ", b"From ", x) for x in got] != want:
        problems.append("mbox does not read back (mailbox.mbox) into the unlabelled files")
    if not any(re.search(rb"(?m)^>From ", x) for x in got):
        problems.append("mbox has no >From quoting to test")
    problems += check_provenance(files, root, provenance)
    return problems


def check_provenance(files: dict[str, bytes], root: Path, provenance: Path) -> list[str]:
    """PROVENANCE.md describes this tree: its counts, size, feature table and digest."""
    text = provenance.read_text(encoding="utf-8")
    problems = []
    fix = "update corpora/PROVENANCE.md from `python corpora/make_sample.py` (and --table)"
    if feature_table(files) not in text:
        problems.append(f"PROVENANCE.md's feature table differs from --table: {fix}")
    for folder in FOLDERS:
        n = sum(1 for name in files if name.startswith(folder + "/"))
        if f"| `sample/{folder}/NNN.eml` | {n} " not in text:
            problems.append(f"PROVENANCE.md does not give {n} {folder} messages: {fix}")
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    if f"Total size: {size:,} bytes." not in text:
        problems.append(f"PROVENANCE.md does not give the total size, {size:,} bytes: {fix}")
    digest = tree_digest(root)
    if f"`{digest}`" not in text:
        problems.append(f"PROVENANCE.md does not give the tree digest {digest}: {fix}")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if index, mbox or PROVENANCE.md is stale or a check fails")
    ap.add_argument("--table", action="store_true", help="print the MIME feature table (markdown)")
    args = ap.parse_args(argv)
    files = messages(OUT)
    if args.table:
        sys.stdout.write(feature_table(files))
        return 0
    if not args.check:
        (OUT / "index").write_bytes(make_index(files))
        (OUT / "mbox").write_bytes(make_mbox(files))
    counts = {f: sum(1 for n in files if n.startswith(f + "/")) for f in FOLDERS}
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"{counts['ham']} ham, {counts['spam']} spam, {counts['unlabelled']} unlabelled; "
          f"total size {size:,} bytes; tree sha256 {tree_digest(OUT)}")
    problems = check_tree(OUT)
    for problem in problems:
        print("PROBLEM:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
