"""Teams in the Django admin, in routing's section ("Teams, routing and health") through the
proxy model ``routing.models.Team``; ``routing.admin`` imports this module, which registers it.

A team and its members are edited on one page (the members in an inline) and saved together by
``registry.teams``: the inline's formset checks the whole team with ``teams.team_validate``, the
same check the API's writes make, so the page says why a team cannot be saved (no default
agent, a default agent that is not an enabled member, hops outside 1..10...). Members show their
health and whether they take part in client routing; each team shows its latest conversations
with their routing traces.

The team admin was the registry's until it needed tasks and routing hops. Its permissions are
still those of ``registry.Team``, its old URL names still resolve (to the new addresses), and
its old addresses redirect (``moved_team_admin``, wired in ``relay_project.urls``).
"""

from __future__ import annotations

import math

from django import forms
from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth import get_permission_codename
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from registry import models as registry_models
from registry import selectors, services, teams
from registry.admin_display import RELAY_CSS
from registry.models import Agent, TeamMembership
from registry.services import RegistryError
from routing import selectors as routing_selectors
from routing import services as routing_services
from routing import team_checks
from routing.models import Team, TeamWorkflowMember

RECENT_CONVERSATIONS = 10

# Set by TeamAdmin.save_form on the team the formset checks: the team form's own fields are
# valid, so checking the whole team means something (when they are not, the form says why).
_TEAM_FORM_VALID = "_team_form_valid"


def _health_badge(agent: Agent) -> str:
    return render_to_string("registry/_health.html", {"agent": agent})


class TeamForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = [
            "id",
            "name",
            "description",
            "default_agent",
            "no_recipient",
            "max_routing_hops",
            "enabled",
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        default_agent = self.fields.get("default_agent")
        if default_agent is not None and not self.instance._state.adding:
            # Editing: the choice is among the stored members (a small list, so a plain select
            # rather than the registry-wide search used when adding).
            default_agent.widget = forms.Select()
            default_agent.queryset = Agent.objects.filter(
                memberships__team_id=self.instance.pk
            ).order_by("memberships__order", "id")
            default_agent.help_text = (
                "An enabled member. A member added below can be chosen once the team is saved."
            )
        elif default_agent is not None:
            default_agent.help_text = "Must be one of the enabled members below."
        no_recipient = self.fields.get("no_recipient")
        if no_recipient is not None:
            # Left out of a form (an older page, a script), the team keeps what it had.
            no_recipient.required = False

    def clean_no_recipient(self):
        return (
            self.cleaned_data.get("no_recipient")
            or self.instance.no_recipient
            or Team.NoRecipient.DEFAULT_AGENT
        )

    def clean_max_routing_hops(self):
        # Checked here too so the message sits on the field; it is team_validate's own rule.
        hops = self.cleaned_data["max_routing_hops"]
        try:
            teams.validate_max_routing_hops(hops)
        except RegistryError as error:
            raise ValidationError(error.message) from error
        return hops


class TeamMembershipForm(forms.ModelForm):
    order = forms.IntegerField(
        required=False,
        min_value=0,
        help_text="Lower first; empty puts the member after the others.",
    )

    class Meta:
        model = TeamMembership
        fields = ["agent", "order", "enabled"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance._state.adding:
            self.initial["order"] = None


class TeamMembershipFormSet(BaseInlineFormSet):
    """The team's members as submitted; :meth:`clean` checks the whole team with them."""

    def members(self) -> list[teams.MemberSpec]:
        """The submitted members, deleted rows left out, ordered by ``order`` (empty last),
        then by row."""
        rows = [
            (
                form.cleaned_data.get("order")
                if form.cleaned_data.get("order") is not None
                else math.inf,
                index,
                form.cleaned_data,
            )
            for index, form in enumerate(self.forms)
            if form.cleaned_data
            and form.cleaned_data.get("agent")
            and not form.cleaned_data.get("DELETE")
        ]
        rows.sort(key=lambda row: row[:2])
        return [
            teams.MemberSpec(data["agent"].pk, bool(data.get("enabled"))) for _, _, data in rows
        ]

    def clean(self):
        super().clean()
        team = self.instance
        if not getattr(team, _TEAM_FORM_VALID, False) or any(form.errors for form in self.forms):
            return
        try:
            teams.team_validate(
                team_id=team.pk,
                name=team.name,
                max_routing_hops=team.max_routing_hops,
                default_agent_id=team.default_agent_id,
                members=self.members(),
            )
        except RegistryError as error:
            raise ValidationError(f"The team cannot be saved: {error.message}.") from error


class TeamMembershipInline(admin.TabularInline):
    model = TeamMembership
    form = TeamMembershipForm
    formset = TeamMembershipFormSet
    fields = ("agent", "order", "enabled", "health", "client_routing")
    readonly_fields = ("health", "client_routing")
    autocomplete_fields = ("agent",)
    ordering = ("order", "agent_id")
    extra = 1
    verbose_name = "member"

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("agent")

    @admin.display(description="Health")
    def health(self, membership: TeamMembership) -> str:
        return _health_badge(membership.agent) if membership.agent_id else "—"

    @admin.display(description="Client routing", boolean=True)
    def client_routing(self, membership: TeamMembership) -> bool | None:
        return membership.agent.supports_client_routing if membership.agent_id else None


class TeamWorkflowMemberFormSet(BaseInlineFormSet):
    """The team's workflow members as submitted; a workflow whose id is one of the agent
    members' (the members inline's rows in the same form) is refused: members are named by id."""

    def workflows(self) -> list[tuple[str, int, bool]]:
        rows = [
            form.cleaned_data
            for form in self.forms
            if form.cleaned_data
            and form.cleaned_data.get("workflow")
            and not form.cleaned_data.get("DELETE")
        ]
        return [
            (data["workflow"].pk, data.get("order") or 0, bool(data.get("enabled")))
            for data in rows
        ]

    def clean(self):
        super().clean()
        agents = {
            value
            for name, value in self.data.items()
            if name.startswith("memberships-")
            and name.endswith("-agent")
            and not self.data.get(name.removesuffix("agent") + "DELETE")
        }
        for workflow_id, _, _ in self.workflows():
            if workflow_id in agents:
                raise ValidationError(
                    f"Workflow “{workflow_id}” has the id of an agent member of this team: "
                    "members are named by their ids, so one of them could never be called."
                )


class TeamWorkflowMemberInline(admin.TabularInline):
    """Workflows as members: routed to by their id as agent members are (a workflow member
    takes no part in client routing; it answers with the workflow's output)."""

    model = TeamWorkflowMember
    formset = TeamWorkflowMemberFormSet
    fields = ("workflow", "order", "enabled")
    autocomplete_fields = ("workflow",)
    ordering = ("order", "workflow_id")
    extra = 1
    verbose_name = "workflow member"

    def has_add_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("registry.change_team") or request.user.has_perm(
            "registry.add_team"
        )

    def has_change_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("registry.change_team")

    def has_delete_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("registry.change_team")

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm("registry.view_team") or self.has_change_permission(request)


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    form = TeamForm
    inlines = (TeamMembershipInline, TeamWorkflowMemberInline)
    list_display = (
        "id",
        "name",
        "default_agent_id",
        "members_at_a_glance",
        "client_routing",
        "hops",
        "enabled",
        "updated_at",
    )
    list_display_links = ("id", "name")
    list_filter = ("enabled",)
    search_fields = ("id", "name", "description")
    ordering = ("id",)
    autocomplete_fields = ("default_agent",)
    team_fieldset = (
        None,
        {
            "fields": (
                "id",
                "name",
                "description",
                "default_agent",
                "no_recipient",
                "max_routing_hops",
                "enabled",
            )
        },
    )

    class Media:
        css = RELAY_CSS

    def get_queryset(self, request):
        return selectors.teams_with_members(super().get_queryset(request))

    def get_urls(self):
        urls = super().get_urls()
        # The names of the pages from when teams were the registry's (admin:registry_team_...),
        # so links and reverse() calls made with them still work; they give the new addresses.
        old_names = [
            path(
                str(url.pattern),
                url.callback,
                name=url.name.replace("routing_team_", "registry_team_", 1),
            )
            for url in urls
            if url.name and url.name.startswith("routing_team_")
        ]
        return urls + old_names

    # -- permissions: those of registry.Team, as before the admin moved to routing --

    def _may(self, request, action: str) -> bool:
        opts = registry_models.Team._meta
        return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")

    def has_module_permission(self, request) -> bool:
        return request.user.has_module_perms(registry_models.Team._meta.app_label)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._may(request, "view") or self._may(request, "change")

    def has_add_permission(self, request) -> bool:
        return self._may(request, "add")

    def has_change_permission(self, request, obj=None) -> bool:
        return self._may(request, "change")

    def has_delete_permission(self, request, obj=None) -> bool:
        return self._may(request, "delete")

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return (self.team_fieldset,)
        return (
            (None, {"fields": ("routing_check",)}),
            self.team_fieldset,
            ("Endpoints", {"fields": ("endpoints",)}),
            ("Recent conversations", {"fields": ("recent_conversations",)}),
            ("Record", {"fields": ("created_at", "updated_at")}),
        )

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        # The id is the team's address (/a2a/teams/{id}/): it does not change.
        return (
            "routing_check",
            "id",
            "endpoints",
            "recent_conversations",
            "created_at",
            "updated_at",
        )

    # -- columns and read-only fields --

    @admin.display(description="Default agent", ordering="default_agent")
    def default_agent_id(self, team: Team) -> str:
        return team.default_agent_id

    @admin.display(description="Hops", ordering="max_routing_hops")
    def hops(self, team: Team) -> int:
        return team.max_routing_hops

    @admin.display(description="Members")
    def members_at_a_glance(self, team: Team) -> str:
        return format_html_join(
            " ",
            '<span class="health health-{}" title="{}: {}{}"><span class="dot"></span>{}{}</span>',
            (
                (
                    m.agent.health,
                    m.agent.name,
                    m.agent.get_health_display(),
                    "" if m.enabled else ", disabled in this team",
                    m.agent_id if m.enabled else format_html("<s>{}</s>", m.agent_id),
                    " ⇄" if m.agent.supports_client_routing else "",
                )
                for m in team.memberships.all()
            ),
        )

    @admin.display(description="Client routing")
    def client_routing(self, team: Team) -> str:
        members = team.memberships.all()
        routing = sum(1 for m in members if m.agent.supports_client_routing)
        warning = team_checks.routing_warning(team)
        if warning:
            return format_html(
                '{} of {} <span class="chip chip-warning" title="{}">⚠ only {} is called</span>',
                routing,
                len(members),
                warning,
                team.default_agent_id,
            )
        return f"{routing} of {len(members)}"

    @admin.display(description="Routing")
    def routing_check(self, team: Team) -> str:
        warning = team_checks.routing_warning(team)
        if warning:
            return format_html(
                '<p class="notice-warning" id="team-routing-warning">⚠ {}</p>', warning
            )
        default = next(
            (m.agent for m in team.memberships.all() if m.agent_id == team.default_agent_id), None
        )
        if default is not None and default.supports_client_routing:
            return (
                "The default agent declares client routing, so it can hand a conversation "
                "on to the other members."
            )
        return "The default agent is the only enabled member: it answers every message."

    @admin.display(description="A2A")
    def endpoints(self, team: Team) -> str:
        base = f"/a2a/teams/{team.pk}/"
        return format_html(
            '<code>{}</code> · card: <a href="{}"><code>{}</code></a> · '
            '<a href="{}">the team\'s page, with how to call it</a>',
            base,
            f"{base}.well-known/agent-card.json",
            f"{base}.well-known/agent-card.json",
            reverse("team-page", args=[team.pk]),
        )

    @admin.display(description="Latest tasks and their routing")
    def recent_conversations(self, team: Team) -> str:
        conversations = routing_selectors.team_conversations(
            team_id=team.pk, limit=RECENT_CONVERSATIONS
        )
        return render_to_string(
            "registry/_team_conversations.html", {"conversations": conversations}
        )

    # -- writes through registry.teams --

    def save_form(self, request, form, change):
        team = super().save_form(request, form, change)
        setattr(team, _TEAM_FORM_VALID, True)
        return team

    def save_model(self, request, obj: Team, form, change: bool) -> None:
        """Nothing yet: the team and its members are one write, made in :meth:`save_related`
        once the inline's members are known."""

    def save_related(self, request, form, formsets, change: bool) -> None:
        members = next(
            formset for formset in formsets if isinstance(formset, TeamMembershipFormSet)
        ).members()
        values = {
            name: form.cleaned_data[name]
            for name in ("name", "description", "max_routing_hops", "enabled", "no_recipient")
        }
        default_agent = form.cleaned_data["default_agent"].pk
        workflows = next(
            formset for formset in formsets if isinstance(formset, TeamWorkflowMemberFormSet)
        ).workflows()
        if change:
            teams.team_update(
                team=form.instance,
                fields={**values, "default_agent": default_agent, "members": members},
                actor=services.actor_of(user=request.user),
            )
            routing_services.team_workflows_set(team_id=form.instance.pk, workflows=workflows)
            return
        created = teams.team_create(
            team_id=form.cleaned_data["id"],
            default_agent=default_agent,
            members=members,
            actor=services.actor_of(user=request.user),
            **values,
        )
        # The admin goes on with the form's instance (log entry, redirect): make it the stored team.
        for field in Team._meta.concrete_fields:
            setattr(form.instance, field.attname, getattr(created, field.attname))
        form.instance._state = created._state
        routing_services.team_workflows_set(team_id=created.pk, workflows=workflows)

    def construct_change_message(self, request, form, formsets, add):
        # The formsets were not saved by the admin (the service wrote the members), so they
        # have no record of what changed; say only whether the members did.
        message = super().construct_change_message(request, form, [], add)
        if not add and any(formset.has_changed() for formset in formsets):
            message.append({"changed": {"fields": ["members"]}})
        return message

    def delete_model(self, request, obj: Team) -> None:
        teams.team_delete(team=obj, actor=services.actor_of(user=request.user))

    def delete_queryset(self, request, queryset) -> None:
        for team in queryset:
            teams.team_delete(team=team, actor=services.actor_of(user=request.user))


@staff_member_required
def moved_team_admin(request: HttpRequest, rest: str) -> HttpResponsePermanentRedirect:
    """``/admin/registry/team/...``, where the team pages were: the same page under routing's
    section. 308 keeps the method and body, so a form posted to an old address still arrives."""
    target = reverse("admin:routing_team_changelist") + rest
    if request.META.get("QUERY_STRING"):
        target += "?" + request.META["QUERY_STRING"]
    response = HttpResponsePermanentRedirect(target)
    response.status_code = 308
    return response
