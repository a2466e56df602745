"""Workflows in the Django admin (``routing.admin`` imports this module, which registers it).

A workflow is edited on one page: its name, version and description, and its top-level steps
in an inline, each step a YAML mapping (with the steps nested inside it, if any). The inline's
formset reads every row and checks the whole workflow as an import does
(``services.workflow_check``): a problem appears on the row of the step it is in, or above
the rows. The save is one write (``services.workflow_store``), which rewrites the YAML
source the API exports."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.utils.html import format_html

from registry.services import actor_of
from routing.models import Workflow, WorkflowStep
from routing.workflows import services
from routing.workflows.definition import WorkflowInvalid, load_yaml

_FORM_VALID = "_workflow_form_valid"


class WorkflowStepForm(forms.ModelForm):
    class Meta:
        model = WorkflowStep
        fields = ["position", "source"]
        widgets = {
            "source": forms.Textarea(attrs={"rows": 4, "cols": 70, "class": "vLargeTextField"})
        }

    def clean_source(self):
        text = self.cleaned_data["source"]
        try:
            step = load_yaml(text)
        except WorkflowInvalid as invalid:
            raise ValidationError(str(invalid)) from None
        if not isinstance(step, dict):
            raise ValidationError("a step is a mapping such as agent: NAME")
        self.step = step
        return text


class WorkflowStepFormSet(BaseInlineFormSet):
    """The steps as submitted; :meth:`clean` checks the whole workflow with them."""

    document: dict | None = None

    def rows(self) -> list[forms.ModelForm]:
        """The kept rows, by position (empty last), then as submitted."""
        kept = [
            form
            for form in self.forms
            if form.has_changed() or form.instance.pk
            if not self._should_delete_form(form)
        ]
        return sorted(
            kept,
            key=lambda form: (
                form.cleaned_data.get("position") is None,
                form.cleaned_data.get("position") or 0,
            ),
        )

    def clean(self):
        super().clean()
        workflow = self.instance
        if not getattr(workflow, _FORM_VALID, False) or any(form.errors for form in self.forms):
            return
        rows = self.rows()
        if not rows:
            raise ValidationError("A workflow needs at least one step.")
        document = services.workflow_document(
            name=workflow.name,
            version=workflow.version,
            description=workflow.description,
            slug=workflow.pk,
            steps=[row.step for row in rows],
        )
        _, problems = services.workflow_check(document, own_id=workflow.pk)
        general = []
        for problem in problems:
            index = _step_index(problem.where)
            if index is not None and index < len(rows):
                rows[index].add_error("source", str(problem))
            else:
                general.append(str(problem))
        if general:
            raise ValidationError(general)
        self.document = document


def _step_index(where: str) -> int | None:
    if not where.startswith("steps["):
        return None
    return int(where[len("steps[") : where.index("]")])


class WorkflowStepInline(admin.TabularInline):
    model = WorkflowStep
    form = WorkflowStepForm
    formset = WorkflowStepFormSet
    fields = ("position", "source", "step_id", "kind", "target")
    readonly_fields = ("step_id", "kind", "target")
    extra = 1


class WorkflowForm(forms.ModelForm):
    class Meta:
        model = Workflow
        fields = ["id", "name", "version", "description", "enabled"]


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    form = WorkflowForm
    inlines = [WorkflowStepInline]
    list_display = ("id", "name", "version", "enabled", "step_count", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("id", "name", "description", "steps__target")
    readonly_fields = ("yaml_source", "targets", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("id", "name", "version", "description", "enabled")}),
        (
            "As YAML",
            {
                "fields": ("yaml_source", "targets", "created_at", "updated_at"),
                "description": "What GET /a2a/workflows/{id} with Accept: application/yaml "
                "answers, rewritten on each save.",
            },
        ),
    )

    def get_readonly_fields(self, request, obj=None):
        # The id is in the workflow's URLs and in other workflows' steps: set once.
        return (*self.readonly_fields, "id") if obj is not None else self.readonly_fields

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("steps")

    @admin.display(description="Steps")
    def step_count(self, workflow: Workflow) -> int:
        return len(workflow.steps.all())

    @admin.display(description="YAML")
    def yaml_source(self, workflow: Workflow) -> str:
        return format_html("<pre>{}</pre>", workflow.source)

    def save_form(self, request, form, change):
        workflow = super().save_form(request, form, change)
        setattr(workflow, _FORM_VALID, True)
        return workflow

    def save_model(self, request, obj: Workflow, form, change: bool) -> None:
        """Nothing yet: the workflow and its steps are one write, made in
        :meth:`save_related` once the inline's steps are checked."""

    def save_related(self, request, form, formsets, change: bool) -> None:
        steps = next(formset for formset in formsets if isinstance(formset, WorkflowStepFormSet))
        services.workflow_store(
            workflow=form.instance,
            document=steps.document,
            enabled=form.cleaned_data["enabled"],
            actor=actor_of(user=request.user),
        )
        # The steps were rewritten as a whole; the admin's history names the workflow only.
        steps.new_objects, steps.changed_objects, steps.deleted_objects = [], [], []
