"""The JSON provider of coord's Quart app: standard JSON only, written safe for a terminal."""
from __future__ import annotations

import json
from functools import cached_property

from quart.json.provider import DefaultJSONProvider

from . import jsonstrict


class StandardJSONProvider(DefaultJSONProvider):
    """Responses are standard JSON: a non-finite number raises instead of leaving as bare `NaN`."""
    sort_keys = False
    ensure_ascii = False

    def dumps(self, obj, **kwargs) -> str:
        kwargs.setdefault("allow_nan", False)
        return jsonstrict.escape_terminal_active(super().dumps(obj, **kwargs))

    @cached_property
    def _compact(self) -> json.JSONEncoder:
        return json.JSONEncoder(ensure_ascii=self.ensure_ascii, sort_keys=self.sort_keys, allow_nan=False,
                                separators=(",", ":"), default=self.default)

    def dumps_compact(self, obj) -> str:
        """`dumps(obj, separators=(",", ":"))`, as Quart's responses are written, with an encoder made once
        (json.dumps with options makes one per call: half the time of a send's answer)."""
        return jsonstrict.escape_terminal_active(self._compact.encode(obj))
