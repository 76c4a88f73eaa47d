"""keys.toml: the person's own keys, by binding id, in the config dir (COORD_CONFIG_DIR overrides).

    [keys]
    "inbox.compose" = "C"            # one key
    "app.pane.wake" = "1,f1"         # several, comma separated
    [options]
    open_marks_read = false          # opening a message no longer acknowledges it

Unknown ids and bad values are reported once as a toast, never fatal. Defaults avoid ctrl+b (tmux's prefix).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .config import config_dir

OPTIONS = {"open_marks_read": True}


@dataclass
class KeyConfig:
    keymap: dict[str, str] = field(default_factory=dict)
    options: dict[str, object] = field(default_factory=lambda: dict(OPTIONS))
    problems: list[str] = field(default_factory=list)
    path: Path | None = None


def keys_path() -> Path:
    return config_dir() / "keys.toml"


def load_keys(path: Path | None = None) -> KeyConfig:
    path = path or keys_path()
    config = KeyConfig(path=path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return config
    except (OSError, ValueError) as exc:
        config.problems.append(f"{path}: {exc}")
        return config
    keys = data.get("keys", {})
    if not isinstance(keys, dict):
        config.problems.append(f"{path}: [keys] must be a table")
        keys = {}
    for binding_id, value in keys.items():
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if not isinstance(value, str) or not value.strip():
            config.problems.append(f"{path}: keys.{binding_id} must be a key name or a list of them")
            continue
        config.keymap[str(binding_id)] = value.replace(" ", "")
    options = data.get("options", {})
    for name, value in (options.items() if isinstance(options, dict) else []):
        if name not in OPTIONS or type(value) is not type(OPTIONS[name]):
            config.problems.append(f"{path}: unknown or mistyped option {name!r}")
            continue
        config.options[name] = value
    return config


def unknown_ids(config: KeyConfig, known: set[str]) -> list[str]:
    return sorted(set(config.keymap) - known)
