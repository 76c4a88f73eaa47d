"""Labelled metrics whose children keep their rendered lines while their values stay the same.

A scrape of a server that has seen every route is ~1,000 lines, nearly all of them the request counter
and the latency histogram (a child per route, nine lines per histogram child), and between two scrapes
only the routes that were requested change. prometheus-client's `collect()` builds a Sample, a labels
dict and a formatted value for every one of those lines on every scrape (most of a scrape's CPU,
bench/RESULTS.md). `Children` reads a child's values (what the library's `_child_samples` reads) and
compares them with the last scrape's: an unchanged child's lines are the ones rendered last time; a
changed one's samples are made by the library (`_samples()` of that child, labelled as its `collect()`
labels them) and rendered by `Exposition`. The text is therefore what `generate_latest` writes for the
metric, byte for byte (tests/server/api/test_metrics_text.py). The multi-process counterpart, over the
files of COORD_METRICS_DIR, is metrics_files.py.

This reads private attributes of prometheus-client's metric objects (`_metrics`, `_lock`, `_buckets`,
`_sum`, `_value`): a metric without them is collected the library's way (`supported`).
"""
from __future__ import annotations

from operator import attrgetter

from prometheus_client import Counter, Histogram, values
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from .metrics_text import Exposition


_VALUE = attrgetter("_value")  # a MutexValue's float
_FLOAT_READABLE = isinstance(getattr(values.MutexValue("counter", "probe", "probe", (), (), ""), "_value", None), float)


def _cells(child) -> tuple:
    """The value objects a child's samples are read from (its `_child_samples` reads these)."""
    if isinstance(child, Histogram):
        return (*child._buckets, child._sum)
    return (child._value,)


def supported(metric) -> bool:
    """A labelled Counter or Histogram of this prometheus-client, laid out as `Children` reads it."""
    if not isinstance(metric, (Counter, Histogram)) or not metric._labelnames:
        return False
    needed = ("_metrics", "_lock", "_labelvalues", "_name", "_samples", "_get_metric")
    return (all(hasattr(metric, name) for name in needed) and not metric._labelvalues
            and _FLOAT_READABLE and not getattr(values.ValueClass, "_multiprocess", False))  # MutexValue


class Children:
    """A labelled Counter or Histogram (one process's values) as a scrape part: `text` writes what
    generate_latest writes for it, re-rendering only the children whose values changed."""

    def __init__(self, metric):
        self.metric = metric
        self._children: dict[tuple, tuple] = {}  # label values -> (the child, its value objects)
        self._rendered: dict[tuple, tuple[tuple, str]] = {}  # label values -> (values read, lines)

    def collect(self):
        """The library's own collect (a reference for tests, and this part as a plain collector)."""
        return self.metric.collect()

    def text(self, exposition: Exposition) -> str:
        family = self.metric._get_metric()
        with self.metric._lock:
            children = list(self.metric._metrics.items())
        parts = [exposition.head(family)]
        for labels, child in children:
            lines = self._lines(exposition, family, labels, child)
            if lines is None:  # a sample generate_latest writes apart (a _created time): the library's way
                self._rendered.clear()
                return exposition.metric(self.metric.collect()[0])
            parts.append(lines)
        if len(self._children) > len(children):  # children removed (`clear`, `remove`)
            self._forget(labels for labels, _child in children)
        return "".join(parts)

    def _lines(self, exposition: Exposition, family: Metric, labels: tuple, child) -> str | None:
        known = self._children.get(labels)
        if known is None or known[0] is not child:  # new, or removed and made again: nothing rendered is its
            known = self._children[labels] = (child, _cells(child))
            self._rendered.pop(labels, None)
        values = self._values(child, known[1])
        rendered = self._rendered.get(labels)
        if rendered is not None and rendered[0] == values:
            return rendered[1]
        lines = exposition.lines(family, self._samples(labels, child))
        if lines is not None and self._values(child, known[1]) == values:  # not changed while rendering
            self._rendered[labels] = (values, lines)
        return lines

    @staticmethod
    def _values(child, cells: tuple) -> tuple:
        # The float itself rather than `get()`, which takes the value's lock for each bucket (a third of
        # a scrape): reading one attribute is atomic, and a value changing meanwhile is caught either by
        # the re-read after rendering or at the next scrape.
        return (getattr(child, "_created", None), *map(_VALUE, cells))

    def _samples(self, labels: tuple, child) -> list[Sample]:
        """The child's samples as the library's `collect()` names and labels them (`_multi_samples`)."""
        series = list(zip(self.metric._labelnames, labels))
        return [Sample(self.metric._name + suffix, dict(series + list(extra.items())), value, timestamp, exemplar,
                       native)
                for suffix, extra, value, timestamp, exemplar, native in child._samples()]

    def _forget(self, kept) -> None:
        keep = set(kept)
        for cache in (self._children, self._rendered):
            for labels in [labels for labels in cache if labels not in keep]:
                del cache[labels]
