"""Task templates in the Django admin (``routing.admin`` imports this module, which registers
it): the message, its typed variables, its target and configuration, checked on save with the
same rules the API renders by (``routing.task_templates``)."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from routing import task_templates
from routing.models import TaskTemplate


class TaskTemplateForm(forms.ModelForm):
    class Meta:
        model = TaskTemplate
        fields = [
            "id",
            "name",
            "description",
            "text",
            "variables",
            "agent",
            "team",
            "workflow",
            "configuration",
        ]

    def clean_configuration(self):
        configuration = self.cleaned_data.get("configuration")
        if not isinstance(configuration, dict):
            raise forms.ValidationError("must be a JSON object (a SendMessageConfiguration)")
        return configuration

    def clean(self):
        cleaned = super().clean()
        chosen = [name for name in ("agent", "team", "workflow") if cleaned.get(name)]
        if len(chosen) != 1:
            raise forms.ValidationError(
                "Choose one target the template is sent to: an agent, a team or a workflow."
            )
        text, declared = cleaned.get("text"), cleaned.get("variables")
        if text is not None and declared is not None:
            try:
                task_templates.check(text, declared)
            except task_templates.VariableError as error:
                field = "text" if error.name == "text" else "variables"
                self.add_error(field, str(error))
        return cleaned


@admin.register(TaskTemplate)
class TaskTemplateAdmin(admin.ModelAdmin):
    form = TaskTemplateForm
    list_display = ("id", "name", "agent", "team", "workflow", "updated_at")
    search_fields = ("id", "name", "text")
    list_select_related = ("agent", "team", "workflow")
    autocomplete_fields = ("agent",)
    readonly_fields = ("created_at", "updated_at")
