"""coordserver.metrics_text.Exposition writes what prometheus-client's generate_latest writes, byte for byte."""
from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, Summary, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from coordserver import metrics_text
from coordserver.metrics import _AppFigures, _Scrape, process_metrics
from coordserver.metrics_text import Exposition

ODD_LABELS = ["/api/x/{id}", 'quo"te', "back\\slash", "new\nline", "ünïcödé", ""]


class Frozen:
    """One collect() of a collector, replayed: both renderers see the same values."""

    def __init__(self, collector):
        self.metrics = list(collector.collect())

    def collect(self):
        return self.metrics


def same(exposition: Exposition, collector) -> bytes:
    frozen = Frozen(collector)
    expected = generate_latest(frozen)
    assert exposition.render(frozen).decode() == expected.decode()
    return expected


class Special:
    """Samples generate_latest treats apart: a timestamp, a _created sample, NaN and infinities."""

    def collect(self):
        stamped = GaugeMetricFamily("odd_stamped", "a gauge with a timestamp", labels=["k"])
        stamped.add_metric(["v"], 1.5, timestamp=1700000000.25)
        yield stamped
        created = CounterMetricFamily("odd_created", "a counter with its creation time", labels=["k"])
        created.add_metric(["v"], 3, created=1700000000.0)
        yield created
        for name, number in (("odd_nan", math.nan), ("odd_inf", math.inf), ("odd_minus_inf", -math.inf),
                             ("odd_big", 123456789.0), ("odd_small", 1e-9)):
            yield GaugeMetricFamily(name, "help with \\ and \n", value=number)


def test_every_kind_of_metric_and_label_renders_as_generate_latest_does():
    registry = CollectorRegistry()
    counter = Counter("t_requests", "requests", ["route", "status"], registry=registry)
    histogram = Histogram("t_seconds", "latency", ["route"], registry=registry, buckets=(0.001, 0.5, 2.5))
    gauge = Gauge("t_open", "open things", registry=registry)
    summary = Summary("t_size", "sizes", ["kind"], registry=registry)
    Info("t_build", "build", registry=registry).info({"version": "1.2.3", "odd": 'a"b'})
    Enum("t_state", "state", states=["up", "down"], registry=registry).state("down")
    registry.register(Special())
    exposition = Exposition()
    for label in ODD_LABELS:
        counter.labels(label, "2xx").inc()
        histogram.labels(label).observe(0.2)
        summary.labels(label).observe(7)
    gauge.set(3)
    first = same(exposition, registry)
    for label in ODD_LABELS:  # new values for the series it has met: the remembered text, the values new
        counter.labels(label, "2xx").inc(41)
        histogram.labels(label).observe(3)
    counter.labels("/api/new", "5xx").inc()  # and a series it has not met
    gauge.set(-0.5)
    second = same(exposition, registry)
    assert first != second and 't_requests_total{route="/api/new",status="5xx"} 1.0' in second.decode()
    assert b'odd_stamped{k="v"} 1.5 1700000000250' in second and b"odd_created_created" in second


def test_the_scrape_of_a_server_renders_as_generate_latest_does():
    process = process_metrics()
    for number in range(30):
        process.observe_request("GET", f"/api/route/{number}", 200 + number % 3 * 100, 0.002 * number)
    process.count_events(["message", "task_updated"])
    figures = _AppFigures({**{name: 1 for name in ("coord_users_total", "coord_chat_channels_total",
                                                   "coord_chat_messages_total", "coord_mailbox_messages_total",
                                                   "coord_swarm_projects_total", "coord_push_outbox_pending")},
                           "tasks": {"ready": 2, "done": 5}}, 0.0, math.nan)
    exposition = Exposition()
    for _ in range(2):
        same(exposition, _Scrape(process.sources, figures))
        process.observe_request("GET", "/api/route/1", 200, 0.3)


def test_the_cache_of_series_is_bounded(monkeypatch):
    monkeypatch.setattr(metrics_text, "_MAX_SERIES", 10)
    registry = CollectorRegistry()
    counter = Counter("t_many", "many series", ["n"], registry=registry)
    exposition = Exposition()
    for number in range(25):
        counter.labels(str(number)).inc()
        same(exposition, registry)
        assert len(exposition._series) <= 10


def test_the_multiprocess_files_read_as_the_library_reads_them(tmp_path, monkeypatch):
    from prometheus_client.multiprocess import MultiProcessCollector
    from prometheus_client.values import MultiProcessValue

    from coordserver.metrics import _MultiProcessFiles
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    ours, library = _MultiProcessFiles(None, str(tmp_path)), MultiProcessCollector(None, str(tmp_path))

    def write(pid: int, route: str, amount: float) -> None:
        value = MultiProcessValue(lambda: pid)
        value("counter", "t_requests", "t_requests_total", ("route",), (route,), "requests").inc(amount)
        for le in ("0.1", "+Inf"):
            value("histogram", "t_seconds", "t_seconds_bucket", ("route", "le"), (route, le), "latency").inc(amount)
        value("histogram", "t_seconds", "t_seconds_sum", ("route",), (route,), "latency").inc(amount / 10)
        value("gauge", "t_open", "t_open", (), (), "open", multiprocess_mode="livesum").set(amount)
        value("gauge", "t_peak", "t_peak", (), (), "peak", multiprocess_mode="max").set(amount)

    write(101, ODD_LABELS[1], 2)
    write(102, ODD_LABELS[1], 3)
    first = generate_latest(ours)
    assert first == generate_latest(library) and b't_requests_total{route="quo\\"te"} 5.0' in first
    write(103, ODD_LABELS[2], 4)  # a new process, a new series: read with the keys already parsed
    second = generate_latest(ours)
    assert second == generate_latest(library) and b"t_open 9.0" in second and b"t_peak 4.0" in second
