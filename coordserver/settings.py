"""Configuration: one frozen dataclass read from the environment."""
from __future__ import annotations

import getpass
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NoReturn, TypeVar

import platformdirs

IDENTITY_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
MAX_BODY_BYTES = 50_000
MAX_WEBSOCKET_FRAME_BYTES = 1024 * 1024


@dataclass(frozen=True)
class EnvToken:
    identity: str
    is_admin: bool
    source: str  # the variable it came from; never the token itself


def default_database_url() -> str:
    data_dir = Path(platformdirs.user_data_dir("coord"))
    return f"sqlite:///{data_dir / 'coord.db'}"


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() not in {"0", "off", "false", "no"}


N = TypeVar("N", int, float)


def _positive(value: str | None, name: str, default: N, parse: Callable[[str], N], what: str) -> N:
    if value is None or not value.strip():
        return default
    try:
        number = parse(value)
    except ValueError:
        return _refuse(name, what, value)
    if not 0 < number < float("inf"):  # NaN too
        return _refuse(name, what, value)
    return number


def _refuse(name: str, what: str, value: str) -> NoReturn:
    raise ValueError(f"{name} must be {what}, not {value!r}")


def _positive_seconds(value: str | None, name: str, default: float) -> float:
    return _positive(value, name, default, float, "a positive number of seconds")


def _positive_int(value: str | None, name: str, default: int) -> int:
    return _positive(value, name, default, int, "a positive integer")


def metrics_dir(env=os.environ) -> str | None:
    """COORD_METRICS_DIR: the shared directory of prometheus-client's multi-process mode (several server
    processes on one host, set by `serve --workers`). Read by coordserver.metrics before any metric
    value exists, not through Settings: the mode is per process, chosen once."""
    return (env.get("COORD_METRICS_DIR") or "").strip() or None


def parse_env_tokens(env: dict[str, str]) -> dict[str, EnvToken]:
    """Environment tokens in the documented order; an earlier source wins for the same token."""
    tokens: dict[str, EnvToken] = {}

    def add(token: str | None, identity: str | None, is_admin: bool, source: str) -> None:
        if not token or not identity:
            return
        identity = identity.strip().lower()
        if not IDENTITY_RE.match(identity) or len(identity) > 50:
            return
        tokens.setdefault(token.strip(), EnvToken(identity, is_admin, source))

    for prefix in ("SERVICE_TOKEN_", "MAILBOX_TOKEN_"):
        for key in sorted(env):
            if key.startswith(prefix) and not key.endswith("_ADMIN") and len(key) > len(prefix):
                add(env[key], key[len(prefix):], False, key)

    multi = "SERVICE_TOKENS" if env.get("SERVICE_TOKENS") else "MAILBOX_TOKENS"
    for token, identity in _json_object(env.get(multi)).items():
        if isinstance(identity, str):
            add(token, identity, False, multi)

    for key, spec in _json_object(env.get("UI_MAILBOX_KEYS")).items():
        if isinstance(spec, dict) and isinstance(spec.get("sender"), str):
            add(key, spec["sender"], spec.get("admin") is True, "UI_MAILBOX_KEYS")

    if not tokens:
        single = "SERVICE_TOKEN" if env.get("SERVICE_TOKEN") else "MAILBOX_TOKEN"
        user = env.get("USER") or _login_name()
        add(env.get(single), user, False, single)

    for key in ("SERVICE_ADMIN_TOKEN", "MAILBOX_ADMIN_TOKEN"):
        add(env.get(key), "admin", True, key)
    superuser = parse_superuser(env)
    if superuser:
        add(env.get("SUPERUSER_TOKEN"), superuser[0], True, "SUPERUSER_TOKEN")
    return tokens


def parse_superuser(env: dict[str, str]) -> tuple[str, str, bool] | None:
    """SUPERUSER_TOKEN + SUPERUSER_NAME (lowercased, default `admin`) + SUPERUSER_DISPLAY_NAME (default:
    the name title-cased): (identity, display name, whether the display name was given) of the v1.1
    environment superuser, or None."""
    if not (env.get("SUPERUSER_TOKEN") or "").strip():
        return None
    name = (env.get("SUPERUSER_NAME") or "admin").strip().lower()
    if not IDENTITY_RE.match(name) or len(name) > 50:
        raise ValueError(f"SUPERUSER_NAME must be an identity matching {IDENTITY_RE.pattern}, not {name!r}")
    given = (env.get("SUPERUSER_DISPLAY_NAME") or "").strip()[:100]
    return name, given or name.title(), bool(given)


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "user"


