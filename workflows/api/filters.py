import django_filters

from workflows.choices import WorkflowStatus
from workflows.models import Workflow


class WorkflowFilterSet(django_filters.FilterSet):
    # distinct=False: status is a column of the workflow itself (no join can repeat a row), and a
    # DISTINCT over every column made the first page of a deep queue cost two full sorts.
    status = django_filters.MultipleChoiceFilter(choices=WorkflowStatus.choices, distinct=False)
    pool = django_filters.CharFilter(field_name="pool__name")
    user = django_filters.CharFilter(field_name="submitted_by__username")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = Workflow
        fields = ["status", "pool", "user", "name"]
