#!/usr/bin/env python3
"""Generate the labelled sample corpus in ``corpora/sample/``.

Every message in the sample is written by this script. Nothing is copied from
any real corpus, and every host is a reserved ``example`` name or a made-up
``*.example`` host. Every IP address is in 192.0.2.0/24, 198.51.100.0/24 or
203.0.113.0/24 (RFC 5737). The output is byte-identical on every run: all
variation comes from one ``random.Random(SEED)``, dates are fixed, and the
messages are serialised by the small writer below rather than by
``email.generator``. That generator's header folding has changed between
Python versions, and it picks random MIME boundaries.

Usage::

    python corpora/make_sample.py           # (re)write corpora/sample/, then verify it
    python corpora/make_sample.py --check   # exit 1 if corpora/sample/ differs from a fresh run
    python corpora/make_sample.py --table   # print the MIME feature table for PROVENANCE.md

Layout written::

    sample/ham/NNN.eml, sample/spam/NNN.eml   labelled messages, numbered in delivery order
    sample/index                              TREC-style "<label> <relative path>" lines
    sample/unlabelled/NNN.eml                 six messages for a demo ``classify`` run
    sample/mbox                               the same six messages as one mbox (mboxo quoting)

No message carries a spam-filter verdict header (X-Spam-*), so the labels
cannot leak through the headers.
"""

from __future__ import annotations

import argparse
import base64
import email
import email.policy
import hashlib
import html
import mailbox
import quopri
import random
import re
import shutil
import struct
import sys
import tempfile
import textwrap
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

SEED = 20240304
HERE = Path(__file__).resolve().parent
OUT = HERE / "sample"

START = datetime(2024, 3, 4, tzinfo=timezone.utc)  # first delivery day (a Monday)
DAYS = 40

MX = "mx.lindenworks.example"
ROBIN = "robin@lindenworks.example"
ROBIN_HOME = "robin@ashdown.example"
ROBIN_TO = f"Robin Ashdown <{ROBIN}>"
ROBIN_HOME_TO = f"Robin Ashdown <{ROBIN_HOME}>"

UTC = timezone.utc
TZ = {h: timezone(timedelta(hours=h)) for h in (-8, -5, 0, 1, 2, 3, 8, 9)}
IST = timezone(timedelta(hours=5, minutes=30))

MONTHS = ["January", "February", "March", "April", "May", "June", "July",
          "August", "September", "October", "November", "December"]
MON = [m[:3] for m in MONTHS]
WDAY = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
NETS = ("192.0.2", "198.51.100", "203.0.113")


# --------------------------------------------------------------------------
# Small, explicit MIME writer
# --------------------------------------------------------------------------

def dedent(s: str) -> str:
    """Dedent a triple-quoted block and make it end with exactly one newline."""
    return textwrap.dedent(s).strip("\n") + "\n"


def rfc_date(dt: datetime, tz: timezone = UTC) -> str:
    return format_datetime(dt.astimezone(tz))


def long_date(dt: datetime) -> str:
    return f"{dt.day} {MONTHS[dt.month - 1]} {dt.year}"


def q_word(s: str, cs: str) -> str:
    out = []
    for b in s.encode(cs):
        c = chr(b)
        if b == 0x20:
            out.append("_")
        elif b < 128 and (c.isalnum() or c in "!*+-/"):
            out.append(c)
        else:
            out.append("=%02X" % b)
    return f"=?{cs}?Q?{''.join(out)}?="


def b_word(s: str, cs: str) -> str:
    return f"=?{cs}?B?{base64.b64encode(s.encode(cs)).decode('ascii')}?="


def ew(s: str, cs: str, enc: str, limit: int = 66) -> str:
    """RFC 2047 encode ``s``; split into several words, folded, when long."""
    make = q_word if enc == "Q" else b_word
    words, cur = [], ""
    for ch in s:
        if cur and len(make(cur + ch, cs)) > limit:
            words.append(make(cur, cs))
            cur = ch
        else:
            cur += ch
    if cur:
        words.append(make(cur, cs))
    return "\n ".join(words)


def addr(name: str | None, mailaddr: str, cs: str = "utf-8", enc: str = "Q") -> str:
    if not name:
        return mailaddr
    if not name.isascii():
        return f"{ew(name, cs, enc)} <{mailaddr}>"
    if any(c in name for c in ',.;:@()<>"\''):
        return f'"{name}" <{mailaddr}>'
    return f"{name} <{mailaddr}>"


@dataclass
class Part:
    headers: list
    body: bytes


def encode_body(raw: bytes, cte: str) -> bytes:
    if cte == "quoted-printable":
        out = quopri.encodestring(raw)
    elif cte == "base64":
        out = base64.encodebytes(raw)
    else:
        out = raw
    if not out.endswith(b"\n"):
        out += b"\n"
    return out


def text_part(text: str, subtype: str = "plain", cs: str = "utf-8", cte: str = "7bit",
              raw: bytes | None = None, extra=(), params: str = "") -> Part:
    data = text.encode(cs) if raw is None else raw
    if cte == "7bit":
        assert all(b < 128 for b in data), "7bit part with 8-bit data"
    headers = [("Content-Type", f'text/{subtype}; charset="{cs}"{params}'),
               ("Content-Transfer-Encoding", cte)]
    return Part(headers + list(extra), encode_body(data, cte))


def attachment(data: bytes, ctype: str, filename: str, disposition: str = "attachment",
               extra=()) -> Part:
    headers = [("Content-Type", f'{ctype}; name="{filename}"'),
               ("Content-Disposition", f'{disposition}; filename="{filename}"'),
               ("Content-Transfer-Encoding", "base64")]
    return Part(headers + list(extra), encode_body(data, "base64"))


def multipart(subtype: str, parts: list, boundary: str, preamble: str | None = None,
              params: str = "") -> Part:
    b = boundary.encode("ascii")
    body = b""
    if preamble:
        body += preamble.encode("ascii") + b"\n"
    for i, p in enumerate(parts):
        body += (b"" if i == 0 else b"\n") + b"--" + b + b"\n" + render_part(p)
    body += b"\n--" + b + b"--\n"
    headers = [("Content-Type", f'multipart/{subtype};{params}\n\tboundary="{boundary}"')]
    return Part(headers, body)


def render_headers(headers) -> bytes:
    out = b""
    for name, value in headers:
        if isinstance(value, str):
            value = value.encode("ascii")
        out += name.encode("ascii") + b": " + value + b"\n"
    return out


def render_part(p: Part) -> bytes:
    return render_headers(p.headers) + b"\n" + p.body


def render_message(top, part: Part | None, mime: bool = True, crlf: bool = False) -> bytes:
    headers = list(top)
    if part is None:
        raise ValueError("message needs a body part")
    if mime:
        headers.append(("MIME-Version", "1.0"))
        headers += part.headers
    data = render_headers(headers) + b"\n" + part.body
    if crlf:
        assert b"\r" not in data
        data = data.replace(b"\n", b"\r\n")
    return data


URL_RE = re.compile(r"https?://[^\s<>\"]+[^\s<>\".,;:)]")


def htmlize(text: str) -> str:
    """Plain text to simple HTML paragraphs with every URL made a link."""
    out = []
    for para in text.strip("\n").split("\n\n"):
        esc = html.escape(para, quote=False)
        esc = URL_RE.sub(lambda m: f'<a href="{m.group(0)}">{m.group(0)}</a>', esc)
        out.append("<p>" + esc.replace("\n", "<br>\n") + "</p>")
    return "\n".join(out)


def html_page(inner: str, cs: str = "utf-8", head: str = "", body_attrs: str = "") -> str:
    return (f'<html>\n<head>\n<meta http-equiv="Content-Type" content="text/html; charset={cs}">\n'
            f"{head}</head>\n<body{body_attrs}>\n{inner}\n</body>\n</html>\n")


# --------------------------------------------------------------------------
# Binary attachments, made here (no external files)
# --------------------------------------------------------------------------

def make_png(w: int, h: int, seed: int) -> bytes:
    """A real, valid RGB PNG: a soft gradient. Stored deflate (level 0) so the
    bytes never depend on the zlib version."""
    rows = []
    for y in range(h):
        row = bytearray([0])
        for x in range(w):
            row += bytes(((x * 255 // max(w - 1, 1) + seed * 37) % 256,
                          (y * 255 // max(h - 1, 1) + seed * 11) % 256,
                          (128 + seed * 53 + x * y) % 256))
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 0))
            + chunk(b"IEND", b""))


def make_pdf(lines: list[str]) -> bytes:
    """A tiny one-page PDF with a correct xref table."""
    text = " ".join(f"({ln.replace('(', '[').replace(')', ']')}) Tj 0 -16 Td" for ln in lines)
    stream = f"BT /F1 11 Tf 40 760 Td {text} ET".encode("latin-1")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
    offsets = []
    for i, obj in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return out


def make_ics(*, uid: str, stamp: datetime, start: datetime, minutes: int, summary: str,
             location: str, organizer: tuple, attendees: list, description: str,
             method: str = "REQUEST", sequence: int = 0) -> bytes:
    def z(dt: datetime) -> str:
        return dt.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")

    def esc(s: str) -> str:  # RFC 5545 TEXT escaping
        return s.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,").replace("\n", "\\n")

    lines = ["BEGIN:VCALENDAR", "PRODID:-//textnb//sample generator//EN", "VERSION:2.0",
             f"METHOD:{method}", "BEGIN:VEVENT", f"UID:{uid}", f"DTSTAMP:{z(stamp)}",
             f"DTSTART:{z(start)}", f"DTEND:{z(start + timedelta(minutes=minutes))}",
             f"SEQUENCE:{sequence}", f"SUMMARY:{esc(summary)}", f"LOCATION:{esc(location)}",
             f"ORGANIZER;CN={organizer[0]}:mailto:{organizer[1]}"]
    for name, mail in attendees:
        lines.append(f"ATTENDEE;CN={name};ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;"
                     f"RSVP=TRUE:mailto:{mail}")
    lines += [f"DESCRIPTION:{esc(description)}", "STATUS:CONFIRMED", "END:VEVENT", "END:VCALENDAR"]
    folded = []
    for ln in lines:  # RFC 5545 folding at 75 octets
        while len(ln) > 75:
            folded.append(ln[:75])
            ln = " " + ln[75:]
        folded.append(ln)
    return ("\r\n".join(folded) + "\r\n").encode("utf-8")


# --------------------------------------------------------------------------
# Deterministic randomness and trace headers
# --------------------------------------------------------------------------

@dataclass
class Mail:
    label: str           # "ham" or "spam" (unlabelled ones still carry their true class)
    kind: str
    when: datetime       # arrival at our MX; sets the delivery order
    data: bytes
    malformed: str = ""  # short tag for deliberately broken messages
    unlabelled: bool = False
    envelope: str = ""   # envelope sender, for the mbox "From " line
    name: str = ""       # relative path, set when numbered


