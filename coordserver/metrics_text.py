"""prometheus-client's `generate_latest`, with the text of each series' name and labels made once.

generate_latest formats every sample from scratch: it sorts and escapes the labels and checks the
names against regular expressions. A server that has seen all its routes has about 1,700 samples,
nearly all of them buckets of the latency histogram, and that formatting was most of a scrape's CPU
(bench/metrics_scrape.py, bench/RESULTS.md). A series' name and labels never change, only its value:
`Exposition` asks generate_latest itself for a series' line the first time it meets the series, keeps
the part before the value, and afterwards appends the value as the library writes it
(`floatToGoString`). So the text stays the library's, byte for byte (tests/server/api/test_metrics_text.py
compares the two). A metric with anything besides plain samples (timestamps, exemplars, OpenMetrics
`_created`/`_gsum`/`_gcount` samples) is written by generate_latest whole.
"""
from __future__ import annotations

from typing import Iterable

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

_MAX_SERIES = 50_000  # labels are bounded (route templates, known methods), but never let the cache grow unbounded
_PROBE = 0.0
_PROBE_TEXT = f" {floatToGoString(_PROBE)}\n"
_MOVED_SUFFIXES = ("_created", "_gsum", "_gcount")  # generate_latest moves these after the others


class _One:
    """A collector of one metric, for generate_latest."""

    def __init__(self, metric: Metric):
        self.metric = metric

    def collect(self) -> Iterable[Metric]:
        return [self.metric]


def _text(metric: Metric) -> str:
    return generate_latest(_One(metric)).decode("utf-8")


class Exposition:
    """Renders collectors as generate_latest does. One per process; not thread-safe (the scrape calls
    it on the event loop)."""

    def __init__(self):
        self._heads: dict[tuple, str] = {}  # (name, type, help, unit) -> the "# HELP" and "# TYPE" lines
        self._series: dict[tuple, str] = {}  # (sample name, label items) -> the line up to its value

    def render(self, collector) -> bytes:
        parts: list[str] = []
        for metric in collector.collect():
            if not self._plain(metric):
                parts.append(_text(metric))
                continue
            parts.append(self._head(metric))
            for sample in metric.samples:
                series = self._series.get((sample.name, tuple(sample.labels.items())))
                if series is None:
                    series = self._remember(metric, sample)
                parts.append(f"{series}{floatToGoString(sample.value)}\n")
        return "".join(parts).encode("utf-8")

    @staticmethod
    def _plain(metric: Metric) -> bool:
        moved = tuple(metric.name + suffix for suffix in _MOVED_SUFFIXES)
        return all(sample.timestamp is None and sample.exemplar is None and sample.native_histogram is None
                   and sample.name not in moved for sample in metric.samples)

    def _head(self, metric: Metric) -> str:
        key = (metric.name, metric.type, metric.documentation, metric.unit)
        head = self._heads.get(key)
        if head is None:
            head = self._heads[key] = _text(Metric(metric.name, metric.documentation, metric.type, metric.unit))
        return head

    def _remember(self, metric: Metric, sample) -> str:
        alone = Metric(metric.name, metric.documentation, metric.type, metric.unit)
        alone.samples = [sample._replace(value=_PROBE)]
        line = _text(alone)[len(self._head(metric)):]
        assert line.endswith(_PROBE_TEXT), line
        if len(self._series) >= _MAX_SERIES:
            self._series.clear()
        series = self._series[(sample.name, tuple(sample.labels.items()))] = line[:-len(_PROBE_TEXT) + 1]
        return series
