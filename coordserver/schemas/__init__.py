"""Request and response models, one module per area. Importable without Quart (the hot path and MCP tools use
them too): decode with `from_body` / `from_query`, hand `model.kwargs()` to the domain."""
from .base import Model, Query, convert, from_body, from_query  # noqa: F401