class Gen:
    def __init__(self, seed: int = SEED):
        self.r = random.Random(seed)
        self.mails: list[Mail] = []

    # -- random helpers ---------------------------------------------------
    def pick(self, seq):
        return self.r.choice(seq)

    def when(self, day: int | None = None, hours=(7, 23)) -> datetime:
        r = self.r
        d = r.randrange(DAYS) if day is None else day
        return START + timedelta(days=d, hours=r.randrange(*hours), minutes=r.randrange(60),
                                 seconds=r.randrange(60))

    def chars(self, n: int, alphabet: str = "0123456789abcdef") -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def qid(self) -> str:
        return "4T" + self.chars(10, "BCDFGHJKLMNPQRSTVWXYZbcdfghjklmnpqrstvwxyz0123456789")

    def ip(self, net: str | None = None) -> str:
        return f"{net or self.pick(NETS)}.{self.r.randrange(2, 254)}"

    def msgid(self, domain: str, t: datetime, style: str = "plain") -> str:
        if style == "uuid":
            c = self.chars
            return f"<{c(8)}-{c(4)}-{c(4)}-{c(4)}-{c(12)}@{domain}>"
        if style == "outlook":
            up = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
            return f"<AM{self.chars(4, up)}MB{self.chars(4)}{self.chars(20, up)}@{domain}>"
        if style == "spam":
            return f"<{self.chars(6, '0123456789')}.{self.chars(12, 'ABCDEFGHJKLMNPQRSTUVWXYZ')}@{domain}>"
        return f"<{t.astimezone(UTC):%Y%m%d%H%M%S}.{self.chars(10)}@{domain}>"

    def boundary(self, style: str = "plain") -> str:
        if style == "outlook":
            return f"_000_{self.chars(24, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}_"
        if style == "tb":
            return "------------" + self.chars(24, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        if style == "nextpart":
            up = "0123456789ABCDEF"
            return f"----=_NextPart_000_{self.chars(4, up)}_01DA{self.chars(4, up)}.{self.chars(8, up)}"
        return f"=_{self.chars(16)}"

    # -- Received chains (returned top-most first) --------------------------
    def _mx_hop(self, t, helo, rdns, ip, rcpt, tls=True) -> str:
        origin = f"{helo} ({rdns} [{ip}])" if helo != rdns else f"{helo} ({helo} [{ip}])"
        proto = "ESMTPS" if tls else "ESMTP"
        return (f"from {origin}\n\tby {MX} (Postfix) with {proto} id {self.qid()}"
                f"\n\tfor <{rcpt}>; {rfc_date(t)}")

    def route_external(self, t, host, rcpt=ROBIN, client_ip=None, webmail=False):
        """Sender's mail server -> our MX; optionally the client's submission hop."""
        ip = self.ip()
        hops = [self._mx_hop(t, host, host, ip, rcpt)]
        t1 = t - timedelta(seconds=self.r.randrange(1, 9))
        if client_ip:
            how = "HTTP" if webmail else "ESMTPSA"
            hops.append(f"from [{client_ip}] (unknown [{client_ip}])\n\tby {host} with {how} id "
                        f"{self.chars(12, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}; {rfc_date(t1)}")
            t1 -= timedelta(seconds=self.r.randrange(0, 4))
        return hops, t1

    def route_internal(self, t, ws_host, rcpt=ROBIN):
        ip = self.ip("203.0.113")
        hop = (f"from {ws_host} ({ws_host} [{ip}])\n\tby {MX} (Postfix) with ESMTPSA id "
               f"{self.qid()}\n\tfor <{rcpt}>; {rfc_date(t)}")
        return [hop], t - timedelta(seconds=self.r.randrange(0, 3))

    def route_local(self, t, host, rcpt):
        """Cron / daemon mail: local pickup on ``host``, then relayed to the MX."""
        t1 = t - timedelta(seconds=self.r.randrange(1, 4))
        hops = [self._mx_hop(t, host, host, self.ip("203.0.113"), rcpt, tls=True),
                f"by {host} (Postfix, from userid 0)\n\tid {self.qid()}; {rfc_date(t1)}"]
        return hops, t1

    def route_list(self, t, origin_host, list_addr, list_host="mail.lists.example.org", rcpt=ROBIN):
        t1 = t - timedelta(seconds=self.r.randrange(2, 40))
        hops = [self._mx_hop(t, list_host, list_host, self.ip("198.51.100"), rcpt),
                f"from {origin_host} ({origin_host} [{self.ip()}])\n\tby {list_host} (Postfix) "
                f"with ESMTPS id {self.qid()}\n\tfor <{list_addr}>; {rfc_date(t1)}"]
        return hops, t1 - timedelta(seconds=self.r.randrange(1, 9))

    def route_spam(self, t, rcpt=ROBIN, forged_host=None):
        """Botnet-ish delivery: bad HELO, no reverse DNS, sometimes a forged inner hop."""
        ip = self.ip()
        helo = self.pick(["USER-PC", "localhost", "[%s]" % ip, "WIN-" + self.chars(8, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
                          "dyn-%s.pool.broadband.example" % ip.replace(".", "-"), "mail.%s" % (forged_host or "example.com")])
        rdns = "unknown" if self.r.random() < 0.6 else "dyn-%s.pool.broadband.example" % ip.replace(".", "-")
        hops = [self._mx_hop(t, helo, rdns, ip, rcpt, tls=self.r.random() < 0.4)]
        t1 = t - timedelta(seconds=self.r.randrange(0, 20))
        if forged_host:
            fip = self.ip()
            hops.append(f"from smtp.{forged_host} ([{fip}])\n\tby {helo} with SMTP id "
                        f"{self.chars(9, '0123456789')}; {rfc_date(t1 - timedelta(hours=self.r.randrange(0, 30)))}")
        return hops, t1

    # -- message assembly ---------------------------------------------------
    def add(self, *, label, kind, when, hops, sent, frm, to, subject, part, envelope,
            tz=UTC, msgid=None, date=True, cc=None, reply_to=None, in_reply_to=None,
            references=None, mailer=None, pre=(), post=(), crlf=False, mime=True,
            malformed="", unlabelled=False, rcpt=ROBIN, order="std") -> Mail:
        top = [("Return-Path", f"<{envelope}>"), ("Delivered-To", rcpt)]
        top += [("Received", h) for h in hops]
        top += list(pre)
        body = []
        if date:
            body.append(("Date", rfc_date(sent, tz)))
        body += [("From", frm), ("To", to)]
        if cc:
            body.append(("Cc", cc))
        body.append(("Subject", subject))
        if order == "spam":
            body.reverse()
        if msgid:
            body.append(("Message-ID", msgid))
        if reply_to:
            body.append(("Reply-To", reply_to))
        if in_reply_to:
            body.append(("In-Reply-To", in_reply_to))
            body.append(("References", references or in_reply_to))
        if mailer:
            body.append(mailer if isinstance(mailer, tuple) else ("X-Mailer", mailer))
        body += list(post)
        data = render_message(top + body, part, mime=mime, crlf=crlf)
        m = Mail(label, kind, when, data, malformed, unlabelled, envelope)
        self.mails.append(m)
        return m


def alt(g: Gen, text: str, html_text: str, cs: str = "utf-8", cte: str = "quoted-printable",
        style: str = "plain", html_cte: str | None = None) -> Part:
    return multipart("alternative", [text_part(text, "plain", cs, cte),
                                     text_part(html_text, "html", cs, html_cte or cte)],
                     g.boundary(style))


# --------------------------------------------------------------------------
# Ham
# --------------------------------------------------------------------------

TB = ("User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:115.0) Gecko/20100101 Thunderbird/115.8.1")
OUTLOOK = "Microsoft Outlook 16.0"
MUTT = ("User-Agent", "Mutt/2.2.12 (2023-09-09)")


def colleague(g: Gen, sender: tuple, ws: str, when: datetime, subject: str, part: Part, *,
              tz=TZ[0], style="plain", mailer=TB, **kw) -> Mail:
    name, mail = sender
    hops, sent = g.route_internal(when, ws)
    frm = kw.pop("frm", None) or addr(name, mail)
    return g.add(label="ham", kind="colleague", when=when, hops=hops, sent=sent, frm=frm,
                 to=kw.pop("to", ROBIN_TO), subject=subject, part=part, envelope=mail, tz=tz,
                 msgid=g.msgid("lindenworks.example", sent, style), mailer=mailer, **kw)


PRIYA = ("Priya Nair", "priya.nair@lindenworks.example")
TOMASZ = ("Tomasz Wójcik", "tomasz.wojcik@lindenworks.example")
HANNAH = ("Hannah Okafor", "hannah.okafor@lindenworks.example")
JURGEN = ("Jürgen Hoffmann", "juergen.hoffmann@lindenworks.example")
AIKO = ("Aiko Tanaka", "aiko.tanaka@lindenworks.example")
MARCUS = ("Marcus Lindqvist", "marcus.lindqvist@lindenworks.example")
FELIX = ("Félix Moreau", "felix@atelier-moreau.example")


def ham_colleagues(g: Gen) -> None:
    w = g.when(day=3, hours=(9, 11))
    colleague(g, PRIYA, "ws-priya.lindenworks.example", w,
              "Mail server migration: plan for the weekend", text_part(dedent("""\
        Hi Robin,

        Here is the plan for moving the mail server to the new box on Saturday, as
        discussed on Monday:

        1. Friday 18:00 - lower the TTL on the MX and A records to 300 seconds.
        2. Saturday 08:00 - stop delivery on the old host, final rsync of /var/vmail.
        3. Switch the MX record, start the new host, test IMAP from two clients.
        4. Keep the old host running read-only until Wednesday, then wipe it.

        The checklist is on the wiki under Infrastructure/Migration. If you can be on
        call between 8 and 11 that would be great; I'll handle the DNS side.

        Thanks,
        Priya
        """), params="; format=flowed"))

    w = g.when(hours=(8, 17))
    colleague(g, TOMASZ, "ws-tomasz.lindenworks.example", w,
              "Backup retention - how long do we keep the dailies?", text_part(dedent("""\
        Hi Robin,

        The backup volume on the NAS is at 81% again. Right now we keep 30 daily,
        12 weekly and 24 monthly snapshots. I think we could drop to 14 dailies
        without losing anything we have ever actually restored from — the last three
        restore requests were all for files less than a week old.

        Could you check whether the accountants need anything older for the
        year-end close? If not I'll change the prune settings on Monday.

        Pozdrawiam / cheers,
        Tomasz Wójcik
        """), cte="quoted-printable"), frm=addr(*TOMASZ, "utf-8", "Q"), tz=TZ[1])

    w = g.when(hours=(8, 17))
    pdf = make_pdf(["Lindenworks Ltd - Q1 report (DRAFT)", "1. Summary", "2. Projects",
                    "3. Infrastructure costs: hosting, hardware, licences", "4. Outlook for Q2"])
    colleague(g, HANNAH, "ws-hannah.lindenworks.example", w,
              "Q1 report draft (PDF attached)", multipart("mixed", [text_part(dedent("""\
        Robin,

        Attached is the first draft of the Q1 report. Pages 3-4 have the
        infrastructure costs; can you check the hosting and hardware numbers? I took
        them from the February invoices but I'm not sure the new disks for the NAS
        are in there yet.

        I need comments back by Thursday so I can send it to the partners on Friday.

        Hannah
        """)), attachment(pdf, "application/pdf", "Q1-report-draft.pdf")], g.boundary("tb")))

    w = g.when(hours=(8, 17))
    colleague(g, JURGEN, "nb-juergen.lindenworks.example", w,
              ew("Zugang zum Dateiserver / file server access", "iso-8859-1", "Q"),
              text_part(dedent("""\
        Hallo Robin,

        kannst du mir bitte Zugriff auf den Ordner "Projekte/Kunden 2024" geben? Ich
        bekomme beim Öffnen immer "Zugriff verweigert".

        (In English, for the ticket: I can't open the 2024 client projects share from
        my laptop. From the office desktop it works, so it may be the group
        membership on my new account.)

        Danke und viele Grüße,
        Jürgen
        """), cs="iso-8859-1", cte="quoted-printable"),
              frm=addr(*JURGEN, "iso-8859-1", "Q"), tz=TZ[1], mailer=MUTT)

    w = g.when(hours=(0, 9))
    colleague(g, AIKO, "nb-aiko.lindenworks.example", w,
              ew("来週の打ち合わせ (meeting next week)", "iso-2022-jp", "B"),
              text_part(dedent("""\
        Robinさん

        お疲れさまです。田中です。
        来週の打ち合わせですが、火曜日の午後二時からでいかがでしょうか。
        新しいサーバーの見積もりを持って行きます。

        (English: could we meet on Tuesday at 14:00 next week? I will bring the quote
        for the new server.)

        よろしくお願いします。
        田中 愛子
        """), cs="iso-2022-jp", cte="7bit"),
              frm=addr(*AIKO), tz=TZ[9])

    w = g.when(hours=(8, 17))
    text = dedent("""\
        Hi Robin,

        The old 16-port switch in the server cupboard is dropping link on ports 9–12 again. I’ve ordered a replacement (same model, fanless) – it should arrive on Wednesday.

        Could we swap it on Thursday after 17:00? It’s about 20 minutes of downtime for the office network. I’ll label the cables before we start.

        Best regards,
        Marcus Lindqvist
        Lindenworks Ltd · Office & IT
        """)
    inner = "\n".join(f'<p class="MsoNormal">{html.escape(p, quote=False)}<o:p></o:p></p>'
                      for p in text.strip().split("\n") if p)
    htm = html_page(f'<div class="WordSection1">\n{inner}\n</div>', "windows-1252",
                    '<style><!-- p.MsoNormal {margin:0cm; font-size:11.0pt; font-family:"Calibri",sans-serif;} --></style>\n',
                    ' lang="EN-GB" link="#0563C1" vlink="#954F72"')
    colleague(g, MARCUS, "ws-marcus.lindenworks.example", w,
              "Switch replacement in the server cupboard",
              alt(g, text, htm, "windows-1252", style="outlook"), mailer=OUTLOOK, style="outlook",
              post=[("Thread-Index", "AdpM" + g.chars(24, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")),
                    ("Content-Language", "en-gb")])

    w = g.when(day=8, hours=(9, 17))
    asked = w - timedelta(days=1, hours=2)
    orig = g.msgid("lindenworks.example", asked)
    colleague(g, PRIYA, "ws-priya.lindenworks.example", w,
              "Re: DNS change for the shop subdomain", text_part(dedent(f"""\
        Done - shop.lindenworks.example now points at the new host (a CNAME to
        web2.lindenworks.example). The TTL is back to 3600.

        On {asked:%d/%m/%Y} {asked:%H:%M}, Robin Ashdown wrote:
        > Can you switch the shop subdomain over once the certificate is issued?
        > The old server can stay up until the end of the month.

        Priya
        """)), in_reply_to=orig)

    w = g.when(hours=(8, 17))
    colleague(g, HANNAH, "ws-hannah.lindenworks.example", w,
              "Toner supplier invoice - OK to pay?", text_part(dedent("""\
        Hi Robin,

        The invoice from the toner supplier came in (INV-88213, £146.20 incl. VAT).
        It matches the order you placed on the 4th. OK for me to approve the payment
        from the business account this week? The PDF is in Finance/Incoming.

        Thanks,
        Hannah
        """), cte="8bit"))

    w = g.when(hours=(8, 17))
    colleague(g, MARCUS, "ws-marcus.lindenworks.example", w,
              "VPN certificates expire on Friday", text_part(dedent("""\
        Hi everyone,

        The client certificates for the office VPN expire on Friday. New ones are
        ready: open the self-service page at https://vpn.lindenworks.example/renew and
        log in with your normal account password. It takes about a minute, and you'll
        need to re-import the profile on your phone afterwards.

        If the page says your account is locked, ping me and I'll reset it.

        Marcus
        """)), mailer=OUTLOOK, style="outlook", to="staff@lindenworks.example")

    w = g.when(hours=(7, 16))
    hops, sent = g.route_external(w, "smtp.atelier-moreau.example", client_ip=g.ip())
    g.add(label="ham", kind="colleague", when=w, hops=hops, sent=sent,
          frm=addr(*FELIX, "utf-8", "B"), to=ROBIN_TO, subject="Feedback on the mock-ups",
          part=text_part(dedent("""\
        Bonjour Robin,

        Thanks for sending the mock-ups so quickly. The team liked version B — the
        darker header and the smaller logo. Two small things: the contact form needs a
        field for the company name, and the footer should say "Atelier Moreau" rather
        than "Moreau Atelier".

        Could you send an updated quote including the hosting for the first year? We
        would like to sign before the end of the month.

        Bien à vous,
        Félix Moreau
        Atelier Moreau · Lyon
        """), cte="base64"), envelope=FELIX[1], tz=TZ[1],
          msgid=g.msgid("atelier-moreau.example", sent, "uuid"),
          mailer="Apple Mail (2.3774.400.31)")

    w = g.when(hours=(8, 17))
    colleague(g, TOMASZ, "ws-tomasz.lindenworks.example", w,
              "Code review: backup-verify script", text_part(dedent("""\
        Robin,

        I pushed the verify script to the infra repo (branch tomasz/verify-restores).
        It picks random files from last night's snapshot, restores them to /tmp and
        compares checksums. Would you have a look before I add it to cron? I'm mostly
        worried about the clean-up when a restore fails halfway.

          $ ./verify-restore.sh --snapshot latest --samples 5
          OK  5/5 files restored and verified (2.1 s)

        Tomasz
        """)), frm=addr(*TOMASZ, "utf-8", "B"), tz=TZ[1], crlf=True, mailer=OUTLOOK,
              style="outlook")

    w = g.when(hours=(8, 17))
    colleague(g, PRIYA, "ws-priya.lindenworks.example", w,
              "Team lunch on the 28th", text_part(dedent("""\
        Hi all,

        The café on Mill Street made us an offer for the end-of-quarter lunch: a set
        menu for 12 people at £18 each, vegetarian options included, and they'll keep
        the back room for us from 12:30. Reply by Friday if you're coming or if you
        have any dietary needs.

        Priya
        """), cte="8bit"), to="staff@lindenworks.example")

    # Deliberately malformed: the attachment's base64 is damaged (illegal
    # characters, a broken line and no padding), as a flaky scanner might send it.
    w = g.when(hours=(8, 17))
    good = base64.encodebytes(make_pdf(["Contract - Atelier Moreau website", "Signed: F. Moreau"]))
    lines = good.decode("ascii").splitlines()
    bad = lines[:3] + [lines[3][:40] + "%%~" + lines[3][40:58], "!!" + lines[4][2:]] + [lines[5][:29]]
    att = Part([("Content-Type", 'application/pdf; name="contract-signed.pdf"'),
                ("Content-Disposition", 'attachment; filename="contract-signed.pdf"'),
                ("Content-Transfer-Encoding", "base64")], ("\n".join(bad) + "\n").encode("ascii"))
    colleague(g, HANNAH, "ws-hannah.lindenworks.example", w, "Signed contract scan",
              multipart("mixed", [text_part(dedent("""\
        Robin, here is the scan of the signed contract for the Moreau project. The
        scanner was acting up again, so tell me if the file doesn't open and I'll
        rescan it tomorrow.
        H.
        """)), att], g.boundary("tb")), malformed="invalid base64 in attachment")

    w = g.when(hours=(7, 10))
    colleague(g, MARCUS, "ws-marcus.lindenworks.example", w,
              "Your mailbox quota", text_part(dedent("""\
        Hi Robin,

        Heads up: your mailbox was at 94% of its quota this morning (9.4 of 10 GB),
        mostly the Sent folder from 2019-2021. I raised the quota to 15 GB on the
        server so nothing bounces, but could you archive the old folders when you get
        a minute?

        No need to click anything - just drag them to the "Archive" folder in your
        mail client and the nightly job moves them to the NAS.

        Marcus
        """)), mailer=OUTLOOK, style="outlook")


HOMELAB = dict(name="homelab", id="Home lab admins <homelab.lists.example.org>")
SMALLMAIL = dict(name="smallmail-users", id="smallmail users <smallmail-users.lists.example.org>")
LIST_FOOTER = dedent("""\
    _______________________________________________
    {name} mailing list
    {name}@lists.example.org
    https://lists.example.org/mailman/listinfo/{name}
    """)


def list_post(g: Gen, lst: dict, sender: tuple, host: str, when: datetime, subject: str,
              text: str, *, cte="7bit", cs="utf-8", reply_to_id=None, crlf=False,
              unlabelled=False, mailer=None) -> Mail:
    name = lst["name"]
    hops, sent = g.route_list(when, host, f"{name}@lists.example.org")
    body = text + "\n" + LIST_FOOTER.format(name=name)
    prefix = "[homelab] " if name == "homelab" else "[smallmail] "
    if subject.startswith("Re: "):
        subject = "Re: " + prefix + subject[4:]
    else:
        subject = prefix + subject
    post = [("List-Id", lst["id"]),
            ("List-Unsubscribe", f"<https://lists.example.org/mailman/options/{name}>,\n"
                                 f" <mailto:{name}-request@lists.example.org?subject=unsubscribe>"),
            ("List-Archive", f"<https://lists.example.org/archives/{name}/>"),
            ("List-Post", f"<mailto:{name}@lists.example.org>"),
            ("List-Help", f"<mailto:{name}-request@lists.example.org?subject=help>"),
            ("Precedence", "list"),
            ("Sender", f'"{name}" <{name}-bounces@lists.example.org>'),
            ("Errors-To", f"{name}-bounces@lists.example.org")]
    return g.add(label="ham", kind="list", when=when, hops=hops, sent=sent,
                 frm=addr(*sender), to=f"{name}@lists.example.org", subject=subject,
                 part=text_part(body, cs=cs, cte=cte), envelope=f"{name}-bounces@lists.example.org",
                 tz=g.pick([TZ[0], TZ[1], TZ[-5], TZ[2]]), msgid=g.msgid(sender[1].split("@")[1], sent),
                 in_reply_to=reply_to_id, post=post, crlf=crlf, unlabelled=unlabelled,
                 mailer=mailer)


DMITRI = ("Dmitri Volkov", "dmitri.volkov@example.net")
GRACE = ("Grace Liu", "grace.liu@example.com")
OWEN = ("Owen Pritchard", "owen@pritchard.example")
INES = ("Inês Carvalho", "ines@carvalho.example")
SAM = ("Sam O'Brien", "sam.obrien@example.org")
NADIA = ("Nadia Haddad", "nadia@smallmail.example.org")
KWAME = ("Kwame Mensah", "kwame@mensah.example")


def ham_lists(g: Gen) -> None:
    ups = list_post(g, HOMELAB, DMITRI, "mail.example.net", g.when(day=5), "UPS recommendations for a small rack",
                    dedent("""\
        Hi list,

        My NAS and router sit on a cheap UPS that gives about 6 minutes of runtime,
        which is not enough for a clean ZFS shutdown plus the switch. I'm looking at
        line-interactive models around 1500 VA. Does anyone have one that talks to
        NUT over USB without a vendor driver? Bonus points if the fan is quiet, since
        the rack lives in a hallway cupboard.

        Dmitri
        """), mailer=MUTT)
    list_post(g, HOMELAB, GRACE, "smtp.example.com", g.when(day=6), "Re: UPS recommendations for a small rack",
              dedent("""\
        > Does anyone have one that talks to NUT over USB without a vendor driver?

        Mine shows up as a generic HID power device and the usbhid-ups driver picks
        it up with no extra config. Runtime with a NAS, a router and a mini PC is
        about 22 minutes. The fan only spins while it recharges after an outage.

        One tip: test the shutdown sequence with "upsmon -c fsd" before you trust it.
        The first time, mine powered the switch off before the NAS had finished
        syncing.

        Grace
        """), reply_to_id=re.search(rb"Message-ID: (<[^>]+>)", ups.data).group(1).decode())
    tls = list_post(g, SMALLMAIL, OWEN, "mx1.pritchard.example", g.when(day=12), "TLS errors after upgrading to 3.2",
                    dedent("""\
        Hello,

        After upgrading to 3.2 my outbound queue fills up with "TLS handshake failed:
        no shared cipher" for about a third of the recipient domains. The config is
        unchanged; the log shows:

          smtp[2211]: 198.51.100.77: TLS handshake failed: no shared cipher
          smtp[2211]: deferred: 42 messages for example.net

        Did the default cipher list change? I couldn't find anything about it in the
        release notes.

        – Owen
        """), cte="quoted-printable")
    list_post(g, SMALLMAIL, INES, "mail.carvalho.example", g.when(day=13), "Re: TLS errors after upgrading to 3.2",
              dedent("""\
        Hi Owen,

        Yes, 3.2 dropped the legacy ciphers from the default list. Add this to
        smallmail.conf to get the old behaviour back while the remote side catches
        up:

            tls_ciphers = default:legacy

        and reload. The release notes mention it under "Security", which I agree is
        easy to miss. A fix for the docs is in the tracker.

        Ines
        """), reply_to_id=re.search(rb"Message-ID: (<[^>]+>)", tls.data).group(1).decode(), crlf=True)
    list_post(g, HOMELAB, SAM, "mail.example.org", g.when(day=17), "Monitoring disk temperatures",
              dedent("""\
        What do people use to keep an eye on disk temperatures? smartctl in a cron
        job works, but I'd like graphs and an alert when a drive goes above 45 C.
        I already run a small Prometheus for the router, so an exporter would be
        ideal. Bonus question: is 41 C at idle for a 3.5" drive in a closed cupboard
        something to worry about?

        Sam
        """))
    list_post(g, HOMELAB, GRACE, "smtp.example.com", g.when(day=21), "Re: Self-hosted calendar and contacts",
              dedent("""\
        > Is anyone running their own CalDAV server for the family?

        We have used one for three years with five people. Phones sync fine once you
        add the account by hand. The only trouble we had was a shared calendar that
        my father kept deleting events from, which turned out to be a permissions
        mistake on my side.

        Grace
        """))
    list_post(g, SMALLMAIL, NADIA, "mail.smallmail.example.org", g.when(day=24), "ANNOUNCE: smallmail 3.2.1 released",
              dedent("""\
        smallmail 3.2.1 is a bug-fix release.

        Changes:
         * Restore the legacy cipher list as an opt-in setting (tls_ciphers).
         * Fix a crash in the queue runner when a message has an empty envelope
           sender.
         * Documentation: a new section on DKIM key rotation.

        Tarballs and checksums: https://smallmail.example.org/download/3.2.1/

        Thanks to everyone who reported and tested.
        Nadia, for the smallmail team
        """))
    list_post(g, HOMELAB, KWAME, "mail.mensah.example", g.when(day=30), "Offsite backups: rclone or restic?",
              dedent("""\
        My storage provider has an offer on at the moment: 1 TB for 3 EUR a month for
        the first year. I'd like to send encrypted nightly backups there from the NAS
        (about 600 GB, mostly photos). restic, or rclone with a crypt remote? What I
        care about most is how painful a full restore is when the house burns down.

        Kwame
        """))


SHOP = ("Copperleaf Books", "orders@copperleaf-books.example")
VOLTBOX = ("Voltbox Components", "sales@voltbox.example")
SHOP_FOOT = dedent("""\
    Copperleaf Books, 14 Tanner's Row, Bristol
    Questions? Reply to this email or call 0117 496 0321.
    """)


def shop_mail(g: Gen, sender, host, when, subject, part, **kw) -> Mail:
    hops, sent = g.route_external(when, host)
    return g.add(label="ham", kind="shop", when=when, hops=hops, sent=sent, frm=addr(*sender),
                 to=kw.pop("to", ROBIN_TO), subject=subject, part=part,
                 envelope="bounce-" + g.chars(8) + "@" + host.split(".", 1)[1], tz=TZ[0],
                 msgid=g.msgid(host, sent), **kw)


def ham_shop(g: Gen) -> None:
    w = g.when(day=2, hours=(19, 23))
    order = "CB-204881"
    text = dedent(f"""\
        Hello Robin,

        Thank you for your order. We'll email you again when it ships.

        Order: {order}
        Placed: {long_date(w)}

          1 x Running Mail for Small Teams (paperback)     £24.99
          1 x A Field Guide to Hedgerow Birds              £12.50
              Delivery (standard, 2-4 working days)         £2.95
              Total charged to card ending 4417            £40.44

        You can see the order at any time in your account:
        https://www.copperleaf-books.example/account/orders/{order}

        """) + SHOP_FOOT
    htm = html_page('<table width="600" style="font-family:Georgia,serif">\n<tr><td>'
                    + htmlize(text) + "</td></tr>\n</table>")
    shop_mail(g, SHOP, "mail.copperleaf-books.example", w,
              f"Your Copperleaf Books order {order} is confirmed", alt(g, text, htm))

    w2 = w + timedelta(days=1, hours=3)
    track = "SP55" + g.chars(8, "0123456789") + "GB"
    inner = (f'<h2 style="color:#2e5e3e">Your order is on its way</h2>\n'
             f"<p>Hello Robin,</p>\n<p>Good news: order <b>{order}</b> left our warehouse today "
             f"with Swiftparcel.</p>\n<p>Tracking number: <b>{track}</b><br>\n"
             f'<a href="https://track.swiftparcel.example/t/{track}">Track your parcel</a></p>\n'
             f"<p>Expected delivery: {long_date(w2 + timedelta(days=2))}.</p>\n"
             f'<p style="font-size:11px;color:#777">Copperleaf Books, 14 Tanner\'s Row, Bristol. '
             f'<a href="https://www.copperleaf-books.example/help/delivery">Delivery help</a></p>')
    shop_mail(g, SHOP, "mail.copperleaf-books.example", w2, f"Your order {order} has shipped",
              text_part(html_page(inner), "html", cte="quoted-printable"))

    w3 = w + timedelta(days=1, hours=4)
    pdf = make_pdf(["Copperleaf Books - VAT invoice CL-2024-11873", f"Order {order}",
                    "Running Mail for Small Teams  24.99", "A Field Guide to Hedgerow Birds  12.50",
                    "Delivery  2.95", "Total  40.44 GBP (paid by card)"])
    shop_mail(g, SHOP, "mail.copperleaf-books.example", w3, f"Invoice for your order {order}",
              multipart("mixed", [text_part(dedent(f"""\
        Hello Robin,

        Please find attached the VAT invoice for your order {order} (invoice
        CL-2024-11873). The amount was charged to your card on {long_date(w)}, so
        there is nothing left to pay.

        Keep this email for your records. Your past invoices are also in your account
        under Orders > Invoices.

        """) + SHOP_FOOT, cte="8bit"), attachment(pdf, "application/pdf", "CL-2024-11873.pdf")],
                        g.boundary()))

    w4 = g.when(day=19, hours=(9, 18))
    shop_mail(g, SHOP, "mail.copperleaf-books.example", w4, "Refund issued for order CB-205302",
              text_part(dedent("""\
        Hello Robin,

        We're sorry your copy of "A Year of Sourdough" arrived with a damaged cover.
        We have refunded £12.50 to the card ending 4417. Depending on your bank it can
        take 3-5 working days to show up. You don't need to send the book back.

        """) + SHOP_FOOT, cte="quoted-printable"))

    w5 = g.when(day=9, hours=(10, 20))
    text = dedent("""\
        Hi Robin,

        Thanks for shopping with Voltbox. Your order VB-77120 is confirmed.

          2 x 8 TB NAS hard drive, 7200 rpm, CMR        EUR 398.00
          1 x SATA cable set (4 pcs)                     EUR   9.90
          Shipping                                       EUR   0.00
          Total (incl. VAT)                              EUR 407.90

        Payment: bank transfer received, thank you.
        Your account: https://www.voltbox.example/account

        The Voltbox team
        """)
    htm = html_page('<div style="font-family:Arial,sans-serif;max-width:560px">\n' + htmlize(text) + "\n</div>")
    shop_mail(g, VOLTBOX, "out.voltbox.example", w5, "Voltbox order VB-77120 confirmed",
              alt(g, text, htm, cte="base64"))

    w6 = g.when(day=26, hours=(10, 20))
    text = dedent("""\
        Hello Robin,

        As a Voltbox account holder you get early access to our spring offer: 15% off
        NAS drives, UPS units and small switches until 15 April. The discount is
        applied at checkout when you’re logged in – no code needed.

        This week’s picks:
        – 4-bay NAS enclosure, fanless controller
        – 1500 VA line-interactive UPS with USB monitoring
        – 8-port managed switch, passive cooling

        Shop the offer: https://www.voltbox.example/spring?ref=mail
        You get this email because you opted in to offers in your account settings.
        Unsubscribe: https://www.voltbox.example/account/email
        """)
    htm = html_page('<div style="font-family:Arial,sans-serif">\n' + htmlize(text) + "\n</div>", "windows-1252")
    shop_mail(g, VOLTBOX, "out.voltbox.example", w6, "Spring offer for Voltbox account holders",
              alt(g, text, htm, "windows-1252"),
              post=[("List-Unsubscribe", "<https://www.voltbox.example/account/email>"),
                    ("List-Id", "Voltbox offers <offers.voltbox.example>")])


MUM = ("Margaret Ashdown", "maggie.ashdown@example.net")
OLLIE = ("Oliver Ashdown", "ollie.ashdown@example.com")
CLAIRE = ("Claire Benning", "claire.benning@example.org")
SYLVIE = ("Sylvie Marchand", "sylvie.marchand@example.net")


def family(g: Gen, sender, host, when, subject, part, *, tz=TZ[0], **kw) -> Mail:
    hops, sent = g.route_external(when, host, rcpt=ROBIN_HOME, client_ip=g.ip(), webmail=True)
    return g.add(label="ham", kind="family", when=when, hops=hops, sent=sent,
                 frm=kw.pop("frm", None) or addr(*sender), to=kw.pop("to", ROBIN_HOME_TO),
                 subject=subject, part=part, envelope=sender[1], tz=tz,
                 msgid=g.msgid(host.split(".", 1)[1], sent, kw.pop("style", "plain")),
                 rcpt=ROBIN_HOME, **kw)


def ham_family(g: Gen) -> None:
    family(g, MUM, "smtp.example.net", g.when(hours=(9, 21)), "Sunday lunch", text_part(dedent("""\
        Hello love,

        Are you and Sam still coming on Sunday? Dad is doing the lamb, so tell me by
        Friday if Sam is still not eating meat and I'll do the mushroom thing again.

        Also the printer has stopped working again. It says "offline" but the light is
        on. Could you have a look when you're here? No rush.

        Lots of love,
        Mum
        """)))

    photo = make_png(16, 12, 3)
    family(g, OLLIE, "smtp.example.com", g.when(hours=(17, 23)), "photos from the weekend",
           multipart("mixed", [text_part(dedent("""\
        Here's the one of the kids on the pier, the rest are in the shared album. The
        others are too big to email. Can you check the album still works from your
        server? Jess said it asked her for a password.

        O.
        """)), attachment(photo, "image/png", "pier.png")], g.boundary("tb")), mailer=TB)

    text = dedent("""\
        Hi Rob,

        Mum turns 70 on the 14th of April and I think we should do something bigger
        than lunch. Ideas so far:

        - a weekend in the cottage near Keswick (I've asked about dates)
        - a photo book from all the old albums (you have the scans on your server,
          right?)

        Can you and Ollie chip in? I'll sort out the booking if we go for the cottage.

        Claire x

        Sent from my phone
        """)
    family(g, CLAIRE, "smtp.example.org", g.when(day=7, hours=(19, 23)), "Mum's 70th - ideas?",
           alt(g, text, html_page('<div dir="ltr">' + htmlize(text) + "</div>"), style="tb"))

    family(g, SYLVIE, "smtp.example.net", g.when(hours=(8, 20)),
           ew("Nouvelles de Rouen, et l'été", "iso-8859-1", "Q"), text_part(dedent("""\
        Cher Robin,

        Merci pour ta carte, elle est arrivée hier. Ici tout va bien : le jardin est
        plein de jonquilles et Henri a enfin réparé la barrière. Nous pensons venir en
        Angleterre en août, si cela vous convient. Est-ce que ta mère t'a parlé de la
        fête pour ses 70 ans ?

        Je t'embrasse,
        Tante Sylvie
        """), cs="iso-8859-1", cte="quoted-printable"), tz=TZ[1])

    # Deliberately malformed: declares utf-8 but the bytes are windows-1252
    # (typed in a word processor and pasted into an old webmail).
    recipe = dedent("""\
        Here’s Gran’s fish pie recipe you asked for. I’ve typed it out from the card:

        - 600 g smoked haddock and a bit of cod
        - 500 ml milk, a bay leaf
        - 4 eggs, hard boiled
        - a big spoon of crème fraîche
        - mashed potato for the top, with some grated cheese

        Poach the fish in the milk, make a white sauce with the milk afterwards, mix it
        all in the dish and put the mash on top. 40 minutes at 190°. Don’t skimp on the
        parsley!

        Mum
        """)
    family(g, MUM, "smtp.example.net", g.when(hours=(9, 21)), "Recipe you asked for",
           text_part("", cs="utf-8", cte="8bit", raw=recipe.encode("windows-1252")),
           malformed="lying charset (utf-8 declared, windows-1252 bytes)")

    w = g.when(day=16, hours=(18, 22))
    fixed = w - timedelta(hours=20)
    family(g, OLLIE, "smtp.example.com", w, "Re: router", text_part(dedent(f"""\
        Thanks for fixing it! The internet is back and the kids have stopped
        complaining. What did you change? Just in case it happens again while you're
        away.

        Ollie

        On {WDAY[fixed.weekday()]}, {long_date(fixed)} at {fixed:%H:%M}, Robin wrote:
        > I've restarted it remotely and turned off the setting that kept dropping
        > the 5 GHz network. Tell me if it's still slow tonight.
        """)), crlf=True, in_reply_to=g.msgid("ashdown.example", fixed))

    family(g, CLAIRE, "smtp.example.org", g.when(day=27, hours=(17, 22)), "Train times for Saturday",
           text_part(dedent("""\
        Got the tickets 🎉 The train gets in at 11:42, could you pick us up from the
        station? If it's easier we can take the bus to yours. Bringing the good cake.

        C x
        """), cte="base64"))


def invite(g: Gen, *, label, kind, sender, host, when, subject, summary, location, start,
           minutes, attendees, description, internal=False, crlf=False, with_html=False,
           ics_attach=False, tz=TZ[0], rcpt=ROBIN, sequence=0):
    name, mail = sender
    uid = g.chars(8) + "-" + g.chars(4) + "@" + host.split(".", 1)[1]
    ics = make_ics(uid=uid, stamp=when, start=start, minutes=minutes, summary=summary,
                   location=location, organizer=sender, attendees=attendees,
                   description=description, sequence=sequence)
    local = start.astimezone(tz)
    text = dedent(f"""\
        {summary}
        When: {WDAY[local.weekday()]} {long_date(local)}, {local:%H:%M}-{(local + timedelta(minutes=minutes)):%H:%M} ({local:%z})
        Where: {location}
        Organiser: {name} <{mail}>

        """) + description + "\n"
    cal_cte = "7bit" if crlf else "base64"
    cal = Part([("Content-Type", 'text/calendar; charset="utf-8"; method=REQUEST'),
                ("Content-Transfer-Encoding", cal_cte)],
               ics.replace(b"\r\n", b"\n") if crlf else encode_body(ics, "base64"))
    parts = [text_part(text, cte="quoted-printable" if not text.isascii() else "7bit")]
    if with_html:
        parts.append(text_part(html_page(htmlize(text)), "html", cte="quoted-printable"))
    parts.append(cal)
    body = multipart("alternative", parts, g.boundary())
    if ics_attach:
        body = multipart("mixed", [body, attachment(ics, "application/ics", "invite.ics")], g.boundary())
    if internal:
        hops, sent = g.route_internal(when, host, rcpt=rcpt)
    else:
        hops, sent = g.route_external(when, host, rcpt=rcpt)
    return g.add(label=label, kind=kind, when=when, hops=hops, sent=sent, frm=addr(name, mail),
                 to=", ".join(addr(n, m) for n, m in attendees), subject=subject, part=body,
                 envelope=mail, tz=tz, msgid=g.msgid(host.split(".", 1)[1], sent), crlf=crlf, rcpt=rcpt)


def ham_calendar(g: Gen) -> None:
    me = ("Robin Ashdown", ROBIN)
    w = g.when(day=3, hours=(12, 16))  # Thu 7 Mar; the meeting is on Fri 8 Mar
    invite(g, label="ham", kind="calendar", sender=PRIYA, host="ws-priya.lindenworks.example",
           when=w, internal=True,
           subject="Invitation: Mail server migration - go/no-go @ Fri 15:30",
           summary="Mail server migration - go/no-go", location="Meeting room 2 / video call",
           start=(w + timedelta(days=1)).replace(hour=15, minute=30, second=0), minutes=30,
           attendees=[me, MARCUS],
           description="Last check before Saturday: backups verified, DNS TTL lowered, rollback plan agreed.")

    w = g.when(day=14, hours=(9, 12))
    invite(g, label="ham", kind="calendar", sender=HANNAH, host="ws-hannah.lindenworks.example",
           when=w, internal=True, with_html=True, ics_attach=True,
           subject="Invitation: Quarterly review with the partners @ Thu 28 Mar 10:00",
           summary="Quarterly review with the partners", location="Board room",
           start=datetime(2024, 3, 28, 10, 0, tzinfo=UTC), minutes=90,
           attendees=[me, PRIYA, MARCUS, TOMASZ],
           description="Agenda: Q1 numbers, the hosting budget for Q2, hiring a part-time support person.")

    w = g.when(day=8, hours=(9, 12))  # Tue 12 Mar; the swap is on Thu 14 Mar
    invite(g, label="ham", kind="calendar", sender=MARCUS, host="ws-marcus.lindenworks.example",
           when=w, internal=True, crlf=True, sequence=1,
           subject="Updated invitation: Switch replacement (Thu 17:00)",
           summary="Switch replacement in the server cupboard", location="Server cupboard, 1st floor",
           start=(w + timedelta(days=2)).replace(hour=17, minute=0, second=0), minutes=60,
           attendees=[me],
           description="Moved by one hour. The network will be down for about 20 minutes.")

    w = g.when(day=18, hours=(19, 22))
    invite(g, label="ham", kind="calendar", sender=CLAIRE, host="smtp.example.org",
           when=w, rcpt=ROBIN_HOME,
           subject="Invitation: Mum's 70th - planning call",
           summary="Mum's 70th - planning call (don't tell Mum!)", location="Video call, link to follow",
           start=(w + timedelta(days=2)).replace(hour=19, minute=30, second=0), minutes=45,
           attendees=[("Robin Ashdown", ROBIN_HOME), OLLIE],
           description="Cottage or photo book? Bring ideas and your calendar for April.")

    w = g.when(day=22, hours=(8, 11))
    invite(g, label="ham", kind="calendar", sender=FELIX, host="smtp.atelier-moreau.example",
           when=w, tz=TZ[1],
           subject="Invitation: Project kick-off, Atelier Moreau website",
           summary="Kick-off: Atelier Moreau website", location="Atelier Moreau, Lyon / video call",
           start=(w + timedelta(days=7)).replace(hour=9, minute=0, second=0), minutes=60,
           attendees=[me, HANNAH],
           description="Scope, timeline, hosting and who signs off on what. Coffee provided.")


def cron(g: Gen, host: str, when: datetime, subject: str, text: str, *, sender=None,
         env_cmd: str | None = None, unlabelled=False) -> Mail:
    fqdn = f"{host}.lindenworks.example"
    hops, sent = g.route_local(when, fqdn, ROBIN)
    sender = sender or ("Cron Daemon", f"root@{fqdn}")
    post = []
    if env_cmd is not None:
        post = [("X-Cron-Env", "<SHELL=/bin/sh>"), ("X-Cron-Env", "<HOME=/root>"),
                ("X-Cron-Env", "<PATH=/usr/bin:/bin>"), ("X-Cron-Env", "<LOGNAME=root>")]
    return g.add(label="ham", kind="cron", when=when, hops=hops, sent=sent, frm=addr(*sender),
                 to=f"root@{fqdn}", subject=subject, part=text_part(text), envelope=sender[1],
                 msgid=g.msgid(fqdn, sent), post=post, unlabelled=unlabelled,
                 pre=[("X-Original-To", f"root@{fqdn}")])


def backup_report(g: Gen, when: datetime, ok: bool = True) -> str:
    d = when.strftime("%Y-%m-%d")
    size = f"{g.r.randrange(80, 260) / 100:.2f}"
    dur = f"{g.r.randrange(3, 11)}m{g.r.randrange(60):02d}s"
    if ok:
        return dedent(f"""\
            backup started {d} 02:30:01
            snapshot tank/data@nightly-{d} created
            sending incremental stream to backup.lindenworks.example ... done ({size} GiB, {dur})
            pruning: kept 30 daily, 12 weekly, 24 monthly; removed 1 snapshot
            backup finished, status OK
            """)
    return dedent(f"""\
        backup started {d} 02:30:01
        snapshot tank/data@nightly-{d} created
        sending incremental stream to backup.lindenworks.example ...
        rsync: connection unexpectedly closed (0 bytes received so far) [sender]
        rsync error: error in rsync protocol data stream (code 12) at io.c(232)
        backup FAILED after 3 attempts; snapshot kept locally, will retry at 04:30
        """)


def ham_cron(g: Gen) -> None:
    cmd = "/usr/local/sbin/nightly-backup"
    w = g.when(day=11, hours=(2, 3))
    cron(g, "nas", w, f"Cron <root@nas> {cmd}", backup_report(g, w), env_cmd=cmd)
    w = g.when(day=20, hours=(2, 3))
    cron(g, "nas", w, f"Cron <root@nas> {cmd}", backup_report(g, w, ok=False), env_cmd=cmd)

    w = g.when(hours=(0, 6))
    cron(g, "nas", w, "SMART error (CurrentPendingSector) detected on host: nas", dedent(f"""\
        This message was generated by the smartd daemon running on:

           host name:  nas
           DNS domain: lindenworks.example

        The following warning/error was logged by the smartd daemon:

        Device: /dev/sdc [SAT], 8 Currently unreadable (pending) sectors

        Device info:
        HDD-8T-0001, S/N:ZA{g.chars(6, "0123456789ABCDEF")}, FW:SC60, 8.00 TB

        For details see host's SYSLOG.

        You can also use the smartctl utility for further investigation.
        Another message will be sent in 24 hours if the problem persists.
        """), sender=("root", "root@nas.lindenworks.example"))

    w = g.when(hours=(6, 7))
    cron(g, "mx", w, "Cron <root@mx> apt-get -qq update && apt list --upgradable", dedent("""\
        Listing...
        libssl3/stable-security 3.0.13-1~deb12u1 amd64 [upgradable from: 3.0.11-1~deb12u2]
        openssl/stable-security 3.0.13-1~deb12u1 amd64 [upgradable from: 3.0.11-1~deb12u2]
        tzdata/stable-updates 2024a-0+deb12u1 all [upgradable from: 2023c-5+deb12u1]
        libc-bin/stable 2.36-9+deb12u4 amd64 [upgradable from: 2.36-9+deb12u3]
        libc6/stable 2.36-9+deb12u4 amd64 [upgradable from: 2.36-9+deb12u3]
        """), env_cmd="apt")

    w = g.when(hours=(3, 5))
    cron(g, "web2", w, "Cron <root@web2> certbot renew --quiet", dedent("""\
        Failed to renew certificate shop.lindenworks.example with error: Some challenges
        have failed.
        All renewals failed. The following certificates could not be renewed:
          /etc/letsencrypt/live/shop.lindenworks.example/fullchain.pem (failure)
        1 renew failure(s), 0 parse failure(s)
        Hint: the HTTP-01 challenge got a 404. Check that port 80 still reaches this host.
        """), env_cmd="certbot")

    w = g.when(hours=(6, 8))
    cron(g, "nas", w, "[nas] disk usage warning: /srv/photos at 91%", dedent("""\
        Filesystem        Size  Used Avail Use% Mounted on
        tank/data         7.1T  4.9T  2.2T  70% /srv/data
        tank/photos       1.8T  1.6T  166G  91% /srv/photos
        tank/vmail        400G  212G  188G  54% /var/vmail

        Threshold: 90%. Largest new directories since yesterday:
          23G  /srv/photos/ollie/2024-03-phone-backup
           4G  /srv/photos/claire/shared-album
        """), sender=("disk monitor", "monitor@nas.lindenworks.example"))

    w = g.when(hours=(6, 7))
    bad = [g.ip("192.0.2") for _ in range(3)]
    cron(g, "mx", w, "Logwatch for mx (Linux)", dedent(f"""\
        ################### Logwatch 7.8 (01/22/23) ####################
               Processing Initiated: {w:%a %b %d %H:%M:%S %Y}
               Date Range Processed: yesterday
               Detail Level of Output: 0
               Logfiles for Host: mx
        ##################################################################

         --------------------- Dovecot Begin ------------------------
         Dovecot IMAP and POP3 Successful Logins: 214
         Authentication failures (pam_unix): 9 times for unknown account
         --------------------- Dovecot End -------------------------

         --------------------- Postfix Begin ------------------------
            1.204M  Bytes accepted
               612  Accepted
                41  Rejected (RBL and unknown sender domain)
                 3  Bounced (mailbox quota, user unknown)
         --------------------- Postfix End -------------------------

         --------------------- SSHD Begin ------------------------
         Failed logins from:
            {bad[0]}: 37 times
            {bad[1]}: 12 times
            {bad[2]}: 5 times
         Illegal users from:
            {bad[0]}: admin, test, oracle, ubuntu
         --------------------- SSHD End -------------------------

         ###################### Logwatch End #########################
        """), sender=("logwatch", "logwatch@mx.lindenworks.example"))

    w = g.when(hours=(0, 24))
    ip = g.ip("198.51.100")
    lines = "\n".join(f"{MON[w.month - 1]} {w.day:2d} {w.hour:02d}:{m:02d}:{g.r.randrange(60):02d} mx sshd[{g.r.randrange(20000, 40000)}]: "
                      f"Failed password for invalid user {u} from {ip} port {g.r.randrange(30000, 60000)} ssh2"
                      for m, u in zip(sorted(g.r.sample(range(max(w.minute, 6)), 4)), ["admin", "pi", "git", "backup"]))
    cron(g, "mx", w, f"[Fail2Ban] sshd: banned {ip} from mx", dedent(f"""\
        Hi,

        The IP {ip} has just been banned by Fail2Ban after
        6 attempts against sshd.

        Lines containing the IP:
        """) + lines + "\n\nRegards,\nFail2Ban\n", sender=("Fail2Ban", "fail2ban@mx.lindenworks.example"))


NEWS = ("Self-Hosted Weekly", "issue@selfhosted-weekly.example")

NEWS_ISSUES = [
    (112, [("Running your own DNS resolver, a year later",
            "What broke, what did not, and why the author still would not go back.", "dns-resolver-year"),
           ("Backups you never tested are not backups",
            "A short, practical routine for monthly restore drills at home.", "restore-drills"),
           ("Tool of the week: a tiny status page",
            "One static binary, one config file, and your family stops asking whether the server is down.", "status-page")]),
    (113, [("Why mail from your home server lands in spam",
            "SPF, DKIM and DMARC in plain words, with a checklist you can finish in an evening.", "spf-dkim-dmarc"),
           ("Review: three fanless mini PCs",
            "Power draw, idle temperatures and how each one copes with four containers.", "fanless-review"),
           ("Sponsor: early-bird offer for Homelab Days",
            "Conference tickets are 30% off until 31 March. Two days of talks and a repair cafe.", "homelab-days")]),
    (114, [("ZFS scrubs: how often is often enough?",
            "Numbers from forty readers' pools, plotted against drive age.", "zfs-scrub"),
           ("Self-hosting a photo library for the whole family",
            "Shared albums, face search on a small CPU, and keeping the grandparents happy.", "family-photos"),
           ("Reader question: my ISP changes my IP every night",
            "Dynamic DNS, a cheap relay host, or a tunnel: the trade-offs.", "dynamic-ip")]),
    (115, [("The quiet rack",
            "Fan curves, foam and why the UPS is usually the loudest box.", "quiet-rack"),
           ("Certificates without tears",
            "Automating renewals and getting an alert before anything expires.", "cert-renewals"),
           ("Free workshop: your first home server",
            "A free online session for beginners on 6 April. Bring a spare laptop.", "workshop")]),
    (116, [("Reader survey results",
            "1,204 of you answered. Most common OS, most hated chore, most loved tool.", "survey-2024"),
           ("Greylisting in 2024: still worth it?",
            "Measured on a small office server over three months.", "greylisting"),
           ("Power cuts and your NAS",
            "Configuring NUT so everything shuts down in the right order.", "nut-order")]),
    (117, [("Mailing lists are not dead",
            "Why a plain list beats a chat room for a small community.", "mailing-lists"),
           ("Cheap offsite storage, compared",
            "Price per TB, egress fees and restore speed for five providers.", "offsite-storage"),
           ("Tool of the week: a log summariser",
            "Daily digest of what your servers did, in twenty lines.", "log-digest")]),
]


def ham_newsletter(g: Gen) -> None:
    for i, (num, items) in enumerate(NEWS_ISSUES):
        w = START + timedelta(days=2 + 7 * i, hours=7, minutes=g.r.randrange(60), seconds=g.r.randrange(60))
        uid = g.chars(12)
        text = f"Self-Hosted Weekly - issue #{num}\n\nHello Robin, here is this week's reading.\n\n"
        rows = []
        for title, blurb, slug in items:
            url = f"https://selfhosted-weekly.example/r/{num}/{slug}"
            text += f"* {title}\n  {blurb}\n  {url}\n\n"
            rows.append(f'<tr><td style="padding:8px 0"><a href="{url}" style="font-size:17px;color:#1a5f7a">'
                        f"{html.escape(title)}</a><br>\n{html.escape(blurb)}</td></tr>")
        unsub = f"https://selfhosted-weekly.example/unsubscribe?u={uid}"
        text += ("You are receiving this because you subscribed at selfhosted-weekly.example.\n"
                 f"Unsubscribe: {unsub}\n")
        htm = html_page(f'<table width="600" align="center" style="font-family:Helvetica,Arial,sans-serif">\n'
                        f'<tr><td><h1 style="color:#1a5f7a">Self-Hosted Weekly #{num}</h1>'
                        f"<p>Hello Robin, here is this week's reading.</p></td></tr>\n"
                        + "\n".join(rows)
                        + f'\n<tr><td style="font-size:11px;color:#888">You subscribed at selfhosted-weekly.example. '
                          f'<a href="{unsub}">Unsubscribe</a></td></tr>\n</table>')
        if i == 3:
            part = text_part(htm, "html", cte="quoted-printable")
        elif i == 2:
            part = alt(g, text, htm, cte="7bit", html_cte="base64")
        else:
            part = alt(g, text, htm, cte="7bit", html_cte="quoted-printable")
        hops, sent = g.route_external(w, "mta3.selfhosted-weekly.example")
        g.add(label="ham", kind="newsletter", when=w, hops=hops, sent=sent, frm=addr(*NEWS),
              to=ROBIN, subject=f"Self-Hosted Weekly #{num}: {items[0][0]}", part=part,
              envelope=f"bounce+{uid}@selfhosted-weekly.example",
              msgid=g.msgid("selfhosted-weekly.example", sent),
              post=[("List-Id", "Self-Hosted Weekly <weekly.selfhosted-weekly.example>"),
                    ("List-Unsubscribe", f"<{unsub}>"),
                    ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
                    ("Precedence", "bulk")])


def ham_misc(g: Gen) -> None:
    w = g.when(day=29, hours=(9, 17))
    pdf = make_pdf(["Ravensworth Accounting - invoice RA-2024-031", "Bookkeeping, March 2024",
                    "Payroll for 6 employees", "Total due: 480.00 GBP, within 30 days"])
    hops, sent = g.route_external(w, "mail.ravensworth-accounting.example", client_ip=g.ip())
    g.add(label="ham", kind="misc", when=w, hops=hops, sent=sent,
          frm=addr("Ravensworth Accounting", "accounts@ravensworth-accounting.example"), to=ROBIN_TO,
          cc=addr(*HANNAH), subject="Invoice RA-2024-031 - March bookkeeping",
          part=multipart("mixed", [text_part(dedent("""\
        Dear Robin,

        Please find attached our invoice RA-2024-031 for the March bookkeeping and
        payroll. Payment is due within 30 days to the account on the invoice, which is
        the same account as always - our bank details have not changed.

        Kind regards,
        Elaine Fisher
        Ravensworth Accounting
        """)), attachment(pdf, "application/pdf", "RA-2024-031.pdf")], g.boundary("nextpart")),
          envelope="accounts@ravensworth-accounting.example", msgid=g.msgid("ravensworth-accounting.example", sent),
          mailer=OUTLOOK)

    w = g.when(day=15, hours=(4, 9))
    hops, sent = g.route_external(w, "mail.hostmeadow.example")
    g.add(label="ham", kind="misc", when=w, hops=hops, sent=sent,
          frm=addr("Hostmeadow Domains", "renewals@hostmeadow.example"), to=ROBIN,
          subject="Renewal reminder: lindenworks.example expires in 30 days",
          part=text_part(dedent(f"""\
        Hello Robin Ashdown,

        The domain lindenworks.example expires on {long_date(w + timedelta(days=30))}.
        Auto-renew is switched on for your account, so we will charge the card on file
        (ending 4417) seven days before that date. You don't need to do anything.

        To change your renewal settings, log in to your account at
        https://www.hostmeadow.example/ (type the address yourself; we never send
        login links in renewal reminders).

        Hostmeadow Domains - customer account 118204
        """)), envelope="renewals@hostmeadow.example", msgid=g.msgid("hostmeadow.example", sent))

    w = g.when(day=5, hours=(5, 8))
    text = dedent("""\
        Dear Mr Ashdown,

        Your statement for the business current account ending 7730 is ready to view
        in online banking and in the Northgate app.

        For your security this email contains no links. To read your statement, open
        the app or type the bank's address into your browser yourself.

        Northgate Bank
        """)
    hops, sent = g.route_external(w, "mailout.northgate-bank.example")
    g.add(label="ham", kind="misc", when=w, hops=hops, sent=sent,
          frm=addr("Northgate Bank", "no-reply@northgate-bank.example"), to=ROBIN,
          subject="Your March statement is ready", part=alt(g, text, html_page(htmlize(text))),
          envelope="bounces@northgate-bank.example", msgid=g.msgid("northgate-bank.example", sent))

    w = g.when(hours=(18, 23))
    token = g.chars(32)
    hops, sent = g.route_external(w, "mail.forum.example.org")
    g.add(label="ham", kind="misc", when=w, hops=hops, sent=sent,
          frm=addr("Homelab Forum", "noreply@forum.example.org"), to=ROBIN,
          subject="[Homelab Forum] Password reset",
          part=text_part(dedent(f"""\
        Somebody asked to reset the password for your account "robin_a" on
        forum.example.org.

        If it was you, follow this link within one hour to choose a new password:
        https://forum.example.org/u/password-reset/{token}

        If it wasn't you, ignore this email; your password has not been changed.
        """)), envelope="noreply@forum.example.org", msgid=g.msgid("forum.example.org", sent))

    w = g.when(day=12, hours=(10, 16))
    hops, sent = g.route_external(w, "mail.riverline-broadband.example")
    g.add(label="ham", kind="misc", when=w, hops=hops, sent=sent,
          frm=addr("Riverline Broadband", "service@riverline-broadband.example"), to=ROBIN_HOME,
          subject="Planned maintenance on your line, 19 March 00:00-04:00",
          part=text_part(dedent("""\
        Hello,

        We're upgrading equipment at your local exchange. Your broadband may drop for
        up to 30 minutes between 00:00 and 04:00 on 19 March. Your router will
        reconnect by itself; there is nothing you need to do.

        Your account number: RB-55120394
        Service status at any time: https://status.riverline-broadband.example/

        Riverline Broadband
        """), cte="quoted-printable"), rcpt=ROBIN_HOME,
          envelope="service@riverline-broadband.example", msgid=g.msgid("riverline-broadband.example", sent))

    w = g.when(day=4, hours=(7, 9))
    text = dedent(f"""\
        Hello Robin,

        Your parcel SP55{g.chars(8, "0123456789")}GB from Copperleaf Books will be delivered
        tomorrow between 10:15 and 11:15.

        Not in? Choose a neighbour or a safe place:
        https://track.swiftparcel.example/manage

        Swiftparcel
        """)
    hops, sent = g.route_external(w, "notify.swiftparcel.example")
    g.add(label="ham", kind="misc", when=w, hops=hops, sent=sent,
          frm=addr("Swiftparcel", "notifications@swiftparcel.example"), to=ROBIN,
          subject="Your parcel arrives tomorrow, 10:15-11:15",
          part=alt(g, text, html_page(htmlize(text))), envelope="bounce@notify.swiftparcel.example",
          msgid=g.msgid("notify.swiftparcel.example", sent))


# --------------------------------------------------------------------------
# Spam
# --------------------------------------------------------------------------

SPAM_MAILERS = ["Microsoft Outlook Express 6.00.2900.5512", "The Bat! (v4.0.24) Professional",
                "PHPMailer 5.2.9 (https://github.example/PHPMailer)", "Mailer 2.1", "Foxmail 7, 2, 9, 156[cn]"]


def spam(g: Gen, *, kind, frm, subject, part, envelope, msgid_dom, to=ROBIN, forged=None,
         when=None, tz=None, mailer=True, **kw) -> Mail:
    when = when or g.when(hours=(0, 24))
    hops, sent = g.route_spam(when, forged_host=forged)
    tz = tz or g.pick([TZ[-8], TZ[-5], TZ[1], TZ[3], TZ[8], IST])
    if mailer is True:
        mailer = g.pick(SPAM_MAILERS)
    return g.add(label="spam", kind=kind, when=when, hops=hops, sent=sent, frm=frm, to=to,
                 subject=subject, part=part, envelope=envelope, tz=tz,
                 msgid=g.msgid(msgid_dom, sent, "spam"), mailer=mailer or None,
                 order=kw.pop("order", g.pick(["std", "spam"])), **kw)


def spam_html(body: str, cs: str = "utf-8") -> str:
    return html_page(f'<table width="580" border="0" cellpadding="6" bgcolor="#ffffff">\n<tr><td>\n'
                     f'<font face="Arial" size="3">\n{body}\n</font>\n</td></tr>\n</table>', cs,
                     body_attrs=' bgcolor="#f2f2f2"')


def spam_pharmacy(g: Gen) -> None:
    host = "pharma-deals.example"
    link = f"http://{host}/?rid={g.chars(6, '0123456789')}"
    spam(g, kind="pharmacy", frm=addr("Online Pharmacy", f"sales@{host}"),
         subject="Up to 80% off your prescriptions - no doctor visit needed",
         envelope=f"bounce{g.chars(5, '0123456789')}@{host}", msgid_dom=host,
         part=text_part(spam_html(
             f'<h1><font color="#cc0000">BIG SAVINGS ON MEDS!!!</font></h1>\n'
             f"<p>Sildenafil 100mg - from <b>$0.89</b> per pill<br>\nTadalafil 20mg - from <b>$1.15</b> per pill<br>\n"
             f"Weight loss, sleep aids, pain relief - all without a prescription!</p>\n"
             f'<p><a href="{link}"><font size="5" color="#0000ff">&gt;&gt; CLICK HERE TO ORDER NOW &lt;&lt;</font></a></p>\n'
             f"<p>Discreet packaging. Worldwide shipping. 100% satisfaction guaranteed.</p>\n"
             f'<p><font size="1" color="#999999">To stop receiving these offers <a href="http://{host}/unsub">click here</a>.</font></p>'),
             "html", cte="7bit"))

    host = "rx-discount-store.example"
    text = dedent(f"""\
        Hello,

        Your discount order is waiting. Top quality generic medication at factory
        prices:

          Sildenafil ........ $0.99
          Tadalafil ......... $1.25
          Modafinil ......... $1.80
          Anti-anxiety ...... $1.45

        No prescription, no questions, fast delivery to your door in 7-14 days.
        Order now and get 4 bonus pills FREE with every order!

        http://{host}/order?c={g.chars(8)}

        Best regards,
        Customer service team
        """)
    spam(g, kind="pharmacy", frm=addr("Pharmacy Customer Service", f"info@{host}"),
         subject="Re: your order #" + g.chars(5, "0123456789"), envelope=f"info@{host}", msgid_dom=host,
         part=alt(g, text, spam_html(htmlize(text)), cte="quoted-printable", style="nextpart"))

    host = "meds-direct-24.example"
    spam(g, kind="pharmacy", frm=addr("Meds Direct", f"noreply@{host}"),
         subject=ew("Men’s health – special price this week only", "windows-1252", "Q"),
         envelope=f"noreply@{host}", msgid_dom=host,
         part=text_part(dedent(f"""\
        Feel like you’re 20 again!

        S1ldenafil and T@dalafil – generic versions of the most popular
        men’s health pills – at up to 75% less than your local pharmacy.

        • No embarrassing doctor visits
        • Shipped in plain packaging
        • Pay by card or bitcoin

        Visit http://{host}/men and enter code SPRING for an extra 10% off.
        Offer ends Sunday.
        """), cs="windows-1252", cte="quoted-printable"))

    # Image spam: the pitch is an inline picture, the text is a bit of filler.
    host = "healthy-man-shop.example"
    cid = g.chars(12) + "@" + host
    htm = spam_html(f'<a href="http://{host}/go?i={g.chars(6)}"><img src="cid:{cid}" width="300" height="200" alt="Order now"></a>\n'
                    f"<p>Can't see the image? <a href=\"http://{host}/go\">Open our web store</a>.</p>")
    related = multipart("related", [text_part(htm, "html", cte="quoted-printable"),
                                    attachment(make_png(20, 14, 7), "image/png", "offer.png", "inline",
                                               extra=[("Content-ID", f"<{cid}>")])],
                        g.boundary(), params=' type="text/html";')
    spam(g, kind="pharmacy", frm=addr("Healthy Man", f"shop@{host}"),
         subject="Your private offer inside", envelope=f"shop@{host}", msgid_dom=host, part=related)

    # Deliberately malformed: the boundary in the header and the one used in
    # the body differ (0 versus O), and the closing delimiter is missing.
    host = "cheap-rx-online.example"
    declared = "----=_NextPart_000_0012_01DA7C3E.5A1B2C30"
    used = "----=_NextPart_000_0012_01DA7C3E.5A1B2C3O"
    body = dedent(f"""\
        This is a multi-part message in MIME format.

        --{used}
        Content-Type: text/plain; charset="us-ascii"
        Content-Transfer-Encoding: 7bit

        Dear customer, we have generic pills for every need. Lowest prices online,
        no prescription required. Visit http://{host}/shop today.

        --{used}
        Content-Type: text/html; charset="us-ascii"
        Content-Transfer-Encoding: 7bit

        <html><body><p>Dear customer, we have <b>generic pills</b> for every need.
        <a href="http://{host}/shop">Lowest prices online</a>, no prescription required.</p>
        """).encode("ascii")
    spam(g, kind="pharmacy", frm=addr("Rx Online", f"rx@{host}"), subject="lowest prices online, no prescription",
         envelope=f"rx@{host}", msgid_dom=host, malformed="broken multipart boundary",
         part=Part([("Content-Type", f'multipart/alternative;\n\tboundary="{declared}"')], body))

    # Hash-busting: random dictionary words in near-invisible text, which puts
    # ordinary ham words into a spam message.
    host = "pharma-deals.example"
    filler_pool = ("backup server calendar meeting invoice garden report cable quarter lunch "
                   "project schedule printer album holiday review contract switch folder "
                   "budget recipe station tickets archive renewal").split()
    filler = " ".join(g.r.sample(filler_pool, 14))
    htm = spam_html(f"<p><b>Pharmacy CLEARANCE SALE</b> - everything must go this weekend!</p>\n"
                    f"<p>Pain relief, sleeping pills, weight loss and men's health from $0.59.</p>\n"
                    f'<p><a href="http://{host}/clearance">Shop the sale</a></p>\n'
                    f'<p><font color="#fefefe" size="1">{filler}</font></p>')
    spam(g, kind="pharmacy", frm=addr("Clearance Sale", f"deals@{host}"),
         subject="clearance sale: everything must go", envelope=f"deals@{host}", msgid_dom=host,
         part=text_part(htm, "html", cte="quoted-printable"))


def spam_phishing(g: Gen) -> None:
    # Fake invoice with an attachment.
    host = "invoice-center.example"
    inv = "INV-" + g.chars(5, "0123456789")
    pdf = make_pdf([f"INVOICE {inv}", "Amount due: 2,380.00 USD", "Status: OVERDUE",
                    "Pay now: http://invoice-center.example/pay"])
    spam(g, kind="phishing", frm=addr("Accounts Receivable", f"billing@{host}"),
         subject=f"Invoice {inv} overdue - action required", envelope=f"billing@{host}", msgid_dom=host,
         reply_to="payments.dept@example.net",
         part=multipart("mixed", [text_part(dedent(f"""\
        Dear Customer,

        Our records show that invoice {inv} for 2,380.00 USD is now 14 days overdue.
        Please review the attached invoice and arrange payment today to avoid a late
        fee and suspension of your account.

        If you have already paid, please send the remittance advice to this address.

        Accounts Receivable Department
        """)), attachment(pdf, "application/pdf", f"{inv}.pdf")], g.boundary("nextpart")))

    # Look-alike of the shop the user really buys from.
    host = "copperleaf-b00ks.example"
    fake = f"http://{host}/account/verify?id={g.chars(10)}"
    shown = "https://www.copperleaf-books.example/account"
    text = dedent(f"""\
        Hello,

        We were unable to process the payment for your recent order. Your account has
        been temporarily limited and the order will be cancelled within 24 hours.

        To keep your order, please confirm your card details:
        {fake}

        Thank you,
        Copperleaf Books Customer Care
        """)
    htm = spam_html(f"<p>Hello,</p>\n<p>We were unable to process the payment for your recent order. "
                    f"Your account has been <b>temporarily limited</b> and the order will be cancelled within 24 hours.</p>\n"
                    f'<p>To keep your order, please confirm your card details:<br>\n<a href="{fake}">{shown}</a></p>\n'
                    f"<p>Thank you,<br>\nCopperleaf Books Customer Care</p>")
    spam(g, kind="phishing", frm=addr("Copperleaf Books", f"support@{host}"),
         subject="Problem with your order payment", envelope=f"support@{host}", msgid_dom=host,
         part=alt(g, text, htm), mailer=False, forged="copperleaf-books.example")

    # Look-alike bank, base64 HTML only.
    host = "northgate-bank.secure-login-verify.example"
    fake = f"https://{host}/signin?session={g.chars(16)}"
    htm = spam_html(f'<p><img src="https://{host}/logo.png" alt="Northgate Bank"></p>\n'
                    f"<p>Dear Customer,</p>\n<p>We detected an unusual sign-in attempt on your account from a new device "
                    f"(Lagos, NG). For your protection, online banking has been suspended.</p>\n"
                    f'<p>Please <a href="{fake}">verify your identity</a> within 12 hours to restore access. '
                    f"If you do not verify, your account will be closed.</p>\n<p>Northgate Bank Security Team</p>")
    spam(g, kind="phishing", frm=addr("Northgate Bank", "security@northgate-bank-alerts.example"),
         subject="Unusual sign-in activity on your account", envelope=f"alert@{host}", msgid_dom=host,
         forged="northgate-bank.example",
         part=text_part(htm, "html", cte="base64"), mailer=False)

    # Fake delivery fee.
    host = "swiftparcel-redelivery.example"
    text = dedent(f"""\
        Swiftparcel: your parcel could not be delivered because of an unpaid
        customs fee (1.99 GBP).

        Pay the fee and choose a new delivery date here:
        http://{host}/pay/{g.chars(8)}

        Parcels that are not claimed within 48 hours are returned to the sender.
        """)
    spam(g, kind="phishing", frm=addr("Swiftparcel", f"delivery@{host}"),
         subject="Your parcel is on hold: delivery fee unpaid (1.99 GBP)", envelope=f"delivery@{host}",
         msgid_dom=host, part=alt(g, text, spam_html(htmlize(text))))

    # Shared-document lure, RFC 2047 B subject.
    host = "shared-docs-portal.example"
    fake = f"http://{host}/view/{g.chars(12)}"
    spam(g, kind="phishing", frm=addr("File Share Notification", f"noreply@{host}"),
         subject=ew("📄 You have received a shared document: Payment_Advice.pdf", "utf-8", "B"),
         envelope=f"noreply@{host}", msgid_dom=host,
         part=text_part(spam_html(f"<p>A document has been shared with you.</p>\n"
                                  f'<table border="1" cellpadding="8"><tr><td>📄 <b>Payment_Advice.pdf</b><br>\n'
                                  f"2 pages · 148 KB</td></tr></table>\n"
                                  f'<p><a href="{fake}">Open document</a></p>\n'
                                  f"<p>You will be asked to sign in with your email account password to view it.</p>"),
                        "html", cte="quoted-printable"))

    # Look-alike registrar.
    host = "hostmeadow-billing.example"
    spam(g, kind="phishing", frm=addr("Hostmeadow Domains", f"renewals@{host}"),
         subject="URGENT: lindenworks.example will be suspended", envelope=f"renewals@{host}", msgid_dom=host,
         part=text_part(dedent(f"""\
        Dear Domain Owner,

        The domain lindenworks.example has expired and will be SUSPENDED today. All
        websites and email accounts on it will stop working.

        Renew now to avoid losing your domain: http://{host}/renew?d=lindenworks.example
        Renewal fee: 12.99 USD

        Hostmeadow Billing
        """)))

    # Fake receipt, call-this-number scam.
    host = "order-support-desk.example"
    spam(g, kind="phishing", frm=addr("Order Confirmation", f"orders@{host}"),
         subject="Payment receipt #9920-4417: PC Shield Total Protection (3 years)",
         envelope=f"orders@{host}", msgid_dom=host,
         part=text_part(dedent("""\
        Thank you for your purchase!

        Invoice number:  9920-4417
        Product:         PC Shield Total Protection - 3 year plan
        Amount charged:  $499.99
        Payment method:  card on file

        Your subscription renews automatically. If you did not authorize this
        payment, call our billing department within 24 hours for a full refund:

            +1 (555) 010-0147

        Billing Department
        """)))

    # Spear-phish: look-alike of a real client's domain, new bank details.
    host = "atelier-moreau.fr-invoices.example"
    spam(g, kind="phishing", frm=addr("Félix Moreau", "felix@atelier-moreau-fr.example", "utf-8", "B"),
         subject="Re: invoice - new bank details", envelope="felix@atelier-moreau-fr.example",
         msgid_dom=host, reply_to="felix.moreau.atelier@example.net", mailer=False, tz=TZ[1],
         part=text_part(dedent("""\
        Hi Robin,

        Quick note before you pay our last invoice: we have changed banks and the old
        account is closed. Please use the new details below for this and all future
        payments, and confirm by reply once the transfer is done.

          Account name: Atelier Moreau
          IBAN: XX00 0000 0000 0000 0000 0000 000
          BIC: XXXXXXXX

        I'm in meetings all day so please don't call, just email.

        Félix
        """), cte="base64"))


def spam_419(g: Gen) -> None:
    # Deliberately malformed: no header block at all.
    w = g.when()
    data = dedent("""\
        Dear Friend,

        I am Mrs. Grace Adebayo, the widow of a late contractor with the
        Ministry of Works. Before his death my husband deposited the sum of
        USD 4,500,000.00 (Four Million Five Hundred Thousand US Dollars) with a
        security company as family valuables. I am now very ill and I need an
        honest foreign partner to receive the funds on my behalf.

        You will keep 30% of the total sum for your assistance. Please reply
        with your full name, phone number and address so that I can give you
        more details. This transaction is 100% risk free.

        May God bless you,
        Mrs. Grace Adebayo
        """).encode("ascii")
    g.mails.append(Mail("spam", "lottery-419", w, data, "no headers at all"))

    host = "eurostar-lotto-promo.example"
    spam(g, kind="lottery-419", frm=addr("Promoción Lotería Internacional", f"claims@{host}", "iso-8859-1", "Q"),
         subject="CONGRATULATIONS!!! YOUR EMAIL HAS WON 850,000.00 EUR",
         envelope=f"claims@{host}", msgid_dom=host, reply_to="claims.agent.m.garcia@example.net",
         to="undisclosed-recipients:;",
         part=text_part(dedent(f"""\
        ATTN: WINNER

        We are pleased to inform you that your email address was selected in our
        international online draw held in Madrid. You have won the sum of
        EUR 850,000.00 (Ochocientos cincuenta mil euros).

        Ticket number: 56{g.chars(6, "0123456789")}
        Batch: 7/449/IRL

        To claim your prize, contact our agent Sr. Martín García with your full
        name, address, occupation and telephone number. Keep this notification
        confidential until your claim is processed.

        Sra. Inés Muñoz
        Coordinadora de Promociones
        """), cs="iso-8859-1", cte="8bit"))

    host = "example.net"
    spam(g, kind="lottery-419", frm=addr("Barrister James Okonkwo", f"j.okonkwo.chambers@{host}"),
         subject="BUSINESS PROPOSAL - STRICTLY CONFIDENTIAL", envelope=f"j.okonkwo.chambers@{host}",
         msgid_dom="mail.example.net", reply_to="okonkwo.legal@example.org", to="undisclosed-recipients:;",
         part=text_part(dedent("""\
        Dear Sir/Madam,

        I am a legal practitioner and the personal attorney to a foreign client who
        died with his family in a car accident, leaving a deposit of USD 12.5 million
        in a bank here with no next of kin. I am contacting you because you share the
        same surname as my late client.

        I propose that you stand as the next of kin so the funds can be released to
        you. We will share the money 50/50 and 10% will go to charity. All legal
        documents will be arranged by me.

        Reply with your private telephone number to proceed.

        Barrister James Okonkwo
        """)))

    host = "heritage-claims-office.example"
    spam(g, kind="lottery-419", frm=addr("Heritage Claims Office", f"office@{host}"),
         subject="Unclaimed inheritance in your surname (ASHDOWN)", envelope=f"office@{host}",
         msgid_dom=host,
         part=text_part(dedent(f"""\
        Dear Ashdown,

        Our probate research team has located an unclaimed estate in the surname
        ASHDOWN with a value of GBP 2,340,000. You may be entitled to a share.

        To open a claim file, send a copy of your passport and a processing fee of
        GBP 250 to our solicitor. Claims must be filed before the end of the month.

        http://{host}/claim

        Heritage Claims Office
        """)))

    host = "un-compensation-fund.example"
    spam(g, kind="lottery-419", frm=addr("Compensation Unit", f"payments@{host}"),
         subject=ew("Compensation payment for scam victims – ref. UNCF/2024/661", "windows-1252", "Q"),
         envelope=f"payments@{host}", msgid_dom=host, to="undisclosed-recipients:;",
         part=text_part(dedent("""\
        Attention Beneficiary,

        Your email was listed among the victims of internet fraud who are to receive
        compensation of USD 1,500,000.00 from the international compensation fund.

        Your payment will be released by ATM card. Send us your full name, delivery
        address and a copy of your ID, together with the card activation fee of
        USD 120, so we can ship your card today.

        Yours faithfully,
        Mr. Robert Kline – Director, Payments Unit
        """), cs="windows-1252", cte="quoted-printable"))


def spam_crypto(g: Gen) -> None:
    host = "novatoken-presale.example"
    text = dedent(f"""\
        The presale for $NOVA closes in 48 hours.

        * 1 NOVA = 0.0004 USD in the presale (listing price: 0.01 USD)
        * Liquidity locked, contract audited
        * Early buyers get a 40% bonus

        Insiders are already loading up. Don't watch from the sidelines again.

        Buy now: https://{host}/buy?ref={g.chars(6)}

        Not financial advice.
        """)
    spam(g, kind="crypto", frm=addr("NOVA Presale", f"team@{host}"),
         subject="This token is about to explode - presale ends in 48h", envelope=f"team@{host}",
         msgid_dom=host, part=alt(g, text, spam_html(htmlize(text)), cte="7bit", html_cte="quoted-printable"))

    host = "moonsignals.example"
    spam(g, kind="crypto", frm=addr("Moon Signals", f"alerts@{host}"),
         subject="$NOVA listed tomorrow: insiders are loading up", envelope=f"alerts@{host}", msgid_dom=host,
         part=text_part(dedent(f"""\
        🚀 Our last three calls did 6x, 11x and 14x.

        Tomorrow a new coin lists on two exchanges at the same time. Our members get
        the contract address one hour before everyone else.

        Join the private signal group (only 200 seats left):
        https://{host}/join

        Buy early, sell to the late crowd. It's that simple.
        """), cte="quoted-printable"))

    host = "wallet-airdrop-claim.example"
    spam(g, kind="crypto", frm=addr("Airdrop Team", f"claim@{host}"),
         subject="Your wallet was selected for the airdrop", envelope=f"claim@{host}", msgid_dom=host,
         part=text_part(spam_html(
             "<h2>Congratulations! You are eligible for 2,500 tokens</h2>\n"
             "<p>Your wallet address was selected in our community airdrop. The tokens are already reserved "
             "for you and can be claimed until Friday.</p>\n"
             f'<p><a href="https://{host}/connect">Connect your wallet to claim</a></p>\n'
             "<p>You will need your recovery phrase to verify ownership.</p>"), "html", cte="7bit"))

    host = "fastprofit-club.example"
    spam(g, kind="crypto", frm=addr("Daniel from FastProfit", f"daniel@{host}"),
         subject="I made 14x in two weeks - here's how", envelope=f"daniel@{host}", msgid_dom=host,
         crlf=True, part=text_part(dedent(f"""\
        Hey,

        Two weeks ago I put 500 dollars into a coin nobody had heard of. This morning
        it was worth 7,000. I'm not a genius, I just followed the signals from a small
        trading club.

        They are letting in 50 new members this week. Membership is free for the
        first month: https://{host}/free

        See you on the inside,
        Daniel
        """)))


def spam_loans(g: Gen) -> None:
    host = "quickfunds-direct.example"
    text = dedent(f"""\
        You are PRE-APPROVED!

        Borrow up to 25,000 with no credit check and money in your account in 24
        hours. Bad credit? No problem. Self-employed? No problem.

        Your personal offer: 25,000 at a fixed monthly payment of just 289.

        Claim your offer now: http://{host}/apply?o={g.chars(8)}

        This offer is reserved for you until midnight.
        """)
    spam(g, kind="loan", frm=addr("QuickFunds", f"offers@{host}"),
         subject="Pre-approved: up to 25,000 loan, no credit check", envelope=f"offers@{host}",
         msgid_dom=host, part=alt(g, text, spam_html(htmlize(text))))

    host = "debtfree-solutions.example"
    spam(g, kind="loan", frm=addr("DebtFree Solutions", f"info@{host}"),
         subject=ew("Consolidate your debts – one low monthly payment", "windows-1252", "Q"), envelope=f"info@{host}", msgid_dom=host,
         part=text_part(dedent(f"""\
        Struggling with credit cards, store cards and overdrafts?

        Combine everything into ONE low monthly payment and cut what you pay by up to
        60%. Our advisers will contact your creditors for you – “stop the calls
        today”.

        Get your free quote in 2 minutes: http://{host}/quote
        """), cs="windows-1252", cte="quoted-printable"))

    host = "capital-bridge-funding.example"
    spam(g, kind="loan", frm=addr("Jason Miller", f"jason.miller@{host}"),
         subject="Business funding offer for Lindenworks Ltd", envelope=f"jason.miller@{host}",
         msgid_dom=host, mailer=False,
         part=text_part(dedent(f"""\
        Hi Robin,

        I came across Lindenworks Ltd and wanted to reach out. We provide working
        capital from 10k to 500k for small businesses, with approval in 24 hours and
        no collateral. Many of our clients use it for equipment, payroll or growth.

        Are you the right person to talk to about funding? If so, reply with a good
        time for a 10-minute call, or apply here: http://{host}/apply

        Best,
        Jason Miller
        Senior Funding Advisor
        """)))

    host = "loan-approval-now.example"
    spam(g, kind="loan", frm=addr("Loan Department", f"dept@{host}"),
         subject="FINAL NOTICE: your loan offer expires tonight", envelope=f"dept@{host}", msgid_dom=host,
         part=text_part(spam_html(
             '<h1><font color="#d40000">FINAL NOTICE</font></h1>\n'
             "<p>Your approved loan of <b>$15,000</b> has not been claimed yet. If you do not accept it before "
             "midnight the offer will be cancelled and given to another applicant.</p>\n"
             f'<p><a href="http://{host}/accept"><b>ACCEPT MY LOAN</b></a></p>\n'
             "<p>No fees. No credit check. Funds sent the same day.</p>"), "html", cte="7bit"))


def spam_mailbox(g: Gen) -> None:
    host = "lindenworks-webmail.example"
    fake = f"http://{host}/quota/upgrade?user=robin"
    spam(g, kind="mailbox", frm=addr("Mail Administrator", f"admin@{host}"),
         subject="Your mailbox is full - 2 GB of 2 GB used", envelope=f"admin@{host}", msgid_dom=host,
         part=text_part(spam_html(
             "<p>Dear robin@lindenworks.example,</p>\n"
             '<table width="100%"><tr><td bgcolor="#e00000" width="99%">&nbsp;</td><td bgcolor="#dddddd">&nbsp;</td></tr></table>\n'
             "<p><b>Your mailbox has reached its storage limit (2 GB of 2 GB).</b> New incoming messages are being "
             "rejected.</p>\n"
             f'<p><a href="{fake}">Increase my mailbox quota for free</a></p>\n'
             "<p>Failure to upgrade within 24 hours will result in the loss of all your messages.</p>\n"
             "<p>Webmail Administrator</p>"), "html", cte="quoted-printable"))

    host = "helpdesk-mailquota.example"
    text = dedent(f"""\
        Dear user,

        Mail delivery for your account on lindenworks.example has been SUSPENDED
        because your mailbox storage quota was exceeded.

        7 incoming messages are on hold. To release them and restore delivery,
        verify your account below:

        http://{host}/restore?domain=lindenworks.example

        Lindenworks IT Support
        """)
    spam(g, kind="mailbox", frm=addr("Lindenworks IT Support", f"it-support@{host}"),
         subject="[lindenworks.example] Mail delivery suspended: storage quota exceeded",
         envelope=f"it-support@{host}", msgid_dom=host,
         part=alt(g, text, spam_html(htmlize(text)), cte="base64"))

    host = "mailserver-notice.example"
    spam(g, kind="mailbox", frm=addr("Postmaster", f"postmaster@{host}"), crlf=True,
         subject="Action required: 7 incoming messages are on hold", envelope=f"postmaster@{host}",
         msgid_dom=host, part=text_part(dedent(f"""\
        Message delivery notification

        The following messages to robin@lindenworks.example are pending because of a
        server error:

          "Re: Payment confirmation"        {g.r.randrange(100, 900)} KB
          "Invoice attached"                {g.r.randrange(100, 900)} KB
          "Shared folder invitation"        {g.r.randrange(100, 900)} KB

        Log in to release your pending messages:
        http://{host}/release?u=robin%40lindenworks.example

        Postmaster
        """)))

    host = "account-deactivation-center.example"
    spam(g, kind="mailbox", frm=addr("Mail-Server Administrátor", f"noreply@{host}", "utf-8", "B"),
         subject="Email account deactivation notice", envelope=f"noreply@{host}", msgid_dom=host,
         part=text_part(dedent(f"""\
        Your request to deactivate your email account has been received and will be
        processed within 24 hours.

        If you did not make this request, cancel the deactivation now by confirming
        your password:

        http://{host}/cancel

        Note: your account and all messages will be deleted permanently if no action
        is taken.
        """)))


def spam_software(g: Gen) -> None:
    host = "oem-soft-store.example"
    text = dedent(f"""\
        OEM SOFTWARE - INSTANT DOWNLOAD

        Office suite 2024 Professional ........ $49 (retail $439)
        Photo & design bundle ................. $69 (retail $599)
        PDF editor Pro ........................ $29 (retail $179)
        Operating system upgrade, all editions  $39

        Genuine licence keys, lifetime activation, free updates.
        Download now: http://{host}/catalog
        """)
    spam(g, kind="software", frm=addr("OEM Soft Store", f"sales@{host}"),
         subject="Office suites and design software - OEM prices from $29", envelope=f"sales@{host}",
         msgid_dom=host, part=alt(g, text, spam_html(htmlize(text)), cte="7bit", html_cte="quoted-printable"))

    # Deliberately malformed: NUL bytes inside an 8bit text body.
    host = "softkeys-outlet.example"
    body = dedent(f"""\
        Download licensed software instantly!
        All programs are full versions, no trial limits.
        Lifetime activation keys delivered by email within 5 minutes.

        Visit http://{host}/ and save up to 90% today.
        """).encode("ascii")
    body = body.replace(b"instantly!", b"instantly!\x00\x00").replace(b"limits.", b"lim\x00its.")
    body += b"\x00" * 8 + b"\n"
    spam(g, kind="software", frm=addr("Soft Keys Outlet", f"keys@{host}"),
         subject="Download licensed software instantly", envelope=f"keys@{host}", msgid_dom=host,
         malformed="NUL bytes in the body", part=text_part("", cs="us-ascii", cte="8bit", raw=body))

    host = "photo-pro-deals.example"
    spam(g, kind="software", frm=addr("Photo Pro Deals", f"store@{host}"),
         subject="Pro photo editor 2024 - full version, lifetime licence $39", envelope=f"store@{host}",
         msgid_dom=host, part=text_part(dedent(f"""\
        Stop paying monthly subscriptions!

        Get the professional photo editor everyone uses - full 2024 version with a
        lifetime licence for a single payment of $39. Works on Windows and Mac.
        Includes all filters, brushes and the RAW plugin.

        Limited stock of licences: http://{host}/buy
        """)))


def spam_dating(g: Gen) -> None:
    host = "lonely-hearts-chat.example"
    spam(g, kind="dating", frm=addr("Anna (27)", f"anna27@{host}"),
         subject="Anna (27) sent you a private message", envelope=f"notify@{host}", msgid_dom=host,
         part=text_part(spam_html(
             "<p>Hi handsome :)</p>\n<p>I saw your profile and I think we have a lot in common. "
             "I'm new in town and don't know anybody yet. Would you like to chat tonight? "
             "I left you some photos in my private gallery...</p>\n"
             f'<p><a href="http://{host}/msg/{g.chars(8)}">Read Anna\'s message</a></p>\n'
             "<p>Kisses, Anna</p>"), "html", cte="7bit"))

    host = "love-match-cafe.example"
    spam(g, kind="dating", frm=addr("ゆり", f"yuri@{host}", "shift_jis", "B"),
         subject=ew("【無料】近くに住む女性からメッセージが届いています", "shift_jis", "B"),
         envelope=f"info@{host}", msgid_dom=host, tz=TZ[9],
         part=text_part(dedent(f"""\
        はじめまして、ゆりです。
        プロフィールを見てメッセージしました。
        近くに住んでいるので、よかったら今度お茶しませんか？
        写真はこちらから見られます。
        http://{host}/m/{g.chars(5, "0123456789")}

        ※登録は無料です。最初の３０日間はポイントも無料です。
        配信停止はこちら http://{host}/stop
        """), cs="shift_jis", cte="base64"))

    # Raw 8-bit UTF-8 in the Subject (no RFC 2047), as sloppy bulk mailers send it.
    host = "singles-nearby.example"
    m = spam(g, kind="dating", frm=addr("Singles Nearby", f"match@{host}"),
             subject="Are you still single? 3 women near you want to meet", envelope=f"match@{host}",
             msgid_dom=host, part=text_part(dedent(f"""\
        3 women within 5 miles of you viewed your profile this week.

        Sophie, 34 - "Looking for someone to go hiking with."
        Marie, 29 - "New here, be nice!"
        Kate, 41 - "Wine, films and long walks."

        See who they are: http://{host}/matches
        Membership is free for women. Men get a 3-day free trial.
        """), cte="quoted-printable"))
    m.data = m.data.replace(b"Subject: Are you still single? ", "Subject: ❤ Are you still single? ".encode("utf-8"))
    m.malformed = "raw 8-bit UTF-8 in the Subject header"


def spam_seo(g: Gen) -> None:
    host = "promo-rank.example"
    spam(g, kind="seo", frm=addr("Promo-Rank", f"seo-top10@{host}"),
         subject=ew("Продвижение вашего сайта в ТОП-10 поисковых систем", "koi8-r", "B"),
         envelope=f"seo-top10@{host}", msgid_dom=host, tz=TZ[3],
         part=text_part(dedent(f"""\
        Здравствуйте!

        Предлагаем продвижение сайта в ТОП-10 поисковых систем за 30 дней.
        Гарантия результата или возврат денег. Работаем с любыми тематиками:
        интернет-магазины, услуги, производство.

        - аудит сайта бесплатно
        - более 500 выполненных проектов
        - оплата только за результат

        Специальное предложение до конца месяца: скидка 20% на первый месяц.
        Пишите: seo-top10@{host}

        С уважением,
        команда Promo-Rank
        """), cs="koi8-r", cte="8bit"))

    host = "rank-first-seo.example"
    spam(g, kind="seo", frm=addr("Priya Sharma", f"priya.sharma@{host}"),
         subject="First page of search results for lindenworks.example", envelope=f"priya.sharma@{host}",
         msgid_dom=host, tz=IST, mailer=False,
         part=text_part(dedent(f"""\
        Hello Team,

        I was checking your website lindenworks.example and noticed it is not on the
        first page of search results for your main keywords. I found 27 errors that
        are holding it back (broken links, slow pages, missing meta tags).

        We are a team of 40 SEO experts and can get you to page one within 3 months
        at an affordable price. May I send you a free audit report and our offer?

        Thanks & Regards,
        Priya Sharma
        Business Development Manager
        """)))

    host = "guestpost-network.example"
    spam(g, kind="seo", frm=addr("Outreach Team", f"outreach@{host}"),
         subject=ew("Guest post opportunity on high DA sites – $35 per link", "utf-8", "B"), envelope=f"outreach@{host}",
         msgid_dom=host,
         part=text_part(dedent(f"""\
        Hi there,

        We offer do-follow guest posts on 300+ high authority websites (DA 50–90) in
        tech, business, health and lifestyle. Permanent links, fast indexing,
        articles written by native speakers.

        Prices start at $35 per link. Bulk discounts for agencies.
        Full site list: http://{host}/list

        Reply “STOP” to opt out.
        """), cs="windows-1252", cte="quoted-printable"))


# --------------------------------------------------------------------------
# Unlabelled demo messages (true class kept in Mail.label for documentation)
# --------------------------------------------------------------------------

def unlabelled(g: Gen) -> None:
    list_post(g, HOMELAB, DMITRI, "mail.example.net", g.when(day=36), "Re: Monitoring disk temperatures",
              dedent("""\
        > What do people use to keep an eye on disk temperatures?

        I use the smartctl exporter with a two-line alert rule; it has worked well for a
        year. Graphs make it obvious when a fan dies.
        From my notes, the rule is roughly:

          max by (device) (smartctl_device_temperature) > 45 for 10m

        41 C at idle is fine for most drives. I'd worry above 50.

        Dmitri
        """), unlabelled=True, mailer=MUTT)

    host = "lindenworks-mailbox.example"
    text = dedent(f"""\
        Dear robin,

        Your mailbox storage is almost full (98%). Some of your incoming messages
        may not be delivered.

        Upgrade your storage now for free to keep receiving mail:
        http://{host}/upgrade?u=robin

        IT Service Desk
        """)
    spam(g, kind="mailbox", frm=addr("IT Service Desk", f"servicedesk@{host}"),
         subject="Your mailbox storage is almost full", envelope=f"servicedesk@{host}", msgid_dom=host,
         when=g.when(day=36), part=alt(g, text, spam_html(htmlize(text))), unlabelled=True)

    w = g.when(day=37, hours=(11, 16))
    colleague(g, HANNAH, "ws-hannah.lindenworks.example", w, "Minutes from today's meeting",
              text_part(dedent("""\
        Hi both,

        Short minutes from today:

        - Migration went fine; the old mail host gets wiped on Wednesday (Priya).
        - The new switch is in. Marcus will update the network diagram.
        - Backups: move to 14 daily snapshots once the accountants confirm (Tomasz).
        - Next review: first Thursday of May.

        Shout if I missed anything.
        Hannah
        """)), to=f"{ROBIN_TO}, {addr(*PRIYA)}", unlabelled=True)

    host = "rx-discount-store.example"
    spam(g, kind="pharmacy", frm=addr("Rx Discount", f"sales@{host}"),
         subject="Spring sale: generic pills from $0.79", envelope=f"sales@{host}", msgid_dom=host,
         when=g.when(day=38), unlabelled=True,
         part=text_part(spam_html(
             "<p><b>SPRING SALE</b> - our biggest discounts of the year!</p>\n"
             "<p>Sildenafil, tadalafil, sleep aids and weight loss pills from $0.79 per pill. "
             "No prescription needed, discreet worldwide delivery.</p>\n"
             f'<p><a href="http://{host}/spring">Order now and save 70%</a></p>'), "html", cte="quoted-printable"))

    w = g.when(day=38, hours=(2, 3))
    cron(g, "nas", w, "Cron <root@nas> /usr/local/sbin/nightly-backup", backup_report(g, w),
         env_cmd="/usr/local/sbin/nightly-backup", unlabelled=True)

    host = "easy-cash-loans.example"
    spam(g, kind="loan", frm=addr("Easy Cash", f"offers@{host}"),
         subject="Approved: your cash offer is ready", envelope=f"offers@{host}", msgid_dom=host,
         when=g.when(day=39), unlabelled=True,
         part=text_part(dedent(f"""\
        Congratulations, your application has been APPROVED.

        From today you can receive up to 5,000 in your bank account within one hour.
        No credit check, no paperwork, no fees.

        Accept your offer: http://{host}/accept?id={g.chars(8)}
        """)))


# --------------------------------------------------------------------------
# Build, write, verify
# --------------------------------------------------------------------------

def build() -> list[Mail]:
    g = Gen(SEED)
    for fn in (ham_colleagues, ham_lists, ham_shop, ham_family, ham_calendar, ham_cron,
               ham_newsletter, ham_misc, spam_pharmacy, spam_phishing, spam_419, spam_crypto,
               spam_loans, spam_mailbox, spam_software, spam_dating, spam_seo, unlabelled):
        fn(g)
    mails = sorted(g.mails, key=lambda m: m.when)  # stable: ties keep generation order
    counters = {"ham": 0, "spam": 0, "unlabelled": 0}
    for m in mails:
        folder = "unlabelled" if m.unlabelled else m.label
        counters[folder] += 1
        m.name = f"{folder}/{counters[folder]:03d}.eml"
    return mails


def quote_from(data: bytes) -> bytes:
    """mboxo quoting: a line that starts with 'From ' gets a leading '>'."""
    return re.sub(rb"(?m)^From ", b">From ", data)


def mbox_from_line(m: Mail) -> bytes:
    t = m.when.astimezone(UTC)
    return (f"From {m.envelope or 'MAILER-DAEMON'} {WDAY[t.weekday()]} {MON[t.month - 1]} "
            f"{t.day:2d} {t:%H:%M:%S} {t.year}\n").encode("ascii")


def render_tree(mails: list[Mail]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    index = []
    mbox = b""
    for m in mails:
        files[m.name] = m.data
        if m.unlabelled:
            assert m.data.endswith(b"\n") and b"\r" not in m.data
            mbox += mbox_from_line(m) + quote_from(m.data) + b"\n"
        else:
            index.append(f"{m.label} {m.name}\n")
    files["index"] = "".join(index).encode("ascii")
    files["mbox"] = mbox
    return files


def write_tree(files: dict[str, bytes], out: Path) -> None:
    for sub in ("ham", "spam", "unlabelled"):
        if (out / sub).exists():
            shutil.rmtree(out / sub)
        (out / sub).mkdir(parents=True)
    for name, data in files.items():
        (out / name).write_bytes(data)


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# -- feature description (derived from the bytes, so the table cannot drift) --

def features(m: Mail) -> list[str]:
    data = m.data
    msg = email.message_from_bytes(data)
    out = []
    heads = data.split(b"\n\n", 1)[0] if b"\r\n\r\n" not in data else data.split(b"\r\n\r\n", 1)[0]
    if m.malformed:
        out.append("malformed: " + m.malformed)
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
    seen, uniq = set(), []
    for f in out:
        if f not in seen:
            seen.add(f)
            uniq.append(f)
    return uniq


def feature_table(mails: list[Mail]) -> str:
    rows: dict[str, list[str]] = {}
    for m in mails:
        for f in features(m):
            rows.setdefault(f, []).append(m.name)
    lines = ["| feature | files |", "|---|---|"]
    order = {"ham": 0, "spam": 1, "unlabelled": 2}
    for f in sorted(rows, key=lambda k: (k.startswith("malformed"), k.lower())):
        names = sorted(rows[f], key=lambda n: (order[n.split("/")[0]], n))
        lines.append(f"| {f} | {', '.join('`' + n + '`' for n in names)} |")
    return "\n".join(lines) + "\n"


# -- verification -------------------------------------------------------------

def _decodes(data: bytes, cs: str) -> bool:
    try:
        data.decode(cs)
    except UnicodeDecodeError:
        return False
    return True


def verify(root: Path, mails: list[Mail]) -> list[str]:
    """Re-read what was written and check it. Returns a list of problems."""
    problems = []
    by_name = {m.name: m for m in mails}
    lines = (root / "index").read_text("ascii").splitlines()
    listed = set()
    for ln in lines:
        label, rel = ln.split(" ")
        if label not in ("ham", "spam") or not (root / rel).is_file() or not rel.startswith(label + "/"):
            problems.append(f"bad index line {ln!r}")
        listed.add(rel)
    on_disk = {p.relative_to(root).as_posix() for d in ("ham", "spam") for p in (root / d).glob("*.eml")}
    if listed != on_disk:
        problems.append(f"index and files differ: {sorted(listed ^ on_disk)}")
    for name, m in by_name.items():
        data = (root / name).read_bytes()
        if data != m.data:
            problems.append(f"{name}: bytes on disk differ")
        msg = email.message_from_bytes(data)
        for p in msg.walk():  # decoding is what records base64 defects
            if not p.is_multipart():
                p.get_payload(decode=True)
        defects = [type(d).__name__ for p in msg.walk() for d in p.defects]
        if not m.malformed:
            if defects:
                problems.append(f"{name}: unexpected defects {defects}")
            if msg["Date"] is None or email.utils.parsedate_to_datetime(msg["Date"]) is None:
                problems.append(f"{name}: no usable Date")
            if not all(msg[h] for h in ("From", "To", "Subject", "Message-ID", "Received")):
                problems.append(f"{name}: missing a standard header")
            head = data.split(b"\n\n", 1)[0]
            if any(b > 127 for b in head):
                problems.append(f"{name}: 8-bit bytes in the header")
            for p in msg.walk():
                if p.is_multipart():
                    continue
                payload = p.get_payload(decode=True)
                if p.get_content_maintype() == "text":
                    try:
                        payload.decode(p.get_content_charset() or "us-ascii")
                    except (UnicodeDecodeError, LookupError) as exc:
                        problems.append(f"{name}: text does not decode: {exc}")
            modern = email.message_from_bytes(data, policy=email.policy.default)
            for h, v in modern.items():
                str(v)
            for p in modern.walk():
                if not p.is_multipart() and p.get_content_maintype() == "text":
                    p.get_content()
        else:
            # Broken on purpose: the parser must still get *something* out of it.
            text = b"".join(p.get_payload(decode=True) or b"" for p in msg.walk() if not p.is_multipart())
            if not text:
                problems.append(f"{name}: malformed message yields no payload at all")
            head = re.split(rb"\r?\n\r?\n", data, maxsplit=1)[0]
            broken = {
                "no headers": "MissingHeaderBodySeparatorDefect" in defects,
                "boundary": "StartBoundaryNotFoundDefect" in defects,
                "base64": any(d.startswith("InvalidBase64") for d in defects),
                "lying charset": not _decodes(text, "utf-8"),
                "NUL": b"\x00" in text,
                "8-bit": any(b > 127 for b in head),
            }
            if not any(v for k, v in broken.items() if k in m.malformed):
                problems.append(f"{name}: tagged {m.malformed!r} but is not broken that way")
        for ip in re.findall(rb"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])", data):
            if all(int(o) < 256 for o in ip.split(b".")) and \
                    not ip.startswith((b"192.0.2.", b"198.51.100.", b"203.0.113.")):
                problems.append(f"{name}: IP outside the documentation ranges: {ip!r}")
        decoded = data.split(b"\n\n", 1)[0] + b"".join(
            p.get_payload(decode=True) or b"" for p in msg.walk() if not p.is_multipart())
        for host in re.findall(rb"https?://([A-Za-z0-9.-]+)", decoded):
            if not re.search(rb"(^|\.)example(\.(com|net|org))?$", host):
                problems.append(f"{name}: URL host not under example: {host!r}")
        if re.search(rb"(?im)^X-Spam", data):
            problems.append(f"{name}: carries a spam-filter header")
    # mbox: the six unlabelled messages, in order, unquoted back to the .eml bytes.
    box = mailbox.mbox(str(root / "mbox"), create=False)
    got = [box.get_bytes(k) for k in box.keys()]
    want = [m.data for m in mails if m.unlabelled]
    if [re.sub(rb"(?m)^>From ", b"From ", x) for x in got] != want:
        problems.append("mbox does not round-trip to the unlabelled .eml files")
    box.close()
    if not any(re.search(rb"(?m)^>From ", x) for x in got):
        problems.append("mbox has no >From quoting to test")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare a fresh build with sample/ on disk")
    ap.add_argument("--table", action="store_true", help="print the MIME feature table (markdown)")
    args = ap.parse_args(argv)
    mails = build()
    files = render_tree(mails)
    n = {k: sum(1 for m in mails if (m.unlabelled and k == "unlabelled") or (not m.unlabelled and m.label == k))
         for k in ("ham", "spam", "unlabelled")}
    if args.table:
        sys.stdout.write(feature_table(mails))
        return 0
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(files, Path(tmp))
            fresh, current = tree_digest(Path(tmp)), tree_digest(OUT) if OUT.exists() else ""
        if fresh != current:
            print(f"sample/ is stale: on disk {current[:16] or 'missing'}, fresh build {fresh[:16]}")
            return 1
        print(f"sample/ is up to date ({fresh})")
        return 0
    write_tree(files, OUT)
    problems = verify(OUT, mails)
    size = sum(len(b) for b in files.values())
    print(f"wrote {n['ham']} ham, {n['spam']} spam, {n['unlabelled']} unlabelled "
          f"({size:,} bytes) to {OUT}")
    print(f"tree sha256 {tree_digest(OUT)}")
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
