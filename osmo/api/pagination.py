from django.db.models import QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination


class OsmoLimitOffsetPagination(LimitOffsetPagination):
    """limit/offset, default 50, at most 500. Unordered querysets are a bug (pages would overlap).

    A ``limit`` or ``offset`` that is not a whole number (``offset=null``, ``limit=-1``) is refused with
    400 naming it, as the OpenAPI schema declares them integers (DRF's own class ignores them).

    A view may answer its list's ``count`` itself, more cheaply than counting the filtered queryset:
    ``list_count()``, the exact count or ``None`` when it cannot."""

    default_limit = 50
    max_limit = 500
    max_offset = 10**9
    view_count = None

    def _whole_number(self, request, name: str, *, minimum: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None:
            return None
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or not minimum <= value <= self.max_offset or not raw.strip().lstrip("+").isdigit():
            raise ValidationError({name: [f"must be a whole number from {minimum} to {self.max_offset}, "
                                          f"not {raw[:40]!r}"]})
        return value

    def get_limit(self, request):
        limit = self._whole_number(request, self.limit_query_param, minimum=1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request):
        offset = self._whole_number(request, self.offset_query_param, minimum=0)
        return offset or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            minimum = 1 if parameter["name"] == self.limit_query_param else 0
            parameter["schema"] = {**parameter["schema"], "minimum": minimum, "maximum": self.max_offset}
        return parameters

    def paginate_queryset(self, queryset, request, view=None):
        if isinstance(queryset, QuerySet) and not queryset.ordered:
            raise ValueError(f"{view.__class__.__name__ if view else 'view'}: paginating an unordered queryset")
        self.view_count = getattr(view, "list_count", None)
        return super().paginate_queryset(queryset, request, view)

    def get_count(self, queryset):
        counted = self.view_count() if self.view_count is not None else None
        return super().get_count(queryset) if counted is None else counted
