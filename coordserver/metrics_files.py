"""The shared files of multi-process mode (COORD_METRICS_DIR), rendered as prometheus-client's
MultiProcessCollector and generate_latest render them, with the work of a scrape limited to what changed.

The library's collector, on every scrape, decodes every entry of every process's file (its key is JSON),
makes a Sample of each, adds them up across processes and formats every line: with two workers that
have seen every route, ~2,000 entries and most of a scrape's CPU (bench/RESULTS.md). Here:
- a file's entries (key and position) are parsed once, and again only when the file grows (a process met
  a new series), is replaced, or goes; each scrape reads a file's bytes and unpacks all its values in
  one `struct` call;
- the series are grouped as the library adds them up (a counter child; a histogram child's buckets, sum
  and count; a gauge whole), and a group whose values in every file are the ones of the last scrape
  keeps its rendered lines;
- a changed group's samples are the library's: its raw samples, made as `_read_metrics` makes them, go
  through `MultiProcessCollector._accumulate_metrics`, and `Exposition` renders them;
- the order of families and groups is taken from the library's own `_accumulate_metrics` over every raw
  sample, whenever the files' layout changes (it does not depend on the values).
tests/server/api/test_metrics_text.py compares the text with generate_latest(MultiProcessCollector).
"""
from __future__ import annotations

import glob
import json
import mmap
import os
import struct
from operator import itemgetter

from prometheus_client.metrics_core import Metric
from prometheus_client.mmap_dict import _read_all_values
from prometheus_client.multiprocess import MultiProcessCollector

from .metrics_text import Exposition

_USED = struct.Struct("i")  # the first 4 bytes of a file: how much of it holds entries (as mmap_dict reads it)


def _read(path: str) -> tuple[bytes, int, tuple]:
    """A file's bytes in use (as MmapedDict.read_all_values_from_file reads them), and its identity."""
    with open(path, "rb") as stream:
        data = stream.read(mmap.PAGESIZE)
        used = _USED.unpack_from(data, 0)[0]
        if used > len(data):
            data += stream.read(used - len(data))
        status = os.fstat(stream.fileno())
    return data, used, (status.st_dev, status.st_ino)


class _File:
    """One process's file of one kind: its entries' keys, parsed once, and a reader of all their values."""

    def __init__(self, path: str, identity: tuple, data: bytes, used: int, keys: dict):
        parts = os.path.basename(path).split("_")
        self.identity, self.used, self.kind = identity, used, parts[0]
        self.mode = parts[1] if self.kind == "gauge" else None  # the gauge's multiprocess_mode
        self.pid = parts[2][:-3] if self.kind == "gauge" else None
        self.entries: list[tuple] = []  # (metric name, sample name, label items, help text)
        layout, end = ["="], 0  # native byte order, no alignment padding: the positions are the file's
        for key, _value, _timestamp, position in _read_all_values(data, used):
            self.entries.append(_parsed(keys, key))
            layout.append(f"{position - end}xdd")
            end = position + 16
        self.values = struct.Struct("".join(layout))  # value, timestamp, value, timestamp, ... in one call

    def raw_sample(self, entry: int, values: tuple) -> tuple:
        """(name, labels, value, timestamp) as the library's `_read_metrics` adds it to its metric."""
        _metric, name, labels, _help = self.entries[entry]
        if self.kind == "gauge":
            return name, labels + (("pid", self.pid),), values[2 * entry], values[2 * entry + 1]
        return name, labels, values[2 * entry], None


def _parsed(keys: dict, key: str) -> tuple:
    found = keys.get(key)
    if found is None:
        metric_name, name, labels, help_text = json.loads(key)
        found = keys[key] = (metric_name, name, tuple(sorted(labels.items())), help_text)
    return found


def _group_labels(kind: str, labels: tuple) -> tuple:
    """The series the library adds a raw sample into: a gauge is one group, a histogram child's buckets
    go with its sum and count."""
    if kind == "gauge":
        return ()
    if kind == "histogram":
        return tuple(item for item in labels if item[0] != "le")
    return labels


class _Group:
    """The raw entries (in every file) that make one group of lines, and how to read their values."""

    def __init__(self, metric: Metric):
        self.metric = metric  # the family's head (name, help, type), as the library's merge names it
        self.refs: list[tuple[int, int]] = []  # (file index, entry index), in the library's reading order
        self.readers: list[tuple[int, itemgetter]] = []
        self.rendered: tuple[tuple, str] | None = None  # (the values it was rendered from, its lines)

    def finish(self, kind: str) -> None:
        by_file: dict[int, list[int]] = {}
        for file_index, entry in self.refs:  # a gauge's timestamp matters (mostrecent); others' never does
            by_file.setdefault(file_index, []).extend((2 * entry, 2 * entry + 1) if kind == "gauge" else (2 * entry,))
        self.readers = [(file_index, itemgetter(*indexes)) for file_index, indexes in by_file.items()]

    def state(self, values: list[tuple]) -> tuple:
        return tuple([read(values[file_index]) for file_index, read in self.readers])


