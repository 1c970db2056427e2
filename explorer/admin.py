from __future__ import annotations

from django.contrib import admin

from explorer.models import Entry, ImportProblem, Leaf, Session


class LeafInline(admin.TabularInline):
    model = Leaf
    extra = 0
    readonly_fields = ("name", "user", "entry_id", "updated")
    can_delete = False


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = (
        "display_name",
        "session_id",
        "agent",
        "cwd",
        "entry_count",
        "modified",
        "imported_by",
    )
    list_filter = ("agent",)
    search_fields = ("session_id", "name", "cwd")
    readonly_fields = [f.name for f in Session._meta.fields]
    inlines = [LeafInline]

    def get_queryset(self, request):
        from explorer.queries.entries import with_first_message

        return with_first_message(super().get_queryset(request))  # titles without a query each

    def has_add_permission(self, request) -> bool:
        return False  # sessions come from import, never from hand-made rows

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Entry)
class EntryAdmin(admin.ModelAdmin):
    list_display = ("entry_id", "type", "role", "session", "position", "author")
    list_filter = ("type",)
    search_fields = ("entry_id",)
    list_select_related = ("session",)
    exclude = ("raw_bytes",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # raw history is never changed

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ImportProblem)
class ImportProblemAdmin(admin.ModelAdmin):
    list_display = ("session", "line", "severity", "code", "message")
    list_filter = ("severity", "code")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


# Users with their role: one admin screen creates a user and gives the role; the group list
# stays where roles are changed later.
from django import forms  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.admin import UserAdmin  # noqa: E402
from django.contrib.auth.forms import AdminUserCreationForm  # noqa: E402

from explorer.permissions import ADMIN, EDITOR, ROLES, VIEWER, role_of, set_role  # noqa: E402

User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)

ROLE_HELP = {
    VIEWER: "Viewer — reads every session",
    EDITOR: "Editor — also edits context, labels, cursors and runs turns",
    ADMIN: "Admin — also imports, deletes and manages users",
}


class UserWithRoleCreationForm(AdminUserCreationForm):
    """The admin's "add user" form with the role on it: before, a new user had no role
    until a second screen put them in a group, and a forgotten second step left an
    account that could sign in and see nothing."""

    role = forms.ChoiceField(
        choices=[(r, ROLE_HELP[r]) for r in ROLES],
        initial=VIEWER,
        widget=forms.RadioSelect,
        help_text="Admins also get staff status, so they can manage users here.",
    )


@admin.register(User)
class RoleUserAdmin(UserAdmin):
    add_form = UserWithRoleCreationForm
    add_fieldsets = (
        (
            None,
            {
                "classes": ("wide",),
                "fields": ("username", "usable_password", "password1", "password2", "role"),
            },
        ),
    )
    list_display = ("username", "role", "is_active", "is_superuser", "last_login")
    list_filter = ("groups", "is_active", "is_superuser")

    @admin.display(description="Role")
    def role(self, obj) -> str:
        return role_of(obj) or "—"

    def save_related(self, request, form, formsets, change: bool) -> None:
        """After the user row exists: give the role chosen on the add form."""
        super().save_related(request, form, formsets, change)
        role = form.cleaned_data.get("role") if not change else None
        if role in ROLES:
            set_role(form.instance, role)
