"""The generic document loader: what its messages say, and the bound on values standing behind aliases."""

from __future__ import annotations

import pytest

from parsing import DocumentInvalidError, DocumentLimits, PathError, join_path, load_document
from parsing import loader as document_loader

LIMITS = DocumentLimits(max_bytes=10_000, max_aliases=100, max_depth=64, max_nodes=1000)
SHARED = "a: &a {x: 1, y: 2}\nb: &b [*a, *a]\nc: [*b, *b]\n"


def errors_of(source: object, limits: DocumentLimits = LIMITS, **kwargs: str) -> list[tuple[str, str]]:
    with pytest.raises(DocumentInvalidError) as caught:
        load_document(source, limits, **kwargs)
    return [(error.path, error.message) for error in caught.value.errors]


def bomb(levels: int) -> str:
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 10)}]" for level in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_without_an_alias_value_bound_the_walk_after_loading_refuses_a_bomb():
    # when
    errors = errors_of(bomb(9))

    # then
    assert errors == [("", "the document is too large (more than 1000 values)")]


def test_with_an_alias_value_bound_a_bomb_is_refused_where_the_aliases_pass_it():
    # given: level 1 aliases stand for 110 values, level 2 for 1110 more
    limits = DocumentLimits(max_bytes=10_000, max_aliases=100, max_depth=8, max_nodes=10**9, max_alias_values=1000)

    # when
    errors = errors_of(bomb(9), limits)

    # then: the 9th alias of line 3 brings the total to 110 + 9 * 111 = 1109
    assert errors == [("", "YAML aliases expand to more than 1000 values at line 3, column 50")]


def shared_limits(max_alias_values: int) -> DocumentLimits:
    return DocumentLimits(
        max_bytes=10_000, max_aliases=100, max_depth=8, max_nodes=1000, max_alias_values=max_alias_values
    )


def test_nested_aliases_count_every_value_they_stand_for():
    # given: a is 3 values (keys are no values); b's 2 aliases stand for 6 (b is 7 values); c's 2 for 14
    limits = shared_limits(20)

    # when
    document = load_document(SHARED, limits)

    # then
    assert document["c"] == [[{"x": 1, "y": 2}] * 2] * 2


def test_one_value_over_the_bound_is_refused_at_the_alias_that_passes_it():
    # when
    errors = errors_of(SHARED, shared_limits(19))

    # then
    assert errors == [("", "YAML aliases expand to more than 19 values at line 3, column 9")]


def test_a_self_reference_is_still_refused_by_the_depth_limit():
    # given
    limits = DocumentLimits(max_bytes=10_000, max_aliases=100, max_depth=3, max_nodes=1000, max_alias_values=1000)

    # when
    errors = errors_of("top: &t {loop: *t}\n", limits)

    # then
    assert errors == [("top.loop.loop.loop", "the document is nested too deeply (more than 3)")]


@pytest.mark.parametrize(
    ("_case", "source", "message"),
    [
        ("_case_too_large", "x" * 10_001, "the inventory is larger than 10000 bytes"),
        ("_case_not_utf8", b"a: \xff", "the inventory is not valid UTF-8 (byte 3)"),
        ("_case_empty", "", "the inventory is empty"),
        ("_case_list", "- a\n", "the inventory must be a mapping with a 'pool' key"),
        ("_case_other_type", 42, "the inventory must be YAML or JSON text, or a mapping"),
    ],
)
def test_messages_name_the_document_as_the_caller_asks(_case, source, message):
    # when
    errors = errors_of(source, what="the inventory", shape="a mapping with a 'pool' key")

    # then
    assert errors == [("", message)]


def test_problems_of_the_walk_are_all_reported_in_the_order_found():
    # when
    errors = errors_of({"b": "x\x00", "a": 2**300, "c": {1: "x"}})

    # then: the walk is a stack, so the last key comes first
    assert errors == [
        ("c.1", "field names must be strings"),
        ("a", "the number is too large"),
        ("b", "text must not contain NUL characters or unpaired surrogates"),
    ]


@pytest.mark.parametrize(
    ("path", "key", "expected"),
    [
        ("", "pool", "pool"),
        ("nodes", 3, "nodes[3]"),
        ("nodes[3].labels", "topology.kubernetes.io/zone", 'nodes[3].labels["topology.kubernetes.io/zone"]'),
        ("a", True, "a.True"),
    ],
)
def test_join_path(path, key, expected):
    assert join_path(path, key) == expected


def test_an_error_without_problems_still_says_what_is_wrong():
    # when
    error = DocumentInvalidError([])

    # then
    assert (error.message, error.errors) == ("The document is invalid.", (PathError("", "the document is invalid"),))


def test_a_list_past_the_value_limit_is_refused_before_its_paths_are_made(monkeypatch):
    """Replays the attack run's finding: a 2.5 MB JSON body with a list of 800,000 empty lists spent 1.5 s
    making a path for each of them before the walk counted past ``max_nodes``."""
    # given
    paths: list[str] = []
    monkeypatch.setattr(document_loader, "join_path", lambda path, key: paths.append(key) or join_path(path, key))
    document = {"workflow": {"name": "wf"}, "junk": [[]] * 5000}

    # when
    with pytest.raises(DocumentInvalidError) as caught:
        load_document(document, LIMITS, what="the spec")

    # then: the two top-level keys got paths, no item of the list
    assert caught.value.to_list() == [{"path": "", "message": "the spec is too large (more than 1000 values)"}]
    assert sorted(paths) == ["junk", "workflow"]
