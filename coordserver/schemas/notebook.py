"""Notebook page request and response models (API.md §11)."""
from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import UNSET, UnsetType

from ..realtime.notebook.peer import MAX_PAGE_CHARS
from ..settings import MAX_BODY_BYTES
from ..domain.notebook import TITLE_MAX
from .base import NOT_BLANK, Model
from .common import Identity, TextSearchQuery, Time

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
