"""The one request-parsing convention: msgspec Structs, decoded from jsonstrict-parsed bodies or query strings.

A model names its fields in snake_case and reads them camelCase on the wire (`reply_to_message_id` <-
`replyToMessageId`). `Model.kwargs()` gives the keyword arguments the domain functions take. Failures become
Invalid (a 400 `{"error": ...}`) naming the wire field and why; a model may override a field's message in
`__messages__` (`"<field>:format"` / `"<field>:length"` for one way a field fails). Every limit the server
enforces on a field is stated here, from the domain's own constants, so /api/openapi.json says what the
server takes; the domain still checks its rules (and what no schema can know: whether an identity exists).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Mapping, TypeVar, cast, overload

import msgspec

from .. import jsonstrict
from ..domain.fields import WS, WS_CHARS
from ..errors import Invalid, UnsupportedMediaType

INT_MAX = 2**31 - 1  # what every integer column holds (PostgreSQL `integer` is 32-bit)
QUERY_INT_MAX = 2**62  # offsets and ids compared in queries: within 64 bits on both backends

Int32 = Annotated[int, msgspec.Meta(ge=-INT_MAX, le=INT_MAX)]
PositiveInt32 = Annotated[int, msgspec.Meta(ge=1, le=INT_MAX)]
RowId = Annotated[int, msgspec.Meta(ge=1, le=QUERY_INT_MAX)]

M = TypeVar("M", bound="Model")

# Text holds no NUL (jsonstrict refuses it anywhere in a body, the Gate in a path or query) and, where required, a
# character other than white space: what `.strip()` keeps (Python's and the schema's `\s` agree).
NO_NUL = "^[^\\x00]*$"
NOT_BLANK = f"^[^\\x00]*[^{WS_CHARS}\\x00][^\\x00]*$"


# A shared type's pattern (a part msgspec's message quotes verbatim) -> the rule it states in words (common.py registers the identity's), so every field of
# that type explains a refusal the same way instead of "has an invalid format".
PATTERN_RULES: dict[str, str] = {}


def trimmed(pattern: str) -> str:
    """A pattern for a value the domain strips first (`^core$` -> `^\\s*core\\s*$`): what the server accepts as sent."""
    assert pattern.startswith("^") and pattern.endswith("$"), pattern
    return f"^{WS}*(?:" + pattern[1:-1] + f"){WS}*$"


def text(max_length: int | None = None, description: str | None = None, blank: bool = False) -> msgspec.Meta:
    """`Annotated[str, text(...)]`: a text field whose limits the schema states and the decoder enforces: not
    blank unless `blank` (missing, null or blank answer `<field> is required`), at most `max_length` characters
    as sent. (A None is no constraint: msgspec.Meta's own default.)"""
    return msgspec.Meta(pattern=None if blank else NOT_BLANK, max_length=max_length, description=description)



class Model(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base of every request and response model."""
    __messages__: ClassVar[dict[str, str]] = {}
    __schema_extra__: ClassVar[dict[str, Any]] = {}  # JSON Schema the fields cannot say; the model enforces it
    __field_schemas__: ClassVar[dict[str, Any]] = {}  # a wire field's schema where its msgspec type cannot carry it

    def kwargs(self) -> dict[str, Any]:
        """The fields as keyword arguments for the domain function (snake_case names)."""
        return {name: getattr(self, name) for name in self.__struct_fields__}

    def changes(self) -> dict[str, Any]:
        """For a PATCH model (fields default to msgspec.UNSET): the fields the body held, by wire name."""
        return {field.encode_name: getattr(self, field.name) for field in msgspec.structs.fields(self)
                if getattr(self, field.name) is not msgspec.UNSET}


def at_least_one(model: type[M]) -> type[M]:
    """A PATCH model that must hold at least one of its fields (the domain answers `No fields to update`)."""
    model.__schema_extra__ = {"anyOf": [{"required": [f.encode_name]} for f in msgspec.structs.fields(model)]}
    return model


def snake_case(model: type[M], name: str, doc: str) -> type[Model]:
    """The same fields named in snake_case on the wire: the v1 rows a few endpoints keep (API.md §1)."""
    fields = [(f.name, f.type) if f.default is msgspec.NODEFAULT else (f.name, f.type, f.default)
              for f in msgspec.structs.fields(model)]
    copy = cast(type[Model], msgspec.defstruct(name, fields, bases=(Model,), rename=None, module=model.__module__))
    copy.__doc__ = doc
    return copy


class Query(Model):
    """A query-string model: values arrive as text and are converted (`limit=5` -> 5); an empty value is absent."""


@overload
def cut(value: str, limit: int) -> str: ...
@overload
def cut(value: None, limit: int) -> None: ...
@overload
def cut(value: str | None, limit: int) -> str | None: ...
def cut(value: str | None, limit: int) -> str | None:
    """Text longer than `limit` is cut to it, not refused (message title and body, by design)."""
    return value[:limit] if value is not None and len(value) > limit else value


NOT_BLANK_TEXT = "matching regex '" + NOT_BLANK.replace("\\", "\\\\") + "'"  # how msgspec words a blank one
_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_HEAD = re.compile(r"^\.([A-Za-z0-9_]+)((?:\[\d+\])*)")
_BOUND = re.compile(r"Expected `(?P<kind>int|str|array|object)[^`]*`(?: of length)? (?P<op>>=|<=) (?P<n>-?\d+)")
_KINDS = (("`str", "must be a string"), ("`bool", "must be true or false"), ("`int", "must be an integer"),
          ("`array", "must be an array"), ("`object", "must be an object"), ("`float", "must be a number"))


def error_text(model: type[Model], error: msgspec.ValidationError, data: Any = None) -> str:
    """msgspec's message as ours: `Expected `str | null`, got `int` - at `$.title`` -> `title must be a string`."""
    found = _AT.match(str(error))
    assert found is not None  # every text matches (its `at` part is optional)
    what, path = found["what"], found["path"] or ""
    unknown = re.match(r"Object contains unknown field `(.*)`$", what, re.S)
    if unknown and not path:  # a model that refuses what it does not know (forbid_unknown_fields)
        return f"{unknown[1]} is not a field of this request"
    missing = re.match(r"Object missing required field `(\w+)`", what)
    head = _HEAD.match(path)
    field = head[1] if head else (missing[1] if missing else None)
    if field is None:
        return what  # raised by a model's own check, already in our words
    bound = _BOUND.search(what)
    blank = head and not head[2] and isinstance(data, dict) and isinstance(data.get(head[1]), str) \
        and not data[head[1]].strip()
    if blank and "matching regex" in what:  # blank where a pattern asks for more: as missing
        what = NOT_BLANK_TEXT
    reason = "format" if "matching regex" in what and NOT_BLANK_TEXT not in what else "length" if bound else None
    if reason and f"{field}:{reason}" in model.__messages__:
        return model.__messages__[f"{field}:{reason}"]  # a model's words for one way a field fails
    if reason == "format":
        rule = next((rule for pattern, rule in PATTERN_RULES.items() if pattern in what), None)
        if rule is not None:
            return f"{field}: {rule}"  # a shared type's words, wherever it is used
    if field in model.__messages__ and not (bound and bound["kind"] == "array" and path == f".{field}"):
        return model.__messages__[field]
    if missing and not head:
        return f"{field} is required"
    assert head is not None  # the field came from the path (without one it came from `missing`: answered above)
    if not head[2] and (NOT_BLANK_TEXT in what
                        or re.match(r"Expected `str[^`]*`, got `null`", what)):
        return f"{field} is required"  # blank or null where text is required
    field += head[2] if head else ""  # an array entry: `taggedUsers[2] must be a string`
    if bound:
        kind, op, n = bound["kind"], bound["op"], int(bound["n"])
        if kind == "str" and "matching regex" not in what:
            if op == "<=":
                return f"{field} is longer than {n} characters"
            return f"{field} is required" if n == 1 else f"{field} must be at least {n} characters"
        if kind == "array":
            return f"{field} may hold at most {n} entries" if op == "<=" else f"{field} must not be empty"
        if abs(n) in (INT_MAX, QUERY_INT_MAX):
            return f"{field} is out of range"
        return f"{field} must be {'at least' if op == '>=' else 'at most'} {n}"
    if "matching regex" in what:
        return f"{field} has an invalid format"
    if what.startswith("Invalid enum value"):
        return f"{field} has an unknown value"
    for kind, text in _KINDS:
        if what.startswith(f"Expected {kind}"):
            return f"{field} {text}"
    return f"{field}: {what}"


def convert(model: type[M], data: Any, strict: bool = True) -> M:
    try:
        return msgspec.convert(data, model, strict=strict)
    except msgspec.ValidationError as error:
        raise Invalid(error_text(model, error, data)) from None


def from_body(model: type[M], raw: bytes, required: bool = True, content_type: str | bytes | None = None) -> M:
    """A raw request body through jsonstrict (hostile JSON gets its own clear 400), then the model.
    A body sent with a Content-Type other than JSON is refused first (require_json)."""
    require_json(content_type, raw)
    return convert(model, _integral(decode_object(raw, required)))


def _integral(value: Any) -> Any:
    """JSON has one number type: `3.0` is the integer 3 (as JSON Schema says), so an integer field takes it."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**63:
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


# What a browser may send cross-origin without asking first (a CORS "simple request"): never JSON here.
NOT_JSON_MESSAGE = "Content-Type must be application/json"


def require_json(content_type: str | bytes | None, raw: bytes) -> None:
    """A JSON route reads only JSON: a body labelled as anything else (text/plain, a form, ...) is 415,
    so no HTML form or cross-origin simple request can reach it. No body, or no Content-Type (scripts
    that send raw bytes), is left to the JSON parse."""
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    if not content_type or not raw:
        return
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise UnsupportedMediaType(NOT_JSON_MESSAGE)


def decode_object(raw: bytes, required: bool = True) -> dict:
    if not raw or not raw.strip():
        if required:
            raise Invalid("Request body must be a JSON object")
        return {}
    try:
        body = jsonstrict.loads(raw)
    except jsonstrict.JSONRejected as error:
        raise Invalid(str(error)) from None
    if not isinstance(body, dict):
        raise Invalid("Request body must be a JSON object")
    return body


def from_query(model: type[M], args: Mapping[str, str]) -> M:
    """Query values are text: converted loosely (`5` -> 5). An empty value of a text parameter counts as
    absent (v1 clients send `channelId=`); of any other type it is refused, as is a parameter given twice:
    the schema declares each parameter once, with its type."""
    names, texts = wire_names(model), text_names(model)
    data = {}
    for key in names.intersection(args):
        values = args.getlist(key) if hasattr(args, "getlist") else [args[key]]
        if len(values) > 1:
            raise Invalid(f"{key} must be given once")
        if key not in texts:  # lax conversion reads "null" as absent: refused as the empty value is
            data[key] = "" if values[0] == "null" else values[0]
        elif values[0] != "":
            data[key] = values[0]
    return convert(model, data, strict=False)


@lru_cache(maxsize=None)
def text_names(model: type[Model]) -> frozenset[str]:
    """The wire names of a query model's text parameters (an empty value of one is absent)."""
    (ref,), components = msgspec.json.schema_components([model])
    properties = components[model.__name__]["properties"]
    return frozenset(name for name, prop in properties.items()
                     if "string" in {prop.get("type"), *(option.get("type") for option in prop.get("anyOf", ()))})


@lru_cache(maxsize=None)
def wire_names(model: type[Model]) -> frozenset[str]:
    return frozenset(field.encode_name for field in msgspec.structs.fields(model))
