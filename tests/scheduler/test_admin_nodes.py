"""The node form of the admin (scheduler/forms.py) through the Django test client: capacities typed as
Kubernetes quantities, labels as key/value rows, errors that name the field."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from scheduler.models import Node
from tests.factories import make_pool

pytestmark = pytest.mark.django_db

GiB = 1024**3


@pytest.fixture
def admin_client_(staff_user) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


@pytest.fixture
def pool():
    return make_pool("entry", keys=[("zone", "topology.kubernetes.io/zone"), ("rack", "example.com/rack")])


def _form(pool, **overrides) -> dict[str, str]:
    data = {
        "pool": str(pool.pk), "name": "n1", "schedulable": "on",
        "gpu": "8", "used_gpu": "0", "cpu_millis": "64", "used_cpu_millis": "500m",
        "memory_bytes": "512Gi", "used_memory_bytes": "0", "storage_bytes": "4Ti", "used_storage_bytes": "1.5T",
        "labels-rows": "3",
        "labels-key-0": "topology.kubernetes.io/zone", "labels-value-0": "z1",
        "labels-key-1": "example.com/rack", "labels-value-1": "r2",
        "labels-key-2": "", "labels-value-2": "",
    }
    data.update(overrides)
    return data


def _errors(response) -> str:
    found = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode(), re.S)
    return " | ".join(re.sub(r"<[^>]+>", " ", item).strip() for item in found)


def test_adding_a_node_with_quantities_and_label_rows(admin_client_, pool):
    # when
    response = admin_client_.post("/admin/scheduler/node/add/", _form(pool))

    # then
    assert response.status_code == 302, _errors(response)
    node = Node.objects.get(pool=pool, name="n1")
    assert (node.gpu, node.cpu_millis, node.used_cpu_millis) == (8, 64_000, 500)
    assert (node.memory_bytes, node.storage_bytes, node.used_storage_bytes) == (512 * GiB, 4 * 1024**4, 1_500 * 10**9)
    assert node.labels == {"topology.kubernetes.io/zone": "z1", "example.com/rack": "r2"}


def test_the_change_form_shows_quantities_and_one_row_per_label(admin_client_, pool):
    # given
    node = Node.objects.create(pool=pool, name="n2", gpu=4, cpu_millis=1500, memory_bytes=960 * GiB,
                               storage_bytes=10**12, labels={"rack10": "x", "rack2": "y"})

    # when
    page = admin_client_.get(f"/admin/scheduler/node/{node.pk}/change/").content.decode()

    # then: 1500 millicores as 1500m, bytes with a suffix, rows in natural key order plus blank rows
    assert 'name="cpu_millis" value="1500m"' in page
    assert 'name="memory_bytes" value="960Gi"' in page
    assert 'name="storage_bytes" value="1T"' in page  # decimal bytes with a decimal suffix
    assert re.findall(r'name="labels-key-\d+" value="([^"]*)"', page) == ["rack2", "rack10", "", "", ""]
    assert 'name="labels-rows" value="5"' in page
    # and the usage table: a header row, then one row per resource, escaped as HTML once
    table = re.search(r"<table><tr><th></th><th>capacity</th>.*?</table>", page, re.S)
    assert table is not None and "<tr><th>gpu</th><td>4</td>" in table.group(0)


def test_clearing_a_row_removes_the_label_and_a_blank_row_adds_one(admin_client_, pool):
    # given
    node = Node.objects.create(pool=pool, name="n3", gpu=4, labels={"a": "1", "b": "2"})
    data = _form(pool, name="n3", **{"labels-rows": "3", "labels-key-0": "a", "labels-value-0": "1",
                                     "labels-key-1": "", "labels-value-1": "", "labels-key-2": "c",
                                     "labels-value-2": ""})

    # when
    response = admin_client_.post(f"/admin/scheduler/node/{node.pk}/change/", data)

    # then: b removed, c added with an empty value (Kubernetes allows it)
    assert response.status_code == 302, _errors(response)
    node.refresh_from_db()
    assert node.labels == {"a": "1", "c": ""}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"memory_bytes": "512GB"}, "Memory: invalid memory quantity '512GB'"),
        ({"cpu_millis": "0.0001"}, "CPU: cpu must be a multiple of 1m"),
        ({"gpu": "1.5"}, "GPUs: gpu must be a whole number of devices"),
        ({"used_gpu": "-1"}, "GPUs used: gpu must not be negative"),
        ({"used_cpu_millis": "65"}, "CPU used (65) is more than the node's CPU (64)"),
        ({"used_memory_bytes": "1Ti"}, "Memory used (1Ti) is more than the node's Memory (512Gi)"),
        ({"gpu": "3000000000"}, "GPUs: '3000000000' is more than 2147483647"),
        ({"labels-key-1": "example.com/rack", "labels-key-2": "example.com/rack", "labels-value-2": "r3"},
         "Labels row 3: key 'example.com/rack' appears twice"),
        ({"labels-key-2": "", "labels-value-2": "r3"}, "Labels row 3: value 'r3' has no key"),
        ({"labels-key-2": "bad key!", "labels-value-2": "x"}, "'bad key!' is not a valid label key"),
        ({"labels-key-2": "ok", "labels-value-2": "no spaces"}, "'no spaces' is not a valid label value"),
    ],
    ids=["_case_suffix", "_case_cpu_fraction", "_case_gpu_fraction", "_case_negative", "_case_used_cpu",
         "_case_used_memory", "_case_gpu_range", "_case_duplicate_key", "_case_value_without_key",
         "_case_bad_key", "_case_bad_value"],
)
def test_errors_name_the_field_and_nothing_is_saved(admin_client_, pool, overrides, message):
    # when
    response = admin_client_.post("/admin/scheduler/node/add/", _form(pool, **overrides))

    # then
    assert response.status_code == 200
    assert message in _errors(response).replace("&#x27;", "'")
    assert not Node.objects.filter(pool=pool, name="n1").exists()


@pytest.mark.parametrize("kind", ["gpu", "cpu", "memory", "storage"])
def test_shown_quantities_parse_back_to_the_stored_amount(kind):
    from parsing import format_quantity, parse_quantity

    for value in (0, 1, 999, 1000, 1500, 1024, 10**12, 3 * 10**9 + 1, 512 * GiB, 2**63 - 1):
        assert parse_quantity(format_quantity(value, kind), kind) == value
