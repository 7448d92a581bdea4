"""Admin pieces shared by the apps."""
from django.contrib import admin
from django.db import models

from core.times import to_the_second


class ReadOnlyAdminMixin:
    """Audit records: visible in the admin, never added, changed or deleted there."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ExactTimesMixin:
    """Every time of the model to the second with its zone ("2026-12-01 22:04:07 UTC",
    core.times), on the change list and the change page, where the admin's own format says
    "Dec. 1, 2026, 10 p.m.". Each DateTimeField named in the list, the fields or the read-only
    fields is shown through a column of its own, `exact_<name>`, sorted by the field. For read-only
    admins (ReadOnlyAdminMixin): a form would need the field itself."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._exact = {}
        for field in self.model._meta.concrete_fields:
            if isinstance(field, models.DateTimeField):
                self._exact[field.name] = f"exact_{field.name}"
                setattr(self, f"exact_{field.name}", _exact_column(field))

    def _exactly(self, names) -> list:
        shown = (self._exact.get(name, name) if isinstance(name, str) else name for name in names)
        return list(dict.fromkeys(shown))  # a field both in the form and read-only: once

    def get_list_display(self, request):
        return self._exactly(super().get_list_display(request))

    def get_fields(self, request, obj=None):
        return self._exactly(super().get_fields(request, obj))

    def get_readonly_fields(self, request, obj=None):
        return self._exactly(super().get_readonly_fields(request, obj))


def _exact_column(field: models.DateTimeField):
    @admin.display(description=field.verbose_name, ordering=field.name)
    def column(obj):
        moment = getattr(obj, field.attname)
        return None if moment is None else to_the_second(moment)  # None: the admin's "-"

    return column
