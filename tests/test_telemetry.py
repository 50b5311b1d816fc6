"""The daemons' metrics (textnb.delivery.telemetry): the Prometheus text format, scraped over HTTP
from a running scorer; the milter's are scraped in test_milter.py.

Servers bind only to a Unix socket in tmp_path and to 127.0.0.1, and every wait has a bound.
"""

import os
import re
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

from textnb.delivery.client import learn_remote, ping, score_remote
from textnb.delivery.telemetry import (BUCKETS, MetricsError, Telemetry, parse_metrics_address,
                                       serve_metrics)

from test_server import MESSAGES, model_file, models  # noqa: F401
from test_server_learn import Running, variant

# A model that has learned nothing and has no file yet (a per-user model before its first write).
NO_MODEL = SimpleNamespace(path="/nonexistent/model.tnb", loads=0,
                           spam_filter=SimpleNamespace(n_learned={}))
SAMPLE_LINE = re.compile(r'^([a-z_]+)(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})? (\S+)$')


def parse(text: str) -> dict[str, float]:
    """A scrape as {'name{labels}': value}; every line must be a comment or a sample,
    and every sample's family must have been announced by # TYPE."""
    samples, typed = {}, set()
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP "):
            continue
        match = SAMPLE_LINE.match(line)
        assert match, f"not a Prometheus sample line: {line!r}"
        name = match.group(1)
        assert name in typed or re.sub(r"_(bucket|sum|count)$", "", name) in typed, line
        samples[name + (match.group(2) or "")] = float(match.group(4))
    return samples


def scrape(port) -> tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return reply.headers["Content-Type"], reply.read().decode()


def buckets(samples, kind):
    return [samples[f'textnb_request_seconds_bucket{{kind="{kind}",le="{b}"}}']
            for b in [*map(repr, BUCKETS), "+Inf"]]


def test_the_histogram_is_cumulative_and_its_count_is_the_requests():
    t = Telemetry(lambda: NO_MODEL)
    for seconds in (0.0004, 0.003, 0.003, 0.2, 30.0):
        t.observe("score", seconds, "spam")
    t.observe("error", None)  # a fault: counted, not timed
    samples = parse(t.render())
    counts = buckets(samples, "score")
    assert counts == sorted(counts) and counts[-1] == 5
    assert counts[0] == 1 and counts[BUCKETS.index(0.005)] == 3 and counts[-2] == 4
    assert samples['textnb_request_seconds_count{kind="score"}'] == 5
    assert samples['textnb_request_seconds_sum{kind="score"}'] == pytest.approx(30.2064)
    assert samples['textnb_requests_total{kind="error"}'] == 1
    assert 'textnb_request_seconds_count{kind="error"}' not in samples
    assert samples['textnb_verdicts_total{label="spam"}'] == 5
    assert "textnb_model_age_seconds" not in samples  # no file: no age
    assert samples['textnb_model_messages{label="spam"}'] == 0


def test_a_scrape_counts_what_the_scorer_answered(tmp_path, model_file):
    with Running(model_file, str(tmp_path / "s.sock"), flush_seconds=0.2) as running:
        server = running.server
        server.telemetry = Telemetry(lambda: server.model)
        port = serve_metrics(server.telemetry, "127.0.0.1", 0)
        try:
            labels = [score_remote(running.address, raw).label for raw in MESSAGES]
            assert learn_remote(running.address, variant(1), "spam") == "spam new"
            assert learn_remote(running.address, variant(2), "ham") == "ham new"
            assert learn_remote(running.address, variant(1), None) == "spam"
            ping(running.address)
            with pytest.raises(Exception):
                score_remote(running.address, MESSAGES[0], user="alice")  # one model: ERROR
            time.sleep(0.2)  # a reply is counted just after it is sent: let the last one in
            content_type, text = scrape(port.server_address[1])
            samples = parse(text)
        finally:
            port.shutdown()
            port.server_close()
    assert content_type.startswith("text/plain; version=0.0.4")
    n = len(MESSAGES)
    assert samples['textnb_requests_total{kind="score"}'] == n
    assert samples['textnb_requests_total{kind="learn"}'] == 2
    assert samples['textnb_requests_total{kind="forget"}'] == 1
    assert samples['textnb_requests_total{kind="ping"}'] == 1
    assert samples['textnb_requests_total{kind="error"}'] == 1
    for label in ("spam", "ham", "unsure"):
        assert samples[f'textnb_verdicts_total{{label="{label}"}}'] == labels.count(label)
    assert samples['textnb_learn_requests_total{action="spam"}'] == 1
    assert samples['textnb_learn_requests_total{action="ham"}'] == 1
    assert samples['textnb_learn_requests_total{action="forget"}'] == 1
    assert buckets(samples, "score")[-1] == n
    assert samples['textnb_model_reloads_total'] == 0
    age = time.time() - os.stat(model_file).st_mtime
    assert 0 <= samples["textnb_model_age_seconds"] <= age + 1
    assert samples['textnb_model_messages{label="ham"}'] > 0


def test_a_reload_is_counted_and_the_age_restarts(tmp_path, model_file, models):
    with Running(model_file, str(tmp_path / "s.sock")) as running:
        t = Telemetry(lambda: running.server.model, clock=lambda: os.stat(model_file).st_mtime + 5)
        assert parse(t.render())["textnb_model_reloads_total"] == 0
        tmp = model_file.with_suffix(".new")
        tmp.write_bytes(models[1].read_bytes())
        os.replace(tmp, model_file)
        deadline = time.monotonic() + 30
        while running.server.model.loads < 2:
            assert time.monotonic() < deadline, "the scorer did not reload"
            time.sleep(0.05)
        samples = parse(t.render())
    assert samples["textnb_model_reloads_total"] == 1
    assert samples["textnb_model_age_seconds"] == 5


def test_only_loopback_and_only_metrics():
    t = Telemetry(lambda: NO_MODEL)
    for host in ("0.0.0.0", "192.0.2.1", "example.org"):
        with pytest.raises(MetricsError, match="loopback|not an IP"):
            serve_metrics(t, host, 0)
    assert parse_metrics_address("9433") == ("127.0.0.1", 9433)
    assert parse_metrics_address("[::1]:9433") == ("::1", 9433)
    with pytest.raises(MetricsError, match="not \\[HOST:\\]PORT"):
        parse_metrics_address("127.0.0.1:http")
    port = serve_metrics(t, "127.0.0.1", 0)
    try:
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port.server_address[1]}/", timeout=10)
        assert missing.value.code == 404
    finally:
        port.shutdown()
        port.server_close()
