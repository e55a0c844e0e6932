"""Writes of the workflows app at its edge: validation, submission and cancellation.

Status changes go through :mod:`workflows.lifecycle.transitions`; enqueueing through
:mod:`workflows.jobs`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import Group
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from osmo import config as osmo_config
from osmo.bulk import bulk_insert
from osmo.metrics import workflow_label_observe
from osmo.process_cache import ProcessCache
from osmo.types import User, Viewer
from scheduler.choices import DispatchBackend
from scheduler.models import Node, Pool, TopologyKey
from scheduler.placement import Unplaceable, solve
from scheduler.placement.signature import gang_signature
from scheduler.reads.snapshot import idle_index, idle_index_key
from scheduler.resources import CAPACITY_FIELDS
from scheduler.results import result_to_json
from scheduler.services.access import pool_submit_check, pool_with_access, pools_visible, team_for_submission
from workflows import jobs, sql
from workflows.choices import TASK_TERMINAL_STATUSES, WORKFLOW_ACTIVE_STATUSES, Priority, TaskStatus, WorkflowStatus
from workflows.credential_refs import spec_credentials_check
from workflows.errors import (
    ActiveWorkflowLimitError,
    IdempotencyKeyReusedError,
    PoolNotFoundError,
    WorkflowNeverFitsError,
    WorkflowNotCancellableError,
    WorkflowSpecInvalidError,
)
from workflows.labels import label_policy, label_rows_write
from workflows.lifecycle.transitions import group_fail, workflow_status_refresh
from workflows.models import StatusTransition, Task, TaskGroup, Workflow, workflow_global_id
from workflows.scheduling.gang_dispatch import tasks_with_pods
from workflows.scheduling.pod.runtime import artifact_store, local_service_paths
from workflows.scheduling.requests import gang_request_from_spec, task_requests_to_json
from workflows.spec import (
    PoolContext,
    SpecError,
    SpecInvalidError,
    WorkflowSpec,
    parse_workflow,
    tree_to_json,
)
from workflows.spec.labels import labels_merge
from workflows.spec.model import ScalarValue
from workflows.spec.template import RenderedSpec
from workflows.spec_pool import pool_platforms, spec_pool_check, submission_pool
from workflows.templating import dump_yaml, render_submission, with_template_lines

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ValidatedSubmission:
    pool: Pool
    spec: WorkflowSpec
    spec_text: str
    template_values: dict[str, Any]
    keys: tuple[TopologyKey, ...]  # the pool's keys the spec was validated against, coarsest first
    render_warnings: tuple[SpecError, ...] = ()  # said by the rendering (a repeated key before set_env)
    labels: dict[str, str] = field(default_factory=dict)  # the spec's, the submission's over them
    pod_labels: dict[str, str] = field(default_factory=dict)  # what the label policy puts on its pods
    metric_dimensions: tuple[tuple[str, str], ...] = ()  # the policy's metric dimensions of those labels

    @property
    def warnings(self) -> list[dict[str, str]]:
        """What was accepted but is worth saying (a repeated key), as ``[{"path", "message"}]``."""
        return [warning.to_dict() for warning in (*self.render_warnings, *self.spec.warnings)]


@dataclass(frozen=True, slots=True)
class AppOrigin:
    """The app version a workflow is started from (``osmo app submit``), kept on the workflow as facts."""

    uuid: str
    name: str
    version: int


def pool_context(pool: Pool, keys: tuple[TopologyKey, ...]) -> PoolContext:
    """The pool facts a spec is validated against: its keys (read by the caller, in order), its
    distinct node shapes and its platforms (2 queries)."""
    key_names = tuple(key.key for key in keys)
    shapes = tuple(
        Node.objects.filter(pool=pool.pk, schedulable=True)
        .values_list(*CAPACITY_FIELDS)
        .distinct()
        .order_by(*CAPACITY_FIELDS)
    )
    return PoolContext(name=pool.name, keys=key_names, node_capacities=shapes, platforms=pool_platforms(pool),
                       artifact_store=artifact_store(pool.name),
                       service_paths=local_service_paths() if pool.backend == DispatchBackend.LOCAL else ())


# The pool facts of recent submissions by (pool, inventory epoch, keys version): its keys and its
# context. Every write to a pool's nodes or keys moves its inventory epoch on (docs/design.md §8), so
# an entry is never stale; it saves every submission reading the keys and scanning the pool's nodes for
# their distinct shapes (0.9 ms of PostgreSQL's CPU on 1,296 nodes, linear in the pool).
# One entry per pool, as of (inventory epoch, keys version).
_FACTS: ProcessCache[int, tuple[tuple[TopologyKey, ...], PoolContext]] = ProcessCache("pool_facts", size=64)


def _pool_facts(pool: Pool, key: tuple[int, int, int]) -> tuple[tuple[TopologyKey, ...], PoolContext]:
    """The pool's keys and :func:`pool_context`, as of ``key`` (:func:`idle_index_key`)."""
    pool_id, *version = key
    facts = _FACTS.get(pool_id, tuple(version))
    if facts is None:
        keys = tuple(TopologyKey.objects.filter(pool=pool.pk).order_by("position"))
        facts = (keys, pool_context(pool, keys))
        _FACTS.put(pool_id, facts, tuple(version))
    return facts


