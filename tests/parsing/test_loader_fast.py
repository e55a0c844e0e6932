"""libyaml's parser takes the text it reads as PyYAML's pure-Python loader does, and only that text.

``parsing.loader`` parses eligible text (``_fast_eligible``) with libyaml first. These tests hold it to
the pure-Python loader: the same value, of the same types, or both refusing, on random text of the
eligible characters; and everything else (where the two were seen to differ) on the pure path."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from parsing import loader
from parsing.errors import DocumentInvalidError

pytestmark = pytest.mark.skipif(loader._FastLoader is None, reason="PyYAML built without libyaml")

LIMITS = loader.DocumentLimits(max_bytes=10**6, max_aliases=100, max_depth=64, max_nodes=200_000)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# Pieces of YAML: scalars the core schema resolves to every type, structure, quotes, comments, and
# characters outside the eligible set (so the generator also makes text the check must send away).
TOKENS = ["a", "b", "x1", "0", "1", "-1", "1.5", ".5", "1e3", "0x1f", "0o7", "017", "true", "False", "null", "~",
          "NaN", ".nan", ".inf", "-.Inf", " ", " ", "  ", "\n", "\n", "\n  ", "\n    ", ":", ": ", "- ", "-", ",",
          ", ", "[", "]", "{", "}", "'", '"', "''", '""', "#", " #c", "k: v", "- x", "{a: 1}", "[1, 2]", "a b", "é",
          "'it''s'", '"q\\"', "=", "+", ";", "(", ")", "$", "^", "\u00a0", "\t", ">", "|", "!", "&a", "*a", "?", "---",
          "..."]


def _pure(text: str) -> tuple[str, Any]:
    document = loader.DocumentLoader(text, LIMITS)
    try:
        return "ok", document.get_single_data()
    except (yaml.YAMLError, RecursionError):
        return "refused", None
    finally:
        document.dispose()


def _fast(text: str) -> tuple[str, Any]:
    try:
        return "ok", loader._fast_load(text)
    except yaml.YAMLError:
        return "refused", None


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down, keys in the same order (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return len(a) == len(b) and all(_same(ka, kb) and _same(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True))
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def test_on_eligible_text_libyaml_gives_what_the_pure_loader_gives():
    rng = random.Random(20261123)
    eligible = parsed = 0
    for _ in range(60_000):
        text = "".join(rng.choice(TOKENS) for _ in range(rng.randint(1, 25)))
        if not loader._fast_eligible(text):
            continue
        eligible += 1
        pure, fast = _pure(text), _fast(text)
        assert pure[0] == fast[0] and _same(pure[1], fast[1]), (text, pure, fast)
        parsed += pure[0] == "ok"
    # the generator reaches both outcomes often (the test would pass vacuously otherwise)
    assert eligible > 8_000 and 0.3 < parsed / eligible < 0.9


def test_the_examples_and_a_submission_parse_the_same_both_ways():
    from bench.pipeline import spec_text

    texts = [path.read_text() for path in sorted(EXAMPLES.glob("*.yaml"))] + [spec_text("w", 8, 3.0)]
    assert loader._fast_eligible(spec_text("w", 8, 3.0))
    for text in texts:
        if loader._fast_eligible(text):
            assert _same(_pure(text), _fast(text))


@pytest.mark.parametrize("text", ["!", "a: !x 1", "0\t", "a: >#\n b", "a: &x 1\nb: *x", "%YAML 1.2\n---\na: 1",
                                  "--- a", "a: b\n...", "a: 'é'", "k: \"\\t\"", "? a\n: b", "a: b\r\n"])
def test_text_where_the_two_differ_or_that_needs_the_limits_takes_the_pure_loader(text):
    assert not loader._fast_eligible(text)


def test_deep_nesting_takes_the_pure_loader_and_is_refused_as_before():
    deep = "- " * (loader.FAST_MAX_NESTING_MARKS + 1) + "a"
    assert not loader._fast_eligible(deep)
    with pytest.raises(loader.DocumentInvalidError):
        loader.load_document(deep, LIMITS)


def test_a_refused_document_is_reported_by_the_pure_loader():
    # given: eligible text libyaml refuses
    text = "a: [1, 2\nb: 3"
    assert loader._fast_eligible(text) and _fast(text)[0] == "refused"
    # then: the error is the pure loader's, with its line and column
    with pytest.raises(loader.DocumentInvalidError) as raised:
        loader.load_document(text, LIMITS)
    pure = loader.DocumentLoader(text, LIMITS)
    with pytest.raises(yaml.YAMLError) as expected:
        pure.get_single_data()
    [error] = raised.value.errors
    assert error.message == loader._yaml_message(expected.value) and error.message.endswith("at line 2, column 2")


def test_eligible_text_is_parsed_by_libyaml(monkeypatch):
    calls: list[str] = []
    real = loader._fast_load
    monkeypatch.setattr(loader, "_fast_load", lambda text: calls.append(text) or real(text))
    assert loader.load_document("a: [1, 2]\nb: {c: d}\n", LIMITS) == {"a": [1, 2], "b": {"c": "d"}}
    with pytest.raises(loader.DocumentInvalidError):
        loader.load_document("a: !x 1\n", LIMITS)  # a tag: the pure loader, which refuses it
    assert calls == ["a: [1, 2]\nb: {c: d}\n"]


def test_other_documents_still_refuse_a_repeated_key():
    # given: only the spec's loader keeps repeated keys (OSMO compatibility); inventories refuse them
    text = "a: 1\na: 2\n"

    # when
    with pytest.raises(DocumentInvalidError) as caught:
        loader.load_document(text, LIMITS)

    # then
    assert [error.message for error in caught.value.errors] == ["invalid YAML: duplicate key 'a' at line 2, column 1"]
