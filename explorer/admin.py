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
    list_display = ("display_name", "session_id", "cwd", "entry_count", "modified", "imported_by")
    search_fields = ("session_id", "name", "cwd")
    readonly_fields = [f.name for f in Session._meta.fields]
    inlines = [LeafInline]

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


# Users with their role: the group list is where roles are assigned.
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.admin import UserAdmin  # noqa: E402

from explorer.permissions import role_of  # noqa: E402

User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class RoleUserAdmin(UserAdmin):
    list_display = ("username", "role", "is_active", "is_superuser", "last_login")
    list_filter = ("groups", "is_active", "is_superuser")

    @admin.display(description="Role")
    def role(self, obj) -> str:
        return role_of(obj) or "—"
