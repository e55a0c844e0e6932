"""Kubernetes quantity and duration parsing: exact integers in the resource's unit."""

from __future__ import annotations

import pytest

from parsing import QuantityError, format_quantity, parse_duration, parse_quantity

KI, MI, GI, TI = 2**10, 2**20, 2**30, 2**40


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        pytest.param("100Gi", "memory", 100 * GI, id="_case_gi"),
        pytest.param("1Ki", "memory", KI, id="_case_ki"),
        pytest.param("1.5Mi", "memory", 3 * MI // 2, id="_case_fractional_mi"),
        pytest.param("4Ti", "storage", 4 * TI, id="_case_ti"),
        pytest.param("1Pi", "storage", 2**50, id="_case_pi"),
        pytest.param("1Ei", "storage", 2**60, id="_case_ei"),
        pytest.param("1k", "memory", 1000, id="_case_k"),
        pytest.param("1M", "memory", 10**6, id="_case_m_upper"),
        pytest.param("1G", "memory", 10**9, id="_case_g"),
        pytest.param("1T", "storage", 10**12, id="_case_t"),
        pytest.param("1P", "storage", 10**15, id="_case_p"),
        pytest.param("1E", "storage", 10**18, id="_case_e"),
        pytest.param("2e3", "memory", 2000, id="_case_exponent"),
        pytest.param("1E3", "memory", 1000, id="_case_exponent_upper"),
        pytest.param("20e-1", "gpu", 2, id="_case_negative_exponent_whole"),
        pytest.param("128974848", "memory", 128974848, id="_case_plain_bytes"),
        pytest.param("129e6", "memory", 129 * 10**6, id="_case_exp_bytes"),
        pytest.param("123Mi", "memory", 123 * MI, id="_case_mi"),
        pytest.param("1.5", "cpu", 1500, id="_case_cpu_fraction"),
        pytest.param("500m", "cpu", 500, id="_case_cpu_milli"),
        pytest.param("0.1", "cpu", 100, id="_case_cpu_tenth"),
        pytest.param(".5", "cpu", 500, id="_case_cpu_leading_dot"),
        pytest.param("2", "cpu", 2000, id="_case_cpu_string_int"),
        pytest.param(16, "cpu", 16_000, id="_case_cpu_int"),
        pytest.param(0.25, "cpu", 250, id="_case_cpu_float"),
        pytest.param("1000000u", "cpu", 1000, id="_case_cpu_micro"),
        pytest.param("1000000n", "cpu", 1, id="_case_cpu_nano"),
        pytest.param("+3", "gpu", 3, id="_case_plus_sign"),
        pytest.param("8", "gpu", 8, id="_case_gpu"),
        pytest.param(8, "gpu", 8, id="_case_gpu_int"),
        pytest.param(4.0, "gpu", 4, id="_case_gpu_whole_float"),
        pytest.param("1k", "gpu", 1000, id="_case_gpu_k"),
        pytest.param("0", "memory", 0, id="_case_zero"),
        pytest.param("-0", "memory", 0, id="_case_negative_zero"),
        pytest.param("7Ei", "storage", 7 * 2**60, id="_case_near_int64_max"),
    ],
)
def test_parse_quantity(value: object, kind: str, expected: int) -> None:
    # when
    result = parse_quantity(value, kind)  # type: ignore[arg-type]

    # then
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    ("value", "kind", "message"),
    [
        pytest.param("0.5", "gpu", "gpu must be a whole number of devices, got '0.5'", id="_case_fractional_gpu"),
        pytest.param(1.5, "gpu", "gpu must be a whole number of devices, got 1.5", id="_case_fractional_gpu_float"),
        pytest.param("500m", "gpu", "gpu must be a whole number of devices, got '500m'", id="_case_milli_gpu"),
        pytest.param("-1", "gpu", "gpu must not be negative, got '-1'", id="_case_negative"),
        pytest.param("-1Gi", "memory", "memory must not be negative, got '-1Gi'", id="_case_negative_memory"),
        pytest.param(-2, "cpu", "cpu must not be negative, got -2", id="_case_negative_int"),
        pytest.param(
            "0.0001", "cpu", "cpu must be a multiple of 1m (0.001 cores), got '0.0001'", id="_case_cpu_below_milli"
        ),
        pytest.param("1n", "cpu", "cpu must be a multiple of 1m (0.001 cores), got '1n'", id="_case_cpu_nano"),
        pytest.param("0.5", "memory", "memory must be a whole number of bytes, got '0.5'", id="_case_half_byte"),
        pytest.param("500m", "storage", "storage must be a whole number of bytes, got '500m'", id="_case_milli_bytes"),
        pytest.param(
            "abc",
            "memory",
            "invalid memory quantity 'abc'; expected a non-negative number with an optional Kubernetes suffix, "
            "e.g. 4, 500m, 1.5, 64Gi, 2e3",
            id="_case_garbage",
        ),
        pytest.param(
            "1K",
            "memory",
            "invalid memory quantity '1K'; expected a non-negative number with an optional Kubernetes suffix, "
            "e.g. 4, 500m, 1.5, 64Gi, 2e3",
            id="_case_upper_k_is_not_kubernetes",
        ),
        pytest.param(
            "1 Gi",
            "memory",
            "invalid memory quantity '1 Gi'; expected a non-negative number with an optional Kubernetes suffix, "
            "e.g. 4, 500m, 1.5, 64Gi, 2e3",
            id="_case_space",
        ),
        pytest.param(
            "",
            "cpu",
            "invalid cpu quantity ''; expected a non-negative number with an optional Kubernetes suffix, "
            "e.g. 4, 500m, 1.5, 64Gi, 2e3",
            id="_case_empty",
        ),
        pytest.param(
            "1e",
            "cpu",
            "invalid cpu quantity '1e'; expected a non-negative number with an optional Kubernetes suffix, "
            "e.g. 4, 500m, 1.5, 64Gi, 2e3",
            id="_case_dangling_exponent",
        ),
        pytest.param("1e99", "memory", "memory quantity '1e99' is out of range", id="_case_huge_exponent"),
        pytest.param("8Ei", "storage", "storage quantity '8Ei' is too large", id="_case_over_int64"),
        pytest.param(2**70, "gpu", f"gpu quantity {2**70} is too large", id="_case_huge_int"),
        pytest.param(float("inf"), "cpu", "cpu must be a finite quantity, got inf", id="_case_inf"),
        pytest.param(float("nan"), "cpu", "cpu must be a finite quantity, got nan", id="_case_nan"),
        pytest.param(
            True,
            "gpu",
            "gpu must be a quantity, got a boolean (True); expected a non-negative number with an optional "
            "Kubernetes suffix, e.g. 4, 500m, 1.5, 64Gi, 2e3",
            id="_case_bool",
        ),
        pytest.param(None, "gpu", "gpu must be a quantity (a string or a number), got null", id="_case_none"),
        pytest.param([1], "cpu", "cpu must be a quantity (a string or a number), got list", id="_case_list"),
        pytest.param(
            "9" * 65,
            "cpu",
            f"cpu quantity '{'9' * 64}...' is too long; expected a non-negative number "
            "with an optional Kubernetes suffix, e.g. 4, 500m, 1.5, 64Gi, 2e3",
            id="_case_too_long",
        ),
    ],
)
def test_parse_quantity_rejects(value: object, kind: str, message: str) -> None:
    # when
    with pytest.raises(QuantityError) as caught:
        parse_quantity(value, kind)  # type: ignore[arg-type]

    # then
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("value", "kind", "expected"),
    [
        pytest.param(64 * GI, "memory", "64Gi", id="_case_gi"),
        pytest.param(3 * MI // 2, "memory", "1536Ki", id="_case_largest_exact_suffix"),
        pytest.param(1536, "memory", "1536", id="_case_not_a_whole_ki"),
        pytest.param(1000, "memory", "1k", id="_case_decimal_k"),
        pytest.param(960 * 10**9, "storage", "960G", id="_case_decimal_shorter_than_binary"),
        pytest.param(1024, "memory", "1Ki", id="_case_binary_on_a_tie"),
        pytest.param(0, "storage", "0", id="_case_zero"),
        pytest.param(16_000, "cpu", "16", id="_case_cpu_cores"),
        pytest.param(1500, "cpu", "1500m", id="_case_cpu_milli"),
        pytest.param(4, "gpu", "4", id="_case_gpu"),
    ],
)
def test_format_quantity_round_trips(value: int, kind: str, expected: str) -> None:
    # when
    text = format_quantity(value, kind)  # type: ignore[arg-type]

    # then
    assert text == expected
    assert parse_quantity(text, kind) == value  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("45s", 45, id="_case_seconds"),
        pytest.param("30m", 1800, id="_case_minutes"),
        pytest.param("2h", 7200, id="_case_hours"),
        pytest.param("1d", 86400, id="_case_days"),
        pytest.param("1h30m", 5400, id="_case_compound"),
        pytest.param(3600, 3600, id="_case_int_seconds"),
        pytest.param("3600", 3600, id="_case_string_seconds"),
    ],
)
def test_parse_duration(value: object, expected: int) -> None:
    # when
    seconds = parse_duration(value)

    # then
    assert seconds == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("2 hours", "invalid timeout '2 hours'; expected seconds or a duration like 45s, 30m, 2h, 1d"),
        pytest.param("2H", "invalid timeout '2H'; expected seconds or a duration like 45s, 30m, 2h, 1d"),
        pytest.param("h", "invalid timeout 'h'; expected seconds or a duration like 45s, 30m, 2h, 1d"),
        pytest.param("-5s", "invalid timeout '-5s'; expected seconds or a duration like 45s, 30m, 2h, 1d"),
        pytest.param(0, "timeout must be positive, got 0"),
        pytest.param(-1, "timeout must be positive, got -1"),
        pytest.param(
            True, "timeout must be a duration, got a boolean; expected seconds or a duration like 45s, 30m, 2h, 1d"
        ),
        pytest.param(
            1.5, "timeout must be a duration, got float; expected seconds or a duration like 45s, 30m, 2h, 1d"
        ),
        pytest.param("100000d", "timeout '100000d' is too long (at most 2147483647 seconds)"),
    ],
)
def test_parse_duration_rejects(value: object, message: str) -> None:
    # when
    with pytest.raises(QuantityError) as caught:
        parse_duration(value)

    # then
    assert str(caught.value) == message
