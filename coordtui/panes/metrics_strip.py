"""The doctor pane's live metrics strip (admins): requests/s, p99 latency, open streams, push outbox and
event-loop lag from GET /api/metrics, with sparklines of the last minute. It scrapes only while the
doctor pane is in view, and hides itself when the server has no metrics (404) or refuses them (401/403)."""
from __future__ import annotations

import time
from collections import deque

from rich.text import Text
from textual import work
from textual.widgets import Static

from ..client.api import ApiError, ConnectionFailed
from ..client.v11 import MetricsSample
from ..session import Session
from .base import Pane

SCRAPE_SECONDS = 2.0
WINDOW_SECONDS = 60.0
BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    if top <= 0:
        return "".join(" " if v is None else BLOCKS[0] for v in values)
    return "".join(" " if v is None else BLOCKS[min(len(BLOCKS) - 1, int(v / top * (len(BLOCKS) - 1) + 0.5))]
                   for v in values)


def duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


class MetricsStrip(Static):
    scrape_seconds = SCRAPE_SECONDS

    def __init__(self, session: Session, *, id: str) -> None:
        super().__init__("", id=id)
        self.session = session
        self.display = False
        self.unsupported = False
        self.samples: deque[MetricsSample] = deque(maxlen=int(WINDOW_SECONDS / self.scrape_seconds) + 1)
        self.rates: deque[float | None] = deque(maxlen=self.samples.maxlen)
        self.p99s: deque[float | None] = deque(maxlen=self.samples.maxlen)
        self.scrapes = 0

    def on_mount(self) -> None:
        self.set_interval(self.scrape_seconds, self.tick)

    def tick(self) -> None:
        pane = self.parent
        if self.unsupported or not self.session.is_admin or self.session.client is None \
                or not (isinstance(pane, Pane) and pane.active) or self.app.screen is not self.screen:  # covered: no scrapes
            return
        self.scrape()

    @work(exclusive=True, group="metrics", exit_on_error=False)
    async def scrape(self) -> None:
        try:
            sample = await self.session.connected_client().metrics(at=time.monotonic())
        except ApiError as exc:
            if exc.unsupported or exc.status in (401, 403):  # no metrics here, or behind their own token
                self.unsupported = True
                self.display = False
            return
        except ConnectionFailed:
            return
        before = self.samples[-1] if self.samples else None
        self.samples.append(sample)
        self.rates.append(sample.rate(before))
        self.p99s.append(sample.p99(before) if before is not None else None)
        self.scrapes += 1
        self.update(self.render_strip(sample))
        self.display = True

    def render_strip(self, sample: MetricsSample) -> Text:
        rate = self.rates[-1]
        streams = int(sample.streams + sample.sockets)
        lag = duration_text(sample.loop_lag)
        return Text.assemble(
            ("req/s ", "dim"), (f"{rate:.1f}" if rate is not None else "–", "bold"), " ",
            (sparkline(list(self.rates)), "cyan"), (f"  {int(sample.requests):,} req", "dim"),
            ("  loop lag ", "dim"), (lag, "bold"), "\n",
            ("p99   ", "dim"), (duration_text(self.p99s[-1]), "bold"), " ", (sparkline(list(self.p99s)), "magenta"),
            ("  streams ", "dim"), (str(streams), "bold"), ("  outbox ", "dim"), (str(int(sample.outbox)), "bold"))
