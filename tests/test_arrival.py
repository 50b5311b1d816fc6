"""The order two piles of mail arrived in (``textnb.mail.arrival``): Maildir names first,
then the topmost Received: field's date, then Date:; undated first; mbox piles have none."""

from __future__ import annotations

from email.utils import parsedate_to_datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from textnb.mail.arrival import HEADER_BYTES, arrival_order, arrival_time
from textnb.mail.sources import plan_labelled


def _at(text: str) -> float:
    return parsedate_to_datetime(text).timestamp()


MESSAGE = (b"Received: from relay.example.net by mx.example.org;\n"
           b"\tTue, 5 Mar 2024 10:00:00 +0000\n"
           b"Received: from a.example by relay.example.net; Mon, 4 Mar 2024 09:00:00 +0000\n"
           b"Date: Sun, 3 Mar 2024 08:00:00 +0000\n"
           b"Subject: hello\n\nbody\nDate: Fri, 1 Mar 2024 00:00:00 +0000\n")


def test_the_topmost_received_date_is_when_it_arrived():
    assert arrival_time(MESSAGE) == _at("Tue, 5 Mar 2024 10:00:00 +0000")


def test_without_a_received_date_the_date_field_and_then_nothing():
    no_received = b"Date: Sun, 3 Mar 2024 08:00:00 +0000\nSubject: x\n\nbody\n"
    assert arrival_time(no_received) == _at("Sun, 3 Mar 2024 08:00:00 +0000")
    garbled = b"Received: from a by b; not a date\nDate: Sun, 3 Mar 2024 08:00:00 +0000\n\n"
    assert arrival_time(garbled) == _at("Sun, 3 Mar 2024 08:00:00 +0000")
    assert arrival_time(b"Subject: x\n\nDate: Sun, 3 Mar 2024 08:00:00 +0000\n") is None
    assert arrival_time(b"Date: yesterday\n\n") is None
    assert arrival_time(b"") is None


def test_a_maildir_name_is_its_delivery_time():
    assert arrival_time(MESSAGE, "1709900000.M1P2.host:2,S") == 1709900000.0
    assert arrival_time(MESSAGE, "not-a-time.host") == _at("Tue, 5 Mar 2024 10:00:00 +0000")


def test_a_header_section_longer_than_the_bound_is_not_searched_past_it():
    huge = b"X-Filler: " + b"a" * HEADER_BYTES + b"\nDate: Sun, 3 Mar 2024 08:00:00 +0000\n\n"
    assert arrival_time(huge) is None


def test_piles_in_arrival_order_undated_first_ties_as_given(tmp_path):
    spam, ham = tmp_path / "spam", tmp_path / "ham"
    spam.mkdir(), ham.mkdir()
    (spam / "a.eml").write_bytes(b"Date: Wed, 6 Mar 2024 00:00:00 +0000\n\nx\n")
    (spam / "b.eml").write_bytes(b"Subject: no date\n\nx\n")
    (ham / "c.eml").write_bytes(b"Date: Tue, 5 Mar 2024 00:00:00 +0000\n\nx\n")
    (ham / "d.eml").write_bytes(b"Date: Wed, 6 Mar 2024 00:00:00 +0000\n\nx\n")
    order = arrival_order(plan_labelled([str(spam)], [str(ham)]))
    assert [f.path.rsplit("/", 1)[-1] for f in order] == ["b.eml", "c.eml", "a.eml", "d.eml"]


def test_an_mbox_of_several_messages_has_no_arrival_order(tmp_path):
    mbox = tmp_path / "spam.mbox"
    mbox.write_bytes(b"From a@b Mon Mar  4 12:00:00 2024\nSubject: 1\n\nx\n\n"
                     b"From a@b Mon Mar  4 12:00:00 2024\nSubject: 2\n\ny\n")
    one = tmp_path / "ham.eml"
    one.write_bytes(b"Subject: 3\n\nz\n")
    assert arrival_order(plan_labelled([str(mbox)], [str(one)])) is None
    single = tmp_path / "single.mbox"  # an mbox of one message is one message
    single.write_bytes(b"From a@b Mon Mar  4 12:00:00 2024\nSubject: 1\n\nx\n")
    assert len(arrival_order(plan_labelled([str(single)], [str(one)]))) == 2


def test_maildir_piles_are_ordered_by_their_file_names(tmp_path):
    """The time a Maildir's name starts with is when the user's server stored the message;
    a Date: field (the sender's clock) says otherwise here and is not read."""
    piles = {}
    for name, files in (("Junk", {"1709900300.M1.host:2,S": 1}),
                        ("INBOX", {"1709900100.M2.host:2,S": 3, "1709900200.M3.host": 2})):
        folder = tmp_path / name
        for sub in ("cur", "new", "tmp"):
            (folder / sub).mkdir(parents=True)
        for filename, day in files.items():
            (folder / "cur" / filename).write_bytes(
                f"Date: {day:02d} Mar 2024 00:00:00 +0000\n\nx\n".encode())
        piles[name] = str(folder)
    order = arrival_order(plan_labelled([piles["Junk"]], [piles["INBOX"]]))
    assert [f.path.rsplit("/", 1)[-1][:10] for f in order] == \
        ["1709900100", "1709900200", "1709900300"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.one_of(st.none(), st.text(max_size=30)))
def test_any_bytes_give_a_time_or_none_and_never_raise(raw, maildir_name):
    when = arrival_time(b"Received: x; " + raw, maildir_name)
    assert when is None or isinstance(when, float)
    when = arrival_time(raw)
    assert when is None or isinstance(when, float)


def test_dates_out_of_range_read_as_undated():
    for value in (b"Fri, 31 Dec 99999 23:59:59 +0000", b"31 Feb 2024 00:00:00 +0000",
                  b"1 Jan 2024 00:00:00 +9999", b"1 Jan 2024 25:61:61 +0000", b"\xff\xfe",
                  b""):
        assert arrival_time(b"Date: " + value + b"\n\nx\n") is None, value
    # email.utils reads a year below 100 as 19xx or 20xx, as RFC 5322's obsolete syntax asks
    assert arrival_time(b"Date: Mon, 1 Jan 0000 00:00:00 +0000\n\n") == _at(
        "Sat, 1 Jan 2000 00:00:00 +0000")