def workflow_validate(
    *,
    pool_name: str | None,
    spec: str | dict[str, Any],
    values: dict[str, ScalarValue] | None = None,
    env: dict[str, str] | None = None,
    user: Viewer | None = None,
    rendered_values: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
) -> ValidatedSubmission:
    """Render ``spec`` as a template with ``values`` and ``env`` (docs/design.md §11), parse and
    validate it against the pool, and check that every gang could be placed on the pool's whole
    inventory if nothing else ran. Raises ``PoolNotFoundError``, ``PoolForbiddenError`` and
    ``PoolUnavailableError`` (for ``user``: no access, maintenance), ``WorkflowSpecInvalidError``
    (every problem, each with its path; template errors with their line) or ``WorkflowNeverFitsError``.
    Without ``pool_name`` the spec's ``workflow.pool`` is used (:mod:`workflows.spec_pool`). With
    ``rendered_values`` the spec is a stored one, rendered already (a restart): it is parsed as it is,
    not rendered again (what its rendering left, like a ``{% raw %}`` block's ``{{ x }}``, is text now),
    and those are its values. ``labels`` (``--label``, checked for syntax by the caller) override the
    spec's; the result must pass the admin's label policy (errors at ``labels.<key>``)."""
    rendered: RenderedSpec | None = None
    if rendered_values is not None:
        source, template_values = spec, dict(rendered_values)
    else:
        try:
            source, rendered = render_submission(spec, values=values, env=env)
        except SpecInvalidError as exc:
            raise WorkflowSpecInvalidError(exc.to_list()) from exc
        template_values = rendered.values if rendered is not None else {}
    pool_name = submission_pool(pool_name, source)
    pool = pool_with_access(pool_name, user=user) if user is not None else Pool.objects.filter(name=pool_name).first()
    if pool is None:
        visible = pools_visible(Pool.objects.all(), user=user) if user is not None else Pool.objects.all()
        raise PoolNotFoundError(pool_name, list(visible.values_list("name", flat=True)))
    if user is not None:
        pool_submit_check(pool, user=user)
    try:
        facts_key = idle_index_key(pool)
        keys, context = _pool_facts(pool, facts_key)
        parsed = parse_workflow(source, pool=context)
        spec_pool_check(parsed, pool.name)
        if user is not None:
            spec_credentials_check(parsed, source, user)
    except SpecInvalidError as exc:
        errors = exc.to_list()
        if rendered is not None and isinstance(spec, str) and rendered.before_env is not None:
            errors = with_template_lines(errors, template=spec, rendered=rendered.before_env,
                                          values=template_values)
        raise WorkflowSpecInvalidError(errors) from exc
    merged = labels_merge(parsed.labels_dict(), labels)
    policy = label_policy()
    problems = policy.check(merged)
    if problems:
        raise WorkflowSpecInvalidError([problem.to_dict() for problem in problems])
    _never_fits_check(pool, parsed, facts_key)
    spec_text = source if isinstance(source, str) else dump_yaml(source)
    return ValidatedSubmission(pool=pool, spec=parsed, spec_text=spec_text, template_values=template_values,
                               keys=keys, render_warnings=rendered.warnings if rendered is not None else (),
                               labels=merged, pod_labels=policy.pod_labels(merged),
                               metric_dimensions=tuple(policy.metric_dimensions(merged)))


