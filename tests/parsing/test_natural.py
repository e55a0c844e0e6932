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
