"""Schema declarations flagged by schemathesis (responses that did not match the OpenAPI document)."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator


@pytest.fixture(scope="module")
def schema():
    return SchemaGenerator().get_schema(request=None, public=True)


def test_quantity_schema_has_no_overlapping_oneof_branches(schema):
    # an integer is also a number: oneOf [string, integer, number] rejected every integer quantity
    quantity = schema["components"]["schemas"]["ResourceQuantitiesInput"]["properties"]["gpu"]
    types = [branch["type"] for branch in quantity["oneOf"]]
    assert not ({"integer", "number"} <= set(types))


@pytest.mark.parametrize(
    "path, method, codes",
    [
        ("/api/workflows/", "get", {"200", "400", "401"}),
        ("/api/workflows/{id}/", "get", {"200", "401", "404"}),
        ("/api/workflows/{id}/cancel/", "post", {"200", "401", "404", "409"}),
    ],
)
def test_workflow_read_errors_are_documented(schema, path, method, codes):
    assert codes <= set(schema["paths"][path][method]["responses"])


@pytest.mark.parametrize("path, method", [("/api/pools/", "post"), ("/api/pools/{name}/", "put"),
                                          ("/api/pools/{pool_name}/nodes/", "post")])
def test_pool_and_node_writes_document_json_bodies_only(schema, path, method):
    assert set(schema["paths"][path][method]["requestBody"]["content"]) == {"application/json"}


def test_pool_import_documents_json_and_yaml(schema):
    content = schema["paths"]["/api/pools/import/"]["post"]["requestBody"]["content"]
    assert {"application/json", "application/yaml"} <= set(content)
