"""prometheus-client's `generate_latest`, with the text of each series' name and labels made once.

generate_latest formats every sample from scratch: it sorts and escapes the labels and checks the
names against regular expressions. A server that has seen all its routes has about 1,000 samples,
nearly all of them buckets of the latency histogram, and that formatting was most of a scrape's CPU
(bench/metrics_scrape.py, bench/RESULTS.md). A series' name and labels never change, only its value:
`Exposition` asks generate_latest itself for a series' line the first time it meets the series, keeps
the part before the value, and afterwards appends the value as the library writes it
(`floatToGoString`). So the text stays the library's, byte for byte (tests/server/api/test_metrics_text.py
compares the two). A metric with anything besides plain samples (timestamps, exemplars, OpenMetrics
`_created`/`_gsum`/`_gcount` samples) is written by generate_latest whole.

Besides collectors, `render` takes families that keep their children's rendered lines while the values
stay the same (metrics_children.py): they call `head` and `lines` here, so their text is made the same way.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
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

    def render(self, *parts) -> bytes:
        """generate_latest of the parts one after the other. A part is a collector, or a family that
        writes its own text (`text(exposition)`, metrics_children.py)."""
        out: list[str] = []
        for part in parts:
            own_text = getattr(part, "text", None)
            if own_text is not None:
                out.append(own_text(self))
                continue
            for metric in part.collect():
                out.append(self.metric(metric))
        return "".join(out).encode("utf-8")

    def metric(self, metric: Metric) -> str:
        """One metric family as generate_latest writes it."""
        lines = self.lines(metric, metric.samples)
        return _text(metric) if lines is None else self.head(metric) + lines

    def lines(self, metric: Metric, samples: Sequence[Sample]) -> str | None:
        """The sample lines of `samples` (of `metric`), as generate_latest writes them inside the family;
        None if any is not plain (generate_latest would move it, or write more than name, labels and value)."""
        moved = tuple(metric.name + suffix for suffix in _MOVED_SUFFIXES)
        parts: list[str] = []
        for sample in samples:
            if (sample.timestamp is not None or sample.exemplar is not None or sample.native_histogram is not None
                    or sample.name in moved):
                return None
            series = self._series.get((sample.name, tuple(sample.labels.items())))
            if series is None:
                series = self._remember(metric, sample)
            parts.append(f"{series}{floatToGoString(sample.value)}\n")
        return "".join(parts)

    def head(self, metric: Metric) -> str:
        """A family's "# HELP" and "# TYPE" lines."""
        key = (metric.name, metric.type, metric.documentation, metric.unit)
        head = self._heads.get(key)
        if head is None:
            head = self._heads[key] = _text(Metric(metric.name, metric.documentation, metric.type, metric.unit))
        return head

    def _remember(self, metric: Metric, sample) -> str:
        alone = Metric(metric.name, metric.documentation, metric.type, metric.unit)
        alone.samples = [sample._replace(value=_PROBE)]
        line = _text(alone)[len(self.head(metric)):]
        assert line.endswith(_PROBE_TEXT), line
        if len(self._series) >= _MAX_SERIES:
            self._series.clear()
        series = self._series[(sample.name, tuple(sample.labels.items()))] = line[:-len(_PROBE_TEXT) + 1]
        return series
