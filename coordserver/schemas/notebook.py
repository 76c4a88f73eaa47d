"""Notebook page request and response models (API.md §11)."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

from ..realtime.notebook.peer import MAX_PAGE_CHARS
from ..settings import MAX_BODY_BYTES
from ..domain.notebook import TITLE_MAX
from ..domain.notebook_versions import LABEL_MAX
from .base import NOT_BLANK, Model, Query
from .common import Identity, Limit, TextSearchQuery, Time, clamp_limit

# The live document's cap, and no more than a REST body can carry (API.md: 50,000 bytes, else 413).
Content = Annotated[str, msgspec.Meta(max_length=min(MAX_PAGE_CHARS, MAX_BODY_BYTES),
                                      description=f"the whole request body is at most {MAX_BODY_BYTES} bytes")]
PageTitle = Annotated[str, msgspec.Meta(pattern=NOT_BLANK, description=f"longer than {TITLE_MAX} characters is cut")]
TaggedUsers = Annotated[list[Identity], msgspec.Meta(max_length=100)]
Tags = Annotated[list[Annotated[str, msgspec.Meta(max_length=100)]], msgspec.Meta(max_length=100)]


class PagesQuery(TextSearchQuery):
    """GET /api/notebook."""


class CreatePage(Model):
    """POST /api/notebook. `title` is required (longer than 255 characters is cut)."""
    title: PageTitle
    content: Content | None = None
    tagged_users: TaggedUsers | None = None
    tags: Tags | None = None
    expires_at: Time | None = None
    review_at: Time | None = None


class UpdatePage(Model):
    """PATCH /api/notebook/{id}: only the fields present change; null clears expiresAt and reviewAt."""
    __messages__ = {"locked": "locked must be true or false", "archived": "archived must be true or false"}
    title: PageTitle | UnsetType = UNSET
    content: Content | None | UnsetType = UNSET
    tagged_users: TaggedUsers | None | UnsetType = UNSET
    tags: Tags | None | UnsetType = UNSET
    expires_at: Time | None | UnsetType = UNSET
    review_at: Time | None | UnsetType = UNSET
    locked: bool | UnsetType = UNSET
    archived: bool | UnsetType = UNSET


class PageSummary(Model):
    """A notebook page without its content, as the page list shows it."""
    id: str
    title: str
    created_by: str
    tagged_users: list[str] | None
    tags: list[str] | None
    expires_at: Time | None
    review_at: Time | None
    locked: bool
    locked_by: str | None
    created_at: Time
    updated_at: Time


class Page(PageSummary):
    """A notebook page with its content (the live text while someone edits it)."""
    content: str
    archived_at: Time | None


class PageAnswer(Model):
    """One page."""
    page: Page


class Pages(Model):
    """Visible, unarchived pages, most recently updated first."""
    pages: list[PageSummary]


class Viewers(Model):
    """Who is viewing a page: fresh heartbeats and editors."""
    viewers: list[str]


# --- page versions ---------------------------------------------------------------------------

VersionLabel = Annotated[str, msgspec.Meta(max_length=LABEL_MAX)]


class VersionsQuery(Query):
    """GET /api/notebook/{id}/versions: newest first, paged by offset."""
    limit: Limit = 50
    offset: Annotated[int, msgspec.Meta(ge=0, le=2**62)] = 0

    def __post_init__(self) -> None:
        self.limit = clamp_limit(self.limit)


class Checkpoint(Model):
    """POST /api/notebook/{id}/versions: a version of the page now, with an optional label."""
    label: VersionLabel | None = None


class VersionSummary(Model):
    """A stored version of a page's text. `reason`: created, time (the content changed and the newest
    version was old enough), idle (the last live editor left), checkpoint, before_restore, restore."""
    id: int
    page_id: str
    created_at: Time
    editors: list[str]  # the identities who edited since the previous version
    size: int  # characters
    label: str | None
    reason: str
    created_by: str | None  # who asked for it (checkpoint, restore, created)


class Version(VersionSummary):
    """A version with its text."""
    content: str


class Versions(Model):
    """A page's versions, newest first."""
    versions: list[VersionSummary]


class VersionAnswer(Model):
    """One version with its text."""
    version: Version


class CheckpointAnswer(Model):
    """The version just made."""
    version: VersionSummary


class RestoreAnswer(Model):
    """The restore's own version and the page with its text now."""
    version: VersionSummary
    page: Page
