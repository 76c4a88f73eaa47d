"""Ops response models (API.md §13): health and the doctor reports."""
from __future__ import annotations

from typing import Any, Literal

from .base import Model
from .common import Time

ProbeStatus = Literal["pass", "warn", "fail"]


class Health(Model):
    """The server answers."""
    status: Literal["ok"]
    timestamp: Time


class Probe(Model):
    """One check: its verdict, a sentence, and the facts behind it (their keys depend on the probe)."""
    id: str
    name: str
    status: ProbeStatus
    summary: str
    details: dict[str, Any] | None
    duration_ms: int


class DoctorReport(Model):
    """The probes' verdicts: `status` is the worst, `ok` when every probe passed."""
    version: str
    ok: bool
    status: ProbeStatus
    warnings: list[str]
    errors: list[str]
    probes: list[Probe]
    total_duration_ms: int