class _Plan:
    """The families and their groups in the order the library writes them, for one layout of the files."""

    def __init__(self, files: list[_File], values: list[tuple]):
        raw = _raw_metrics(files, values, [(f, e) for f in range(len(files)) for e in range(len(files[f].entries))])
        merged = MultiProcessCollector._accumulate_metrics(raw, True)
        groups: dict[tuple, _Group] = {}
        self.families: list[tuple[Metric, list[_Group]]] = []
        for metric in merged:  # the library's order of families, and of series within each
            family: list[_Group] = []
            head = Metric(metric.name, metric.documentation, metric.type)
            for sample in metric.samples:
                key = (metric.name, _group_labels(metric.type, tuple(sample.labels.items())))
                if key not in groups:
                    groups[key] = _Group(head)
                    family.append(groups[key])
            self.families.append((head, family))
        for file_index, file in enumerate(files):  # each raw entry to its group, in the library's reading order
            for entry, (metric_name, _name, labels, _help) in enumerate(file.entries):
                groups[(metric_name, _group_labels(file.kind, labels))].refs.append((file_index, entry))
        for group in groups.values():
            group.finish(group.metric.type)


def _raw_metrics(files: list[_File], values: list[tuple], refs: list[tuple[int, int]]) -> dict[str, Metric]:
    """Metrics of raw samples, as the library's `_read_metrics` makes them, from the entries `refs`."""
    metrics: dict[str, Metric] = {}
    for file_index, entry in refs:
        file = files[file_index]
        metric_name, _name, _labels, help_text = file.entries[entry]
        metric = metrics.get(metric_name)
        if metric is None:
            metric = metrics[metric_name] = Metric(metric_name, help_text, file.kind)
        if file.kind == "gauge":
            # as prometheus_client's MultiProcessCollector does; its stubs leave the attribute out
            metric._multiprocess_mode = file.mode  # type: ignore[attr-defined]
        metric.add_sample(*file.raw_sample(entry, values[file_index]))
    return metrics


class MultiProcessFiles:
    """A scrape part (metrics_text.Exposition.render) of every process's values in `path`."""

    def __init__(self, path: str):
        self.path = path
        self._keys: dict[str, tuple] = {}  # an entry's JSON key -> parsed, once per process
        self._files: dict[str, _File] = {}
        self._paths: list[str] = []
        self._plan: _Plan | None = None

    def collect(self):
        """The library's MultiProcessCollector (a reference for tests and the bench)."""
        return MultiProcessCollector(None, path=self.path).collect()

    def text(self, exposition: Exposition) -> str:
        paths, files, values = self._read_files()
        if self._plan is None or paths != self._paths or any(f is not self._files.get(p) for p, f in zip(paths, files)):
            self._files, self._paths = dict(zip(paths, files)), paths
            self._plan = _Plan(files, values)
        out: list[str] = []
        for head, groups in self._plan.families:
            out.append(exposition.head(head))
            for group in groups:
                lines = self._lines(exposition, files, values, group)
                if lines is None:  # not plain text (never for these files' samples): the library's way whole
                    return "".join(exposition.metric(metric) for metric in self.collect())
                out.append(lines)
        return "".join(out)

    def _read_files(self) -> tuple[list[str], list[_File], list[tuple]]:
        paths, files, values = [], [], []
        for path in glob.glob(os.path.join(self.path, "*.db")):  # the library's glob, so its order
            try:
                data, used, identity = _read(path)
            except FileNotFoundError:
                parts = os.path.basename(path).split("_")
                if parts[0] == "gauge" and parts[1].startswith("live"):
                    continue  # removed by mark_process_dead since the glob (as the library skips it)
                raise
            file = self._files.get(path)
            if file is None or file.identity != identity or file.used != used:
                file = _File(path, identity, data, used, self._keys)
            paths.append(path)
            files.append(file)
            values.append(file.values.unpack_from(data))
        if len(self._keys) > 100_000:
            self._keys.clear()
        return paths, files, values

    def _lines(self, exposition: Exposition, files: list[_File], values: list[tuple], group: _Group) -> str | None:
        state = group.state(values)
        if group.rendered is not None and group.rendered[0] == state:
            return group.rendered[1]
        metric = _raw_metrics(files, values, group.refs)[group.metric.name]
        MultiProcessCollector._accumulate_metrics({metric.name: metric}, True)
        lines = exposition.lines(group.metric, metric.samples)
        if lines is not None:
            group.rendered = (state, lines)
        return lines
