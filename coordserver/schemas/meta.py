"""The API describing itself (API.md §13): the OpenAPI document's outline."""
from __future__ import annotations

from typing import Any

from .base import Model


class ApiInfo(Model):
    title: str
    version: str
    description: str


class ApiDocument(Model):
    """The OpenAPI 3.1 document of this API (its paths and components are OpenAPI's own shapes)."""
    openapi: str
    info: ApiInfo
    paths: dict[str, dict[str, Any]]
    components: dict[str, dict[str, Any]]
