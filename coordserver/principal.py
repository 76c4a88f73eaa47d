"""Who a caller is, and how tokens are made and stored: plain data, usable without HTTP (domain, CLI, tests)."""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Principal:
    identity: str
    is_admin: bool
    token_id: int | None = None  # database tokens only
    source: str = "db"
    expires_at: datetime | None = None  # database tokens with an expiry: connections end then


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_hex(32)
