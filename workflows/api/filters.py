import django_filters

from workflows.choices import WorkflowStatus
from workflows.models import Workflow


class WorkflowFilterSet(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=WorkflowStatus.choices)
    pool = django_filters.CharFilter(field_name="pool__name")
    user = django_filters.CharFilter(field_name="submitted_by__username")
    name = django_filters.CharFilter(field_name="name", lookup_expr="icontains")

    class Meta:
        model = Workflow
        fields = ["status", "pool", "user", "name"]
