from django.db.models import QuerySet
from rest_framework.pagination import LimitOffsetPagination


class OsmoLimitOffsetPagination(LimitOffsetPagination):
    """limit/offset, default 50, at most 500. Unordered querysets are a bug (pages would overlap)."""

    default_limit = 50
    max_limit = 500

    def paginate_queryset(self, queryset, request, view=None):
        if isinstance(queryset, QuerySet) and not queryset.ordered:
            raise ValueError(f"{view.__class__.__name__ if view else 'view'}: paginating an unordered queryset")
        return super().paginate_queryset(queryset, request, view)
