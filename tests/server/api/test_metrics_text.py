"""coordserver.metrics_text.Exposition writes what prometheus-client's generate_latest writes, byte for byte."""
from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, Summary, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from coordserver import metrics_text
from coordserver.metrics import _AppFigures, process_metrics
from coordserver.metrics_children import Children, supported
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


class Reference:
    """What the library renders for a scrape: its collectors (ProcessMetrics.sources), then the app's figures."""

    def __init__(self, *collectors):
        self.collectors = collectors

    def collect(self):
        for collector in self.collectors:
            yield from collector.collect()


def figures() -> _AppFigures:
    return _AppFigures({**{name: 1 for name in ("coord_users_total", "coord_chat_channels_total",
                                                "coord_chat_messages_total", "coord_mailbox_messages_total",
                                                "coord_swarm_projects_total", "coord_push_outbox_pending")},
                        "tasks": {"ready": 2, "done": 5}, "alerts": {"open": 3, "acked": 1}}, 0.0, math.nan)


def scrape_both(process, app) -> tuple[bytes, bytes]:
    """One scrape rendered the library's way (each part's collect(): the library's own) and the server's
    way (ProcessMetrics.parts). The process and GC collectors are read once for both (CPU time and GC
    counts move between two reads)."""
    from prometheus_client import GCCollector, PlatformCollector, ProcessCollector
    parts = [Frozen(p) if isinstance(p, (GCCollector, PlatformCollector, ProcessCollector)) else p
             for p in process.parts]
    assert [m.name for m in process.sources.collect()] == [m.name for p in parts for m in p.collect()]
    return generate_latest(Reference(*parts, app)), process.exposition.render(*parts, app)


def test_the_scrape_of_a_server_renders_as_generate_latest_does():
    """What a scrape renders (ProcessMetrics.parts, children reusing their lines) against the library's
    registry, over scrapes where some series change, some do not and some are new."""
    process = process_metrics()
    for number in range(30):
        process.observe_request("GET", f"/api/route/{number}", 200 + number % 3 * 100, 0.002 * number)
    process.count_events(["message", "task_updated"])
    app = figures()
    for round_ in range(4):
        expected, rendered = scrape_both(process, app)
        assert rendered.decode() == expected.decode()
        process.observe_request("GET", "/api/route/1", 200, 0.3)  # a changed child
        process.observe_request("POST", f"/api/new/{round_}", 201, 0.0)  # a new one; sum unchanged by 0.0
        process.count_events(["message"])
    assert b'route="/api/new/2",status="2xx"} 1.0' in expected


def test_the_cache_of_series_is_bounded(monkeypatch):
    monkeypatch.setattr(metrics_text, "_MAX_SERIES", 10)
    registry = CollectorRegistry()
    counter = Counter("t_many", "many series", ["n"], registry=registry)
    exposition = Exposition()
    for number in range(25):
        counter.labels(str(number)).inc()
        same(exposition, registry)
        assert len(exposition._series) <= 10


def test_children_reuse_lines_only_while_their_values_stay_the_same():
    """Each render against generate_latest of the same registry: a stale line (a child whose value changed
    served from the last render) would differ."""
    registry = CollectorRegistry()
    counter = Counter("t_requests", "requests", ["route", "status"], registry=registry)
    histogram = Histogram("t_seconds", "latency", ["route"], registry=registry, buckets=(0.001, 0.5, 2.5))
    parts = [Children(counter), Children(histogram)]
    assert all(supported(metric) for metric in (counter, histogram))
    assert not supported(Counter("t_plain", "no labels", registry=None))
    exposition = Exposition()

    def check() -> str:
        text = exposition.render(*parts).decode()
        assert text == generate_latest(registry).decode()
        return text

    check()  # no children yet: the heads alone
    for label in ODD_LABELS:
        counter.labels(label, "2xx").inc()
        histogram.labels(label).observe(0.2)
    check()
    assert check().count("\n") > 20  # nothing changed: every child from its kept lines
    counter.labels(ODD_LABELS[3], "2xx").inc(2)
    histogram.labels(ODD_LABELS[0]).observe(0.0)  # a bucket and the count change, the sum does not
    text = check()
    assert 't_requests_total{route="new\\nline",status="2xx"} 3.0' in text
    assert 't_seconds_count{route="/api/x/{id}"} 2.0' in text
    histogram.remove(ODD_LABELS[1])  # gone, then made again at zero
    counter.clear()
    check()
    histogram.labels(ODD_LABELS[1]).observe(3)
    counter.labels(ODD_LABELS[1], "5xx").inc()
    assert 't_seconds_bucket{le="+Inf",route="quo\\"te"} 1.0' in check()