# Gangs not refused by the check below, by (pool, inventory epoch, keys version, gang signature): the
# key of the idle index they were solved on, and their problem up to names (docs/design.md §8). Such
# a gang is accepted without solving again while that index stands (the answer of a solve on one
# index is deterministic). A refusal is solved again each time: its message names the gang's own
# groups and tasks.
_IDLE_ACCEPTED: ProcessCache[tuple[int, int, int, str], bool] = ProcessCache("idle_accepted", size=4096)


def _never_fits_check(pool: Pool, spec: WorkflowSpec, key: tuple[int, int, int]) -> None:
    """Refuse gangs proven unplaceable on the pool's capacity as if nothing at all ran (ours or others';
    cordoned and NotReady nodes included, since they come back: :func:`~scheduler.reads.snapshot.snapshot_capacity`).
    A gang that fits capacity but not today's usage is queued, not refused (docs/design.md §11).
    "Undecided" (the solver's budget ran out) is accepted: only a proof refuses. Off with the pool's
    ``refuse_never_fits`` false (``OSMO_REFUSE_NEVER_FITS`` when unset; pools that grow). ``key``: the
    pool's :func:`idle_index_key`."""
    if not pool.refuses_never_fits():
        return
    never: list[dict[str, Any]] = []
    for group in spec.groups:
        request = gang_request_from_spec(group)
        accepted = (*key, gang_signature(request))
        if _IDLE_ACCEPTED.get(accepted):
            continue
        index, lock = idle_index(pool, key)
        with lock:
            outcome = solve(index, request)
        if isinstance(outcome, Unplaceable) and outcome.status == "unschedulable":
            placement = result_to_json(outcome)
            never.append({"name": group.name, "code": placement["code"], "message": _ever_words(placement["message"]),
                          "reason": placement["reason"]})
            continue
        _IDLE_ACCEPTED.put(accepted, True)
    if never:
        raise WorkflowNeverFitsError(pool.name, never)


def _ever_words(message: str) -> str:
    """The solver's reason said of capacity: on the capacity index "free" room is what a domain could
    ever hold ("the largest free rack fits 2 of 4" -> "the largest rack could ever hold 2 of 4")."""
    return re.sub(r"the largest free (\S+) fits", r"the largest \1 could ever hold", message).replace(
        "the whole pool fits", "the whole pool could ever hold")


# Numbers of one owner's workflow name are handed out one submission at a time: a transaction-scoped
# advisory lock keyed by the owner and the name (PostgreSQL). Without it, concurrent submissions read
# the same MAX(seq) and all but one fail on the unique constraint; retrying does not help while the
# winners' request transactions are still open, because their rows stay invisible until they commit.
# Numbers count per owner (docs/design.md §7, "Workflow ids"): another user's workflows of the same
# name neither take numbers nor wait for this lock (a key collision of the hash only serialises more).
_NAME_LOCK_NAMESPACE = zlib.crc32(b"osmo.workflow_name") & 0x7FFFFFFF


