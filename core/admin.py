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

    class Media:
        css = {"all": ["css/admin_times.css"]}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._exact, self._help = {}, {}
        for field in self.model._meta.concrete_fields:
            if isinstance(field, models.DateTimeField):
                self._exact[field.name] = f"exact_{field.name}"
                setattr(self, f"exact_{field.name}", _exact_column(field, self.get_empty_value_display()))
                if field.help_text:
                    self._help[f"exact_{field.name}"] = field.help_text

    def _exactly(self, names) -> list:
        shown = (self._exact.get(name, name) if isinstance(name, str) else name for name in names)
        return list(dict.fromkeys(shown))  # a field both in the form and read-only: once

    def get_list_display(self, request):
        return self._exactly(super().get_list_display(request))

    def get_fields(self, request, obj=None):
        return self._exactly(super().get_fields(request, obj))

    def get_readonly_fields(self, request, obj=None):
        return self._exactly(super().get_readonly_fields(request, obj))

    # The fields' help texts under their columns: the change page reads them from the form's Meta.
    def get_form(self, request, obj=None, **kwargs):  # a ModelAdmin's
        return super().get_form(request, obj, **self._helped(kwargs))

    def get_formset(self, request, obj=None, **kwargs):  # an inline's
        return super().get_formset(request, obj, **self._helped(kwargs))

    def _helped(self, kwargs: dict) -> dict:
        return kwargs | {"help_texts": self._help | (kwargs.get("help_texts") or {})}


def _exact_column(field: models.DateTimeField, empty: str):
    @admin.display(description=field.verbose_name, ordering=field.name)
    def column(obj) -> str:
        moment = getattr(obj, field.attname)
        return empty if moment is None else to_the_second(moment)  # empty: the admin's "-", as for the field itself

    return column
