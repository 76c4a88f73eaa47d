"""One-shot wake items (Buzz alerts) kept until the person dismisses them.

The server delivers a Buzz item once: the `GET /api/wake` or `wake_pulse` that carries it marks it
delivered. So the client must keep every such item it was given, whatever pane is active when it
arrives, and across restarts of coordtui: the store lives in the app, not in the Wake pane, and is
saved (atomically) in the client's state directory, one file per server and identity.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import platformdirs

from .client.models import Wake, WakeItem
from .client.safe_text import neutralise_json

log = logging.getLogger("coordtui")

_ITEM_FIELDS = {f.name for f in fields(WakeItem)}


def state_dir() -> Path:
    """Where the client keeps what it must not lose (COORD_STATE_DIR overrides)."""
    override = os.environ.get("COORD_STATE_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("coord")) / "client"


def store_path(server: str, identity: str, kind: str = "alerts") -> Path:
    """`server`: the deployment's URL, or what else names the server across runs; `kind`: which store."""
    digest = hashlib.sha256(f"{server.rstrip('/')}\n{identity}".encode()).hexdigest()[:20]
    return state_dir() / f"{kind}-{digest}.json"


@dataclass(frozen=True)
class KeptAlert:
    item: WakeItem
    since: datetime  # when the alert was raised: arrival time less the age the server gave it

    def shown(self, now: datetime) -> WakeItem:
        """The item as the Wake pane lists it, its age running on while it is kept."""
        return replace(self.item, age=_since(self.since, now))


_AGE_UNITS = {"d": 86400, "h": 3600, "m": 60}


def _age_seconds(age: str) -> int:
    """'1d 4h' -> 100800; anything unparseable counts as 0."""
    return sum(int(part[:-1]) * _AGE_UNITS[part[-1]] for part in age.split()
               if part[:-1].isdigit() and part[-1:] in _AGE_UNITS)


def _since(then: datetime, now: datetime) -> str:
    """The wake list's age style ('2h 15m', '1d', '0m'): two largest units, no seconds."""
    minutes = max(0, int((now - then).total_seconds())) // 60
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    units = [(days, "d"), (hours, "h"), (minutes, "m")]
    first = next((i for i, (n, _) in enumerate(units) if n), 2)
    return " ".join(f"{n}{unit}" for n, unit in units[first:first + 2] if n) or "0m"


class AlertStore:
    """Alerts in arrival order, keyed like wake items; `path` None keeps them in memory only."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self._alerts: dict[str, KeptAlert] = {}
        # a Buzz item is delivered once, so a dismissed key met again is an answer that was in flight (or one
        # shown again) from before the dismissal: it must not come back
        self._dismissed: set[str] = set()

    # --- what panes use -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._alerts)

    def alerts(self) -> list[KeptAlert]:
        return list(self._alerts.values())

    def absorb(self, wake: Wake, now: datetime) -> bool:
        """Keeps the one-shot items of a wake answer or pulse. True when something new was kept."""
        new = [item for item in self.without_dismissed(wake).items if item.ephemeral and item.key not in self._alerts]
        for item in new:
            self._alerts[item.key] = KeptAlert(item, now - timedelta(seconds=_age_seconds(item.age)))
        if new:
            self.save()
        return bool(new)

    def dismiss(self, key: str) -> bool:
        self._dismissed.add(key)
        if self._alerts.pop(key, None) is None:
            return False
        self.save()
        return True

    def without_dismissed(self, wake: Wake) -> Wake:
        """`wake` without the one-shot items the person dismissed (an answer shown again, or one in flight since
        before the dismissal, may still carry one)."""
        if not any(item.ephemeral and item.key in self._dismissed for item in wake.items):
            return wake
        return replace(wake, items=[i for i in wake.items if not (i.ephemeral and i.key in self._dismissed)])

    # --- persistence ----------------------------------------------------------------------

    def attach(self, path: Path) -> None:
        """Binds the store to its file once the identity is known: what was saved there joins what
        arrived meanwhile (earlier alerts first), and the union is written back."""
        self.path = path
        saved = _read(path)
        self._alerts = {**{a.item.key: a for a in saved}, **self._alerts}
        if len(saved) != len(self._alerts):
            self.save()

    def save(self) -> None:
        if self.path is None:
            return
        rows = [{"item": asdict(a.item), "since": a.since.isoformat()} for a in self._alerts.values()]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(rows, handle, ensure_ascii=False)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:  # a full disk must not take the app down; the alerts stay on screen
            log.warning("could not save alerts to %s: %s", self.path, exc)


class SeenMark:
    """The newest Buzz event the person has had in view: later ones are not yet seen (the Buzz tab counts
    them). Kept across restarts of coordtui, one file per server and identity; `path` None keeps it in memory."""

    def __init__(self, path: Path | None = None):
        self.path = path
        self.newest = 0

    def attach(self, path: Path) -> None:
        self.path = path
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            saved = 0
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable file %s: %s", path, exc)
            saved = 0
        self.newest = max(self.newest, saved if isinstance(saved, int) else 0)

    def advance(self, newest: int) -> None:
        if newest <= self.newest:
            return
        self.newest = newest
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(newest), encoding="utf-8")
        except OSError as exc:  # the count may come back after a restart; nothing else is lost
            log.warning("could not save %s: %s", self.path, exc)


def _read(path: Path) -> list[KeptAlert]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable alert file %s: %s", path, exc)
        return []
    kept = []
    for row in rows if isinstance(rows, list) else []:
        try:
            # server text kept on disk (by an older coordtui, raw): neutralised like everything the SDK decodes
            item = WakeItem(**{k: v for k, v in neutralise_json(row["item"]).items() if k in _ITEM_FIELDS})
            since = datetime.fromisoformat(row["since"])
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        if since.tzinfo is None:
            since = since.replace(tzinfo=timezone.utc)
        kept.append(KeptAlert(item, since))
    return kept
