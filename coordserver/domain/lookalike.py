"""Display names that cannot impersonate (issue 28): the key two names are compared by, and the rule.

`name_key` folds a name to what a reader sees: NFKC (fullwidth and compatibility forms), casefold,
accents dropped (NFKD, combining marks removed), every space, separator, punctuation, control and
format character removed (zero-width spaces and joiners included), and the common Latin/Cyrillic/Greek
look-alikes mapped to one Latin letter (UTS #39's confusables, cut down to the letters a name is
written with). Two names with one key are one name to a reader.

The table is ours, not a dependency: PyPI's `confusable_homoglyphs` is not among coord's dependencies
and answers a different question (is this string mixed-script or confusable at all?), while we need a
stable skeleton to compare two names; the few dozen letters below are the ones that matter in names.
"""
from __future__ import annotations

import unicodedata

from .. import db
from ..errors import Conflict
from ..models import Token, User

# Cyrillic and Greek letters (lower case: keys are casefolded first) and a few digits and symbols that
# read as Latin letters.
_LOOKALIKES = {
    # Cyrillic
    "а": "a", "в": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j",
    "к": "k", "ӏ": "l", "м": "m", "н": "h", "о": "o", "р": "p", "ԛ": "q", "ѕ": "s", "т": "t", "у": "y",
    "ү": "y", "х": "x", "ԝ": "w", "ь": "b", "ɡ": "g", "п": "n", "г": "r",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "γ": "y", "ϲ": "c", "ω": "w", "μ": "u",
    # Latin variants, digits and symbols
    "ı": "i", "ȷ": "j", "ł": "l", "ø": "o", "ß": "ss", "0": "o", "1": "l", "|": "l", "!": "l", "$": "s",
    "5": "s", "@": "a",
}
_DROPPED_CATEGORIES = ("M", "Z", "C", "P")  # marks, separators, controls/format, punctuation


def name_key(name: str) -> str:
    """The skeleton a name is compared by (see the module doc)."""
    text = unicodedata.normalize("NFKC", name).casefold()
    kept = []
    for char in unicodedata.normalize("NFKD", text):
        if char in _LOOKALIKES:
            kept.append(_LOOKALIKES[char])
        elif not unicodedata.category(char).startswith(_DROPPED_CATEGORIES):
            kept.append(char)
    return "".join(kept)


def require_own_name(identity: str, display_name: str, env_identities: frozenset[str]) -> None:
    """Conflict (409) when `display_name` reads as another identity's id or display name: every
    users row (archived ones too), token identity and environment identity other than `identity`."""
    key = name_key(display_name)
    if not key:
        return
    taken: dict[str, str] = {}
    for other, other_display in db.tuples(User.select(User.id, User.display_name).where(User.id != identity)):
        taken.setdefault(name_key(other), other)
        taken.setdefault(name_key(other_display or ""), other)
    for other in {t.identity for t in Token.select(Token.identity).where(Token.identity != identity).distinct()} \
            | (set(env_identities) - {identity}):
        taken.setdefault(name_key(other), other)
    holder = taken.get(key)
    if holder is not None:
        raise Conflict(f"displayName '{display_name}' reads as the name of identity '{holder}': choose another")
