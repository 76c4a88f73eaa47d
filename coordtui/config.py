"""Where coordtui keeps things: saved connection profiles (a JSON file, mode 0600, in
platformdirs.user_config_dir("coord")), and the bundled server's data dir with the files in it that
`coordtui --serve` windows share (bundled.py, embedded.py)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs


LOCK_FILE = "serve.lock"  # in the data dir: held by the process that serves it (bundled.py)
TOKEN_FILE = "local-admin.token"  # in the data dir: the bundled server's local admin token (embedded.py)


def default_data_dir() -> Path:
    """The bundled server's data (its SQLite database, the lock, the local admin token) when --data names none."""
    return Path(platformdirs.user_data_dir("coord"))


@dataclass(frozen=True)
class Profile:
    name: str
    url: str
    token: str


def config_dir() -> Path:
    override = os.environ.get("COORD_CONFIG_DIR")
    return Path(override) if override else Path(platformdirs.user_config_dir("coord"))


def config_path() -> Path:
    return config_dir() / "profiles.json"


def _load() -> dict[str, Any]:
    path = config_path()
    if not path.exists():
        return {"default": None, "profiles": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        raise ConfigError(f"{path} is not a coord profile file")
    return data


class ConfigError(Exception):
    pass


def load_profile(name: str | None = None) -> Profile | None:
    """The named profile, else the default one; None when nothing is saved. Unknown name: ConfigError."""
    data = _load()
    name = name or data.get("default")
    if not name:
        return None
    row = data["profiles"].get(name)
    if not isinstance(row, dict) or not row.get("url") or not row.get("token"):
        raise ConfigError(f"no saved profile named {name!r} (in {config_path()})")
    return Profile(name, str(row["url"]), str(row["token"]))


def save_profile(profile: Profile, make_default: bool = True) -> Path:
    data = _load()
    data["profiles"][profile.name] = {"url": profile.url, "token": profile.token}
    if make_default or not data.get("default"):
        data["default"] = profile.name
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
    os.replace(tmp, path)
    os.chmod(path, 0o600)
    return path