def _json_object(raw: str | None) -> dict:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def parse_identity_list(value: str | None, name: str) -> frozenset[str]:
    """A comma-separated list of identities (COORD_AGENTS), lowered; a name that is no identity is an error."""
    names = frozenset(part.strip().lower() for part in (value or "").split(",") if part.strip())
    for identity in names:
        if not IDENTITY_RE.match(identity) or len(identity) > 50:
            raise ValueError(f"{name} must list identities matching {IDENTITY_RE.pattern}, not {identity!r}")
    return names


def parse_webhook_overrides(env: dict[str, str]) -> dict[str, tuple[str, str]]:
    """WEBHOOK_<IDENTITY>_URL + WEBHOOK_<IDENTITY>_TOKEN, both set, override an identity's webhook."""
    overrides = {}
    for key, url in env.items():
        match = re.fullmatch(r"WEBHOOK_(.+)_URL", key)
        if match and url:
            token = env.get(f"WEBHOOK_{match.group(1)}_TOKEN")
            if token:
                overrides[match.group(1).lower()] = (url, token)
    return overrides


@dataclass(frozen=True)
class Settings:
    database_url: str = field(default_factory=default_database_url)
    base_url: str = "http://127.0.0.1:8420"
    env_tokens: dict[str, EnvToken] = field(default_factory=dict)
    superuser: tuple[str, str, bool] | None = None  # from SUPERUSER_*, see parse_superuser
    webhook_overrides: dict[str, tuple[str, str]] = field(default_factory=dict)
    webhook_allowed_hosts: frozenset[str] = frozenset()
    rate_limits: bool = True
    rate_limit_overrides: dict[str, int] = field(default_factory=dict)
    ingest_per_webhook: int = 60  # per 60 s window; like every rate limit, off with rate_limits
    flap_resolutions: int = 3  # an alert resolved by its source more often than this within the window flaps
    flap_window_minutes: int = 30
    trusted_proxy: bool = False
    hot_paths: bool = True  # send, inbox, wake, ingest, health straight from ASGI (hotpaths.py); off = all Quart
    uvloop: bool = True  # `coordserver serve` runs on uvloop's event loop where it is installed (server.py)
    httptools: bool = True  # HTTP/1.1 parsed by httptools (http1.py); off = Hypercorn's own, on h11
    pg_prepare: bool = True  # fixed SQL as server-side prepared statements; off behind a transaction-mode pooler
    pg_writers: int = 1  # PostgreSQL writer threads per process (db.Store); 1 batches every write, as on SQLite
    event_retention_days: float = 7.0
    # doctor warns when the SQLite database's filesystem has less free space than this (or under 5 %)
    disk_free_warn_mb: int = 1024
    sse_heartbeat_seconds: float = 30.0
    sse_max_streams_per_identity: int = 20  # one more closes that identity's oldest stream
    scheduler_interval_seconds: float = 60.0
    alert_fold_seconds: float = 1.0  # a batch's alert tallies fold into their alerts this long after (scheduler.py)
    push_enabled: bool = True
    log_level: str = "info"
    notebook_save_seconds: float = 5.0     # debounce of CRDT saves
    notebook_unload_seconds: float = 10.0  # an idle page's document is dropped this long after its last save
    # Rooms re-announce their viewers to other processes this often; an announcement three intervals
    # old is dropped, so the viewers of a process that died without saying goodbye disappear.
    notebook_viewers_refresh_seconds: float = 20.0
    # Page versions: one when the content changed and this long has passed since the newest version
    notebook_version_seconds: float = 300.0
    notebook_version_check_seconds: float = 30.0  # how often a process looks for pages due a timed version
    notebook_version_retention_days: float = 90.0  # older versions are pruned (a page's newest stays)
    # y-protocols: an editor's awareness (cursor) not renewed within this long is dropped
    notebook_awareness_timeout_seconds: float = 30.0
    metrics_enabled: bool = True  # GET /api/metrics; COORD_METRICS=off answers 404
    metrics_token: str | None = field(default=None, repr=False)  # COORD_METRICS_TOKEN: the scraper's bearer secret; unset = no auth
    # Who is who (issue 28): every identity is a human unless declared an agent. COORD_AGENTS names the
    # environment identities that are agents (their users row says so from every start on).
    env_agents: frozenset[str] = frozenset()
    # Loop guard (domain/guards.py): more than loop_messages mailbox or chat messages among agents only
    # within loop_minutes trips it; it holds their wake pulses and pushes to one for loop_cooldown_minutes.
    loop_messages: int = 40
    loop_minutes: int = 2
    loop_cooldown_minutes: int = 15
    chat_wake_cooldown_minutes: int = 5  # a group channel wakes each agent member at most once per this long

    def admin_rows(self) -> dict[str, tuple[str, str | None]]:
        """Identities that get an admin users row at start: (display name of a new row, display name to
        apply at every start or None)."""
        rows: dict[str, tuple[str, str | None]] = {t.identity: (t.identity, None)
                                                   for t in self.env_tokens.values() if t.is_admin}
        if self.superuser:
            identity, display, given = self.superuser
            rows[identity] = (display, display if given else None)
        return rows

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides: Any) -> "Settings":
        env = dict(os.environ if env is None else env)
        values: dict[str, Any] = dict(
            database_url=env.get("COORD_DATABASE_URL") or default_database_url(),
            base_url=(env.get("COORD_BASE_URL") or "http://127.0.0.1:8420").rstrip("/"),
            env_tokens=parse_env_tokens(env),
            superuser=parse_superuser(env),
            webhook_overrides=parse_webhook_overrides(env),
            webhook_allowed_hosts=frozenset(
                h.strip().lower() for h in env.get("SERVICE_WEBHOOK_ALLOWED_HOSTS", "").split(",") if h.strip()
            ),
            rate_limits=_flag(env.get("COORD_RATE_LIMITS"), True),
            rate_limit_overrides={
                k: int(v) for k, v in _json_object(env.get("COORD_RATE_LIMIT_OVERRIDES")).items()
                if isinstance(v, int)
            },
            ingest_per_webhook=_positive_int(env.get("COORD_INGEST_PER_WEBHOOK"), "COORD_INGEST_PER_WEBHOOK", 60),
            flap_resolutions=_positive_int(env.get("COORD_FLAP_RESOLUTIONS"), "COORD_FLAP_RESOLUTIONS", 3),
            flap_window_minutes=_positive_int(env.get("COORD_FLAP_WINDOW_MINUTES"), "COORD_FLAP_WINDOW_MINUTES", 30),
            trusted_proxy=_flag(env.get("COORD_TRUSTED_PROXY"), False),
            hot_paths=_flag(env.get("COORD_HOT_PATHS"), True),
            uvloop=_flag(env.get("COORD_UVLOOP"), True),
            httptools=_flag(env.get("COORD_HTTPTOOLS"), True),
            pg_prepare=_flag(env.get("COORD_PG_PREPARE"), True),
            pg_writers=_positive_int(env.get("COORD_PG_WRITERS"), "COORD_PG_WRITERS", 1),
            event_retention_days=float(env.get("COORD_EVENT_RETENTION_DAYS") or 7),
            sse_heartbeat_seconds=_positive_seconds(env.get("COORD_SSE_HEARTBEAT_SECONDS"),
                                                    "COORD_SSE_HEARTBEAT_SECONDS", 30.0),
            disk_free_warn_mb=_positive_int(env.get("COORD_DISK_FREE_WARN_MB"), "COORD_DISK_FREE_WARN_MB", 1024),
            sse_max_streams_per_identity=max(1, int(env.get("COORD_SSE_MAX_STREAMS_PER_IDENTITY") or 20)),
            log_level=env.get("COORD_LOG_LEVEL", "info"),
            notebook_save_seconds=float(env.get("COORD_NOTEBOOK_SAVE_SECONDS") or 5),
            notebook_unload_seconds=float(env.get("COORD_NOTEBOOK_UNLOAD_SECONDS") or 10),
            notebook_viewers_refresh_seconds=float(env.get("COORD_NOTEBOOK_VIEWERS_REFRESH_SECONDS") or 20),
            notebook_version_seconds=float(env.get("COORD_NOTEBOOK_VERSION_SECONDS") or 300),
            notebook_version_retention_days=float(env.get("COORD_NOTEBOOK_VERSION_RETENTION_DAYS") or 90),
            notebook_awareness_timeout_seconds=float(env.get("COORD_NOTEBOOK_AWARENESS_TIMEOUT_SECONDS") or 30),
            metrics_enabled=_flag(env.get("COORD_METRICS"), True),
            metrics_token=(env.get("COORD_METRICS_TOKEN") or "").strip() or None,
            env_agents=parse_identity_list(env.get("COORD_AGENTS"), "COORD_AGENTS"),
            loop_messages=_positive_int(env.get("COORD_LOOP_MESSAGES"), "COORD_LOOP_MESSAGES", 40),
            loop_minutes=_positive_int(env.get("COORD_LOOP_MINUTES"), "COORD_LOOP_MINUTES", 2),
            loop_cooldown_minutes=_positive_int(env.get("COORD_LOOP_COOLDOWN_MINUTES"), "COORD_LOOP_COOLDOWN_MINUTES",
                                                15),
            chat_wake_cooldown_minutes=_positive_int(env.get("COORD_CHAT_WAKE_COOLDOWN_MINUTES"),
                                                     "COORD_CHAT_WAKE_COOLDOWN_MINUTES", 5),
        )
        values.update(overrides)
        return cls(**values)
