"""Directory (links) request and response models (API.md §12)."""
from __future__ import annotations

from typing import Annotated

import msgspec

from ..domain.directory import DESCRIPTION_MAX, TITLE_MAX, URL_MAX, URL_RE
from .base import NOT_BLANK, Model
from .common import Identity, Success, TextSearchQuery, Time

_REQUIRED = "title and url are required"


class DirectoryQuery(TextSearchQuery):
    """GET /api/directory."""


class CreateLink(Model):
    """POST /api/directory. A title longer than its limit is cut; the url must be http(s)."""
    __messages__ = {"title": _REQUIRED, "url": _REQUIRED, "url:format": "url must be an http or https URL",
                    "url:length": f"url is longer than {URL_MAX} characters"}
    title: Annotated[str, msgspec.Meta(pattern=NOT_BLANK, description=f"longer than {TITLE_MAX} characters is cut")]
    url: Annotated[str, msgspec.Meta(max_length=URL_MAX, pattern=URL_RE.pattern, description="http or https")]
    description: Annotated[str, msgspec.Meta(max_length=DESCRIPTION_MAX)] | None = None
    tagged_users: Annotated[list[Identity], msgspec.Meta(max_length=100)] | None = None

    def __post_init__(self) -> None:
        self.title = self.title.strip()[:TITLE_MAX]


class DirectoryEntry(Model):
    """A directory link."""
    id: int
    title: str
    url: str
    description: str | None
    created_by: str
    created_by_is_agent: bool  # who is who: its creator is an agent
    tagged_users: list[str] | None
    created_at: Time


DirectoryEntries = list[DirectoryEntry]  # GET /api/directory answers a bare array (v1)


class EntryDeleted(Success):
    """A deleted entry's id."""
    id: int
