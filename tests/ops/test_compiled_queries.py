"""Queries compiled once and run with each call's values (osmo.compiled): the same results as the ORM,
and the hot paths' queries really run from their cached SQL on PostgreSQL."""

from __future__ import annotations

import importlib
import pkgutil
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, Value
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from osmo.compiled import CompiledQuery
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import StatusTransition, Workflow
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def _compiled_queries() -> dict[str, CompiledQuery]:
    """Every CompiledQuery at the top level of the service's modules."""
    found: dict[str, CompiledQuery] = {}
    for package in ("osmo", "scheduler", "workflows"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            skip = ".migrations" in info.name or ".settings" in info.name
            if skip or info.name.endswith((".wsgi", ".gunicorn_conf")):
                continue
            module = importlib.import_module(info.name)
            for attr, value in vars(module).items():
                if isinstance(value, CompiledQuery):
                    found[f"{info.name}.{attr}"] = value
    return found


def test_every_compiled_query_of_the_service_compiles_on_postgresql():
    # given: the service's compiled queries (those of a submission among them)
    queries = _compiled_queries()
    # when / then: each one's parameters reach its SQL as given, so none falls back to the ORM
    assert [name for name, query in queries.items() if not query.compiled()] == []


def test_model_results_carry_annotations_and_defer_what_only_leaves_out(user):
    # given: two workflows of one name
    pool = make_pool("cq")
    make_node(pool, "n1", {}, gpu=4)
    first, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("cq", 1, 1, key=None))
    second, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("cq", 1, 1, key=None))
    query = CompiledQuery(lambda name, since: Workflow.objects.filter(name=name, submitted_at__gte=since)
                          .annotate(marker=Value(7)).only("pk", "workflow_id").order_by("-seq"),
                          name=str, since=timezone.datetime)
    # when
    found = query.all(name="cq", since=first.submitted_at - timedelta(seconds=1))
    # then: what the ORM gives, with the annotation; a field left out loads when read (one query)
    assert query.compiled()
    assert [(w.pk, w.workflow_id, w.marker) for w in found] == [(second.pk, "cq-2", 7), (first.pk, "cq-1", 7)]
    assert found[0].get_deferred_fields() >= {"spec_text", "labels"}
    with CaptureQueriesContext(connection) as captured:
        assert found[0].spec_text == second.spec_text
    assert len(captured) == 1
    assert query.first(name="nothing", since=first.submitted_at) is None


def test_values_results_go_through_the_fields_converters(user):
    # given: a workflow with labels (a JSON field: PostgreSQL hands its text to the field's converter)
    pool = make_pool("cq2")
    make_node(pool, "n1", {}, gpu=4)
    spec = gang_spec("lab", 1, 1, key=None, extra="  labels: {team: vision}\n")
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=spec)
    tuples = CompiledQuery(lambda pk: Workflow.objects.filter(pk=pk).values_list("labels", "submitted_at"), pk=int)
    flat = CompiledQuery(lambda pk: Workflow.objects.filter(pk=pk).values_list("labels", flat=True), pk=int)
    dicts = CompiledQuery(lambda pk: StatusTransition.objects.filter(workflow=pk).values("to_status")
                          .annotate(n=Count("pk")).order_by("to_status"), pk=int)
    # when / then: the same values as the ORM's, converted
    orm = Workflow.objects.filter(pk=workflow.pk).values_list("labels", "submitted_at")
    assert tuples.all(pk=workflow.pk) == list(orm)
    assert tuples.first(pk=workflow.pk)[0] == {"team": "vision"}
    assert flat.all(pk=workflow.pk) == [{"team": "vision"}]
    assert dicts.all(pk=workflow.pk) == [{"to_status": "PENDING", "n": 1}, {"to_status": "SCHEDULING", "n": 1}]
    assert all(query.compiled() for query in (tuples, flat, dicts))


def test_a_parameter_the_orm_rewrites_runs_through_the_orm_every_time(user, caplog):
    # given: a LIKE pattern (the ORM wraps the value in %...%) and a list (one parameter per item)
    pool = make_pool("cq3")
    make_node(pool, "n1", {}, gpu=4)
    workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("alpha", 1, 1, key=None))
    like = CompiledQuery(lambda part: Workflow.objects.filter(name__contains=part).values_list("name", flat=True),
                         part=str)
    # when / then: it is not compiled (the log says which query, and why), and still answers as the ORM does
    with caplog.at_level("INFO", logger="osmo.compiled"):
        assert not like.compiled()
    refused = [r for r in caplog.records if r.getMessage() == "compiled_query.refused"]
    assert len(refused) == 1 and refused[0].query.startswith("tests.ops.test_compiled_queries:")
    assert like.all(part="lph") == ["alpha"]
    assert like.all(part="zzz") == []


def test_a_list_parameter_is_one_array_whatever_its_length(user):
    # given: workflows, and a query of some of them by id (``__in`` a list) and a name
    pool = make_pool("cq4")
    make_node(pool, "n1", {}, gpu=4)
    made = [workflow_submit(user=user, pool_name=pool.name, spec=gang_spec(f"l{i}", 1, 1, key=None))[0]
            for i in range(4)]
    query = CompiledQuery(lambda ids, name: Workflow.objects.filter(pk__in=ids).exclude(name=name)
                          .order_by("pk").values_list("name", flat=True), ids=list, name=str)
    # then: compiled to one statement with an array parameter, answering as the ORM does at any length
    assert query.compiled()
    assert "= ANY(%s)" in query._plan("default").sql
    for ids in ([made[0].pk], [w.pk for w in made], [made[3].pk, made[1].pk, 10**12]):
        expected = list(Workflow.objects.filter(pk__in=ids).exclude(name="l1").order_by("pk")
                        .values_list("name", flat=True))
        assert query.all(ids=ids, name="l1") == expected
    # an empty list: nothing, without a query
    with CaptureQueriesContext(connection) as captured:
        assert query.all(ids=[], name="l1") == []
    assert len(captured) == 0
    # a list that does not land in an IN (...) of its own is not compiled, and still answers
    odd = CompiledQuery(lambda ids: Workflow.objects.filter(pk__in=ids + [made[0].pk]).values_list("pk", flat=True),
                        ids=list)
    assert not odd.compiled()
    assert sorted(odd.all(ids=[made[1].pk])) == sorted([made[0].pk, made[1].pk])


def test_a_call_must_give_exactly_the_declared_parameters():
    query = CompiledQuery(lambda pk: Workflow.objects.filter(pk=pk), pk=int)
    with pytest.raises(TypeError, match="expected the parameters"):
        query.all(pk=1, other=2)
    with pytest.raises(TypeError, match="must be int, str, datetime or list"):
        CompiledQuery(lambda flag: Workflow.objects.filter(pk=1), flag=bool).all(flag=True)
    with pytest.raises(TypeError, match="select_related"):
        CompiledQuery(lambda pk: Workflow.objects.select_related("pool").filter(pk=pk), pk=int).all(pk=1)