def _next_seq(owner_pk: int, name: str) -> int:
    """The next ``n`` of ``<name>-<n>`` among ``owner_pk``'s workflows. Must run in the transaction
    that inserts the workflow: on PostgreSQL it first takes the (owner, name) lock, held until that
    transaction ends, so the number read here cannot be taken by another submission in between (and
    a competitor that held the lock has committed, so its row is counted). SQLite's IMMEDIATE
    transactions serialise writers already."""
    if connection.vendor == "postgresql":
        sql.advisory_xact_lock(_NAME_LOCK_NAMESPACE, zlib.crc32(f"{owner_pk}/{name}".encode()) & 0x7FFFFFFF)
    last = (Workflow.objects.filter(submitted_by=owner_pk, name=name).order_by("-seq")
            .values_list("seq", flat=True).first())
    return int(last or 0) + 1


def _request_hash(*, pool_name: str | None, spec: str | dict[str, Any], priority: str,
                  values: dict[str, Any] | None = None, env: dict[str, str] | None = None,
                  labels: dict[str, str] | None = None) -> str:
    """What an ``Idempotency-Key`` stands for: the submission's pool, priority and spec (text as sent,
    or the JSON object with sorted keys), and its template values when it has some."""
    request: dict[str, Any] = {"pool": pool_name, "priority": priority, "spec": spec}
    if values or env:
        request["template"] = {"values": values or {}, "env": env or {}}
    if labels:
        request["labels"] = labels
    body = json.dumps(request, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()


def _idempotent_replay(*, user: User, key: str, request_hash: str) -> Workflow | None:
    """The workflow this user already submitted with ``key``, if the request is the same one; raises
    ``IdempotencyKeyReusedError`` if the key was used for another request. Workflows stored before
    hashes were kept (empty hash) match any request. The workflow comes with its id fields only (every
    submission asks, few are replays; the other fields load when read)."""
    existing = (Workflow.objects.filter(submitted_by=user.pk, idempotency_key=key).order_by("pk")
                .only("pk", "workflow_id", "idempotency_hash").first())
    if existing is not None and existing.idempotency_hash and existing.idempotency_hash != request_hash:
        raise IdempotencyKeyReusedError(key, existing.workflow_id)
    return existing


def workflow_submit(
    *,
    user: User,
    pool_name: str | None,
    spec: str | dict[str, Any],
    priority: str = Priority.NORMAL,
    idempotency_key: str | None = None,
    team: str | None = None,
    values: dict[str, ScalarValue] | None = None,
    env: dict[str, str] | None = None,
    warnings: list[dict[str, str]] | None = None,
    rendered_values: dict[str, Any] | None = None,
    app: AppOrigin | None = None,
    labels: dict[str, str] | None = None,
) -> tuple[Workflow, bool]:
    """Validate and store a workflow; queue its ready groups for placement.

    Returns ``(workflow, created)``; a new workflow carries its groups, tasks and history as
    :func:`workflows.selectors.workflow_detail_queryset` reads them. With an ``idempotency_key`` this
    user already sent with the same request (pool, priority, spec, template values), the earlier
    workflow and ``False``. ``values`` and ``env`` fill the spec's template (docs/design.md §11); the
    rendered spec is stored. Raises ``IdempotencyKeyReusedError`` (422) when the key was used for a
    different request. Nothing is stored when validation fails. ``warnings``, when given, receives what
    the spec's validation accepted but says (a repeated key: :attr:`ValidatedSubmission.warnings`). Safe
    under concurrency: submissions of one owner's name get distinct numbers (see :func:`_next_seq`), and
    racing retries with one key store one workflow. ``app``: the app version it is started from.
    """
    request_hash = (_request_hash(pool_name=pool_name, spec=spec, priority=priority,
                                  values=values if rendered_values is None else rendered_values, env=env,
                                  labels=labels)
                    if idempotency_key else "")
    if idempotency_key:
        existing = _idempotent_replay(user=user, key=idempotency_key, request_hash=request_hash)
        if existing is not None:
            return existing, False
    _active_limit_check(user)
    submission = workflow_validate(pool_name=pool_name, spec=spec, values=values, env=env, user=user,
                                   rendered_values=rendered_values, labels=labels)
    if warnings is not None:
        warnings.extend(submission.warnings)
    chosen_team = team_for_submission(submission.pool, user=user, team=team)
    try:
        with transaction.atomic():
            workflow = _workflow_create(submission, user=user, priority=priority, idempotency_key=idempotency_key,
                                        request_hash=request_hash, team=chosen_team, app=app)
    except IntegrityError:
        # The same key arrived twice at once (with names whose locks do not exclude each other): the
        # first one's row is committed by now, so it is found and returned (or refused as reused).
        if idempotency_key:
            existing = _idempotent_replay(user=user, key=idempotency_key, request_hash=request_hash)
            if existing is not None:
                return existing, False
        raise
    jobs.placement_cycle_request(workflow.pool_id)
    workflow_label_observe(pool=submission.pool.name, dimensions=submission.metric_dimensions)
    logger.info("workflow.submitted", extra={"workflow": workflow.global_id, "pool": submission.pool.name})
    return workflow, True


def _active_limit_check(user: User) -> None:
    """Refuse a submission of a user who has ``OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER`` workflows that have
    not ended (before the spec is read: one count on an index). Submissions at once may all pass at
    the limit less one: it bounds a flood, it is no quota. The statuses are named, not the ended ones
    excluded: ended workflows are kept, and the index then reads only the ones that have not ended."""
    limit = osmo_config.security().max_active_workflows_per_user
    if limit <= 0:
        return
    active = Workflow.objects.filter(submitted_by=user, status__in=sorted(WORKFLOW_ACTIVE_STATUSES))
    if active[limit - 1:limit].exists():
        raise ActiveWorkflowLimitError(limit)


def workflow_restart(*, workflow: Workflow, user: User, pool_name: str | None = None,
                     idempotency_key: str | None = None,
                     labels: dict[str, str] | None = None) -> tuple[Workflow, bool]:
    """Submit ``workflow``'s stored spec again as a new workflow of ``user`` (``osmo workflow restart``),
    in its pool unless ``pool_name`` says otherwise, with its priority, template values and labels
    (``labels`` over them). The stored spec is the rendered one: it is not rendered again
    (:func:`workflow_validate`'s ``rendered_values``)."""
    return workflow_submit(user=user, pool_name=pool_name or workflow.pool.name, spec=workflow.spec_text,
                           priority=workflow.priority, idempotency_key=idempotency_key,
                           rendered_values=dict(workflow.template_values or {}),
                           labels=labels_merge(dict(workflow.labels or {}), labels))


def _workflow_create(
    submission: ValidatedSubmission, *, user: User, priority: str, idempotency_key: str | None,
    request_hash: str = "", team: Group | None = None, app: AppOrigin | None = None,
) -> Workflow:
    spec = submission.spec
    now = timezone.now()
    seq = _next_seq(user.pk, spec.name)
    keys = list(submission.keys)
    workflow_id = f"{spec.name}-{seq}"
    workflow = Workflow.objects.create(
        workflow_id=workflow_id,
        global_id=workflow_global_id(workflow_id, user.pk),
        name=spec.name,
        seq=seq,
        pool=submission.pool,
        pool_keys_version=submission.pool.keys_version,
        pool_keys=[[key.key, key.label] for key in keys],
        priority=priority,
        submitted_by=user,
        team=team,
        spec_text=submission.spec_text,
        template_values=submission.template_values,
        labels=submission.labels,
        pod_labels=submission.pod_labels,
        queue_timeout_s=spec.queue_timeout_s,
        exec_timeout_s=spec.exec_timeout_s,
        idempotency_key=idempotency_key or None,
        idempotency_hash=request_hash if idempotency_key else "",
        **({"app_uuid": app.uuid, "app_name": app.name, "app_version": app.version} if app else {}),
    )
    groups: list[TaskGroup] = []
    tasks: list[Task] = []
    order = {name: index for index, name in enumerate(g.name for g in spec.groups)}
    for group_spec in spec.groups:
        status = TaskStatus.WAITING if group_spec.inputs else TaskStatus.SCHEDULING
        request = gang_request_from_spec(group_spec)
        group = TaskGroup(
            workflow=workflow,
            name=group_spec.name,
            position=order[group_spec.name],
            status=status,
            upstream=list(group_spec.inputs),
            constraint_tree=tree_to_json(group_spec.tree),
            scheduling_since=now if status == TaskStatus.SCHEDULING else None,
            task_requests=task_requests_to_json(request),
            signature=gang_signature(request),
        )
        groups.append(group)
    bulk_insert(TaskGroup, groups, keys=True)
    position = 0
    for group, group_spec in zip(groups, spec.groups, strict=True):
        for task_spec in group_spec.tasks:
            resource = task_spec.resource_spec
            tasks.append(
                Task(
                    workflow=workflow,
                    group=group,
                    name=task_spec.name,
                    position=position,
                    lead=task_spec.lead,
                    status=group.status,
                    image=task_spec.image,
                    command=list(task_spec.command),
                    args=list(task_spec.args),
                    environment=task_spec.environment_dict(),
                    resource_name=task_spec.resource,
                    gpu=resource.gpu,
                    cpu_millis=resource.cpu,
                    memory_bytes=resource.memory,
                    storage_bytes=resource.storage,
                    nodes_excluded=list(resource.nodes_excluded),
                    topology=[entry.to_dict() for entry in resource.topology],
                )
            )
            position += 1
    bulk_insert(Task, tasks)
    label_rows_write(workflow, submission.labels)
    transitions = [StatusTransition(workflow=workflow, to_status=WorkflowStatus.PENDING, message="submitted")]
    transitions += [StatusTransition(workflow=workflow, group=g, to_status=g.status) for g in groups]
    bulk_insert(StatusTransition, transitions)
    # What the answer reads, as workflows.selectors.workflow_detail_queryset would: the rows just written.
    for group in groups:
        group.tasks_in_order = [task for task in tasks if task.group is group]
    workflow.groups_in_order = groups
    workflow.history_in_order = transitions
    workflow.tags_in_order = []
    return workflow


@transaction.atomic
def workflow_cancel(*, workflow_pk: int, user: User) -> Workflow:
    """Cancel every unfinished group: FAILED_CANCELED, capacity released, pods deleted, and a
    placement cycle requested so that waiting work can use the freed capacity. ``workflow_pk``: the
    workflow's primary key (its ``workflow_id`` is unique only per owner; callers resolve it with
    :func:`workflows.selectors.workflow_by_id`)."""
    workflow = Workflow.objects.select_for_update().get(pk=workflow_pk)
    if not workflow.can_cancel():
        raise WorkflowNotCancellableError(workflow.workflow_id, workflow.status)
    message = f"canceled by {user.get_username()}"
    for group in workflow.groups.exclude(status__in=TASK_TERMINAL_STATUSES).order_by("position"):
        group.refresh_from_db(fields=["status"])  # failing an earlier group may have failed this one upstream
        if group.status not in TASK_TERMINAL_STATUSES:
            group_fail(group, TaskStatus.FAILED_CANCELED, message=message)
    workflow_status_refresh(workflow, message=message)
    # Listed after the tasks were failed, under the workflow lock: every task that may have a pod,
    # whether its dispatch was recorded or not (a worker killed after creating a pod and before
    # recording it leaves such a pod). A pod created later by a racing dispatch is deleted by the
    # dispatch itself, and the pool's pod sync deletes any pod whose task is no longer active.
    jobs.pods_delete_request(tasks_with_pods(workflow.tasks.all()))
    jobs.placement_cycle_request(workflow.pool_id)
    return workflow
