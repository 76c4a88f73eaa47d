"""The overlap test of reservation resources (domain/resource_globs.py): the documented cases, normalisation, and
property checks over random patterns: every witness matches both patterns (checked with an independent regular
expression), every random path matching both comes with an overlap verdict, and the verdict is symmetric."""
from __future__ import annotations

import random

import pytest

from coordserver.domain import resource_globs
from coordserver.domain.resource_globs import matches, normalise, overlaps, witness
from coordserver.errors import Invalid


@pytest.fixture(autouse=True)
def computed_afresh():
    """Each test computes its own verdicts: the overlap test memoises (lru_cache), and a process that ran other
    tests first (a mutation run forks every mutant's tests from one that did) would otherwise answer from memory."""
    resource_globs._path_witness.cache_clear()
    resource_globs.segment_witness.cache_clear()

CASES = [
    ("src/**", "src/app.py", True),
    ("src/**", "src", True),  # `**` matches no segment too
    ("src/**", "srcx/a", False),
    ("src/*.py", "src/a.py", True),
    ("src/*.py", "src/a/b.py", False),  # `*` stays within a segment
    ("src/*.py", "src/*.js", False),
    ("src/*.py", "src/a*", True),  # src/a.py
    ("src/**", "**/app.py", True),
    ("**/test_*.py", "src/**/test_a?.py", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/*/b", "a/b", False),
    ("*", "*x", True),
    ("x*", "*y", True),  # xy
    ("a?c", "ab", False),
    ("a?c", "*c", True),
    ("a*b*c", "*c*a*", True),  # abcac
    ("service:postgres-main", "service:postgres-main", True),
    ("service:postgres-main", "service:postgres-replica", False),
    ("service:*", "service:postgres-main", True),
    ("**", "anything/at/all", True),
    ("src/a.py", "src/b.py", False),
    ("docs/**/*.md", "docs/x.txt", False),
    ("docs/**/*.md", "docs/**/index.*", True),
]


@pytest.mark.parametrize("a,b,expected", CASES)
def test_documented_cases(a, b, expected):
    assert overlaps(a, b) is expected and overlaps(b, a) is expected
    found = witness(a, b)
    if expected:
        assert found is not None and matches(a, found) and matches(b, found), found


def test_normalise():
    assert normalise("./src/") == "src/**"
    assert normalise("  src//app.py ") == "src/app.py"
    assert normalise("/") == "**"
    assert normalise("src/**/") == "src/**"
    assert normalise("service:db") == "service:db"
    assert normalise("x" * 500) == "x" * 500
    assert normalise(" " + "x" * 498 + " ") == "x" * 498
    for bad in ("", "   ", None, 3):
        with pytest.raises(Invalid) as refused:
            normalise(bad)
        assert refused.value.message == "resource is required"
    with pytest.raises(Invalid) as refused:
        normalise("x" * 501)
    assert refused.value.message == "resource is longer than 500 characters"


def test_long_names_do_not_exhaust_the_stack():
    a, b = "x" * 250 + "*", "*" + "x" * 249
    assert witness(a, b) is not None
    deep = "/".join(["*"] * 200)
    assert overlaps(deep, "/".join(["a"] * 200)) and not overlaps(deep, "/".join(["a"] * 199))


ALPHABET = "ab"


def _segment(rng: random.Random) -> str:
    return "".join(rng.choice("ab*?") for _ in range(rng.randint(1, 3)))


def _pattern(rng: random.Random) -> str:
    return "/".join("**" if rng.random() < 0.2 else _segment(rng) for _ in range(rng.randint(1, 3)))


def _path(rng: random.Random) -> str:
    return "/".join("".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 4)))


def test_random_patterns_witnesses_and_paths():
    """Soundness and completeness by sampling: a witness matches both; a path matching both means an overlap."""
    rng = random.Random(28)
    paths = [_path(rng) for _ in range(400)]
    for _ in range(600):
        a, b = _pattern(rng), _pattern(rng)
        found = witness(a, b)
        assert (found is None) == (witness(b, a) is None), (a, b)
        if found is not None:
            assert matches(a, found) and matches(b, found), (a, b, found)
        for path in paths:
            if matches(a, path) and matches(b, path):
                assert found is not None, (a, b, path)
                break
