"""The one natural order of names (parsing/natural.py), shared by errors, pages and the CLI."""

from __future__ import annotations

from parsing import natural_key, natural_sorted
from parsing.errors import PathError


def test_digit_runs_compare_by_value():
    names = ["shard10", "shard2", "shard1", "node-10", "node-9", "rack2/n10", "rack2/n9"]

    assert natural_sorted(names) == ["node-9", "node-10", "rack2/n9", "rack2/n10", "shard1", "shard2", "shard10"]


def test_key_function_none_and_non_strings():
    rows = [("b", 10), ("a", 2), ("c", 1)]

    assert natural_sorted(rows, key=lambda row: f"t{row[1]}") == [("c", 1), ("a", 2), ("b", 10)]
    assert natural_key(None) == ()
    assert natural_key(12) == ((0, 12),)


def test_digits_other_than_ascii_and_superscripts_do_not_break_it():
    # "²" is a digit for str.isdigit() but not a decimal; it stays text
    assert natural_sorted(["x²", "x10", "x٣"]) == ["x٣", "x10", "x²"]


def test_path_errors_use_the_same_order():
    errors = [PathError("tasks[10]", "m"), PathError("tasks[2]", "m")]

    assert [e.path for e in sorted(errors)] == ["tasks[2]", "tasks[10]"]


def test_repeated_errors_collapse_by_index_pattern_from_three_on():
    from parsing.errors import errors_collapse

    # given the same message at 3 task paths, at 2 group paths, and one other error
    errors = [{"path": f"workflow.groups[0].tasks[{i}].command", "message": "this field is required"} for i in range(3)]
    errors += [{"path": f"workflow.groups[{i}].name", "message": "bad name"} for i in range(2)]
    errors += [{"path": "", "message": "whole"}]
    # when collapsed
    out = errors_collapse(errors)
    # then the three become one pattern entry with all paths; the two stay apart; order is first-seen
    assert [(shown, message, len(paths)) for shown, message, paths in out] == [
        ("workflow.groups[0].tasks[*].command", "this field is required", 3),
        ("workflow.groups[0].name", "bad name", 1),
        ("workflow.groups[1].name", "bad name", 1),
        ("", "whole", 1),
    ]
