"""This machine's time zone as an IANA name, the default for what the person schedules (project work hours)."""
from __future__ import annotations

import os
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

LOCALTIME = Path("/etc/localtime")


def _known(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _linked(path: Path) -> str:
    """/etc/localtime -> /usr/share/zoneinfo/Europe/Berlin gives 'Europe/Berlin'."""
    try:
        target = str(path.resolve())
    except OSError:
        return ""
    return target.split("/zoneinfo/", 1)[1] if "/zoneinfo/" in target else ""


def local_zone(localtime: Path = LOCALTIME) -> str:
    """$TZ when it names a zone, else what /etc/localtime links to, else UTC."""
    for name in (os.environ.get("TZ", "").lstrip(":"), _linked(localtime)):
        if name and _known(name):
            return name
    return "UTC"