def test_children_with_created_samples_render_as_the_library_does():
    """_created samples are moved to the end of the family by generate_latest: the family is then
    rendered whole, the library's way."""
    from prometheus_client import disable_created_metrics, enable_created_metrics
    registry = CollectorRegistry()
    counter = Counter("t_made", "made", ["k"], registry=registry)
    part, exposition = Children(counter), Exposition()
    counter.labels("a").inc()
    enable_created_metrics()
    try:
        text = exposition.render(part)
        assert text == generate_latest(registry) and b"t_made_created" in text
    finally:
        disable_created_metrics()
    counter.labels("a").inc()
    assert exposition.render(part) == generate_latest(registry)


def test_the_multiprocess_files_render_as_the_library_renders_them(tmp_path, monkeypatch):
    from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
    from prometheus_client.values import MultiProcessValue

    from coordserver.metrics_files import MultiProcessFiles
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    ours, library, exposition = MultiProcessFiles(str(tmp_path)), MultiProcessCollector(None, str(tmp_path)), Exposition()

    def check() -> str:
        text = exposition.render(ours).decode()
        assert text == generate_latest(library).decode()
        return text

    def write(pid: int, route: str, amount: float, bound: str = "0.1") -> None:
        value = MultiProcessValue(lambda: pid)
        value("counter", "t_requests", "t_requests_total", ("route",), (route,), "requests").inc(amount)
        for le in (bound, "+Inf"):
            value("histogram", "t_seconds", "t_seconds_bucket", ("route", "le"), (route, le), "latency").inc(amount)
        value("histogram", "t_seconds", "t_seconds_sum", ("route",), (route,), "latency").inc(amount / 10)
        value("gauge", "t_open", "t_open", (), (), "open", multiprocess_mode="livesum").set(amount)
        value("gauge", "t_peak", "t_peak", (), (), "peak", multiprocess_mode="max").set(amount)
        value("gauge", "t_each", "t_each", (), (), "each", multiprocess_mode="all").set(amount)
        value("gauge", "t_last", "t_last", (), (), "last", multiprocess_mode="mostrecent").set(amount, timestamp=pid)

    write(101, ODD_LABELS[1], 2)
    write(102, ODD_LABELS[1], 3)
    first = check()
    assert 't_requests_total{route="quo\\"te"} 5.0' in first and check() == first
    write(102, ODD_LABELS[1], 1)  # one process's values change, in place
    assert 't_requests_total{route="quo\\"te"} 6.0' in check()
    write(101, ODD_LABELS[2], 4, bound="0.5")  # a new series in a file (it grows) and a new bound
    write(103, ODD_LABELS[2], 4)  # a new process
    second = check()
    assert "t_open 9.0" in second and 't_each{pid="103"} 4.0' in second and "t_last 4.0" in second
    mark_process_dead(101, str(tmp_path))  # its live gauges go, its counts stay
    assert "t_open 5.0" in check()
    for path in tmp_path.glob("*_103.db"):  # a file replaced under the same name (a pid used again)
        path.unlink()
    write(103, ODD_LABELS[0], 1)
    assert 't_requests_total{route="/api/x/{id}"} 1.0' in check()


def test_a_multiprocess_server_scrape_renders_as_the_library_does(tmp_path):
    """ProcessMetrics in multi-process mode (a fresh process: the mode is chosen at import), with a second
    worker's files beside its own, against generate_latest of its library registry."""
    import subprocess
    import sys
    script = f"""
import glob, os, shutil
os.environ["COORD_METRICS_DIR"] = {str(tmp_path)!r}
from coordserver.metrics import process_metrics
from tests.server.api.test_metrics_text import figures, scrape_both
process, app = process_metrics(), figures()
def check():
    expected, text = scrape_both(process, app)
    assert text == expected, "differs"
    return text.decode()
for number in range(20):
    process.observe_request("GET", f"/api/route/{{number}}", 200, 0.01 * number)
for path in glob.glob({str(tmp_path)!r} + "/*.db"):  # a second worker with the same series
    shutil.copy(path, path.replace(f"_{{os.getpid()}}.db", "_1.db"))
check()
process.observe_request("GET", "/api/route/3", 200, 0.2)
assert 'coord_http_requests_total{{method="GET",route="/api/route/3",status="2xx"}} 3.0' in check()
process.observe_request("PUT", "/api/route/new", 404, 0.0)
assert 'route="/api/route/new",status="4xx"}} 1.0' in check()
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "ok", done.stderr


