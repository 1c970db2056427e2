"""Roles are Django groups: "viewer" reads, "editor" may append (context edits, labels,
names, branch summaries, compaction), "admin" imports, deletes and manages users. A superuser
is an admin. Checks live in views (never only in templates), since a client can request any
partial directly."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.models import AnonymousUser, Group
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

VIEWER = "viewer"
EDITOR = "editor"
ADMIN = "admin"
ROLES = (VIEWER, EDITOR, ADMIN)
_RANK = {None: 0, VIEWER: 1, EDITOR: 2, ADMIN: 3}


class ShareReader(AnonymousUser):
    """Whoever reads through a share link (``views.share``): no account, reads as a viewer
    within the link's scope. Still anonymous (``is_authenticated`` is False), so it owns no
    cursor, and every write view refuses it before its role is asked; only the share
    dispatcher, which serves GETs alone, ever sets it."""

    def __init__(self, link) -> None:
        super().__init__()
        self.share_link = link


def role_of(user) -> str | None:
    """Highest role of ``user`` (None for anonymous users and users without a role)."""
    if isinstance(user, ShareReader):
        return VIEWER
    if user is None or isinstance(user, AnonymousUser) or not user.is_authenticated:
        return None
    if not user.is_active:
        return None
    if user.is_superuser:
        return ADMIN
    cached = getattr(user, "_explorer_role", "unset")
    if cached != "unset":
        return cached
    names = set(user.groups.values_list("name", flat=True))
    role = next((r for r in (ADMIN, EDITOR, VIEWER) if r in names), None)
    user._explorer_role = role
    return role


def has_role(user, role: str) -> bool:
    return _RANK[role_of(user)] >= _RANK[role]


def can_edit(user) -> bool:
    return has_role(user, EDITOR)


def can_edit_model(user, session) -> bool:
    """Whether ``user`` is offered edits of what the model sees (context edits, compaction,
    turns, Undo, branch summaries) on ``session``: an editor, on a Pi session. A Claude Code or
    Codex session keeps what its agent sent; its labels, names, comments and archives are site
    data and stay with :func:`can_edit`."""
    return can_edit(user) and session.agent == "pi"


def can_admin(user) -> bool:
    return has_role(user, ADMIN)


# What the admin role may do in the Django admin (migration 0005 granted the same when the
# groups were first made): a group made again later (a restored or flushed database) must
# not leave admins staff without the right to manage users.
ADMIN_PERMISSIONS = (
    ("auth", "user", ("add", "change", "delete", "view")),
    ("auth", "group", ("view",)),
    ("explorer", "session", ("view", "delete")),
    ("explorer", "entry", ("view",)),
    ("explorer", "importproblem", ("view",)),
)


def ensure_groups() -> None:
    """The role groups exist, and a newly made admin group holds its permissions."""
    from django.contrib.auth.models import Permission

    for name in ROLES:
        group, created = Group.objects.get_or_create(name=name)
        if created and name == ADMIN:
            for app_label, model, actions in ADMIN_PERMISSIONS:
                codenames = [f"{action}_{model}" for action in actions]
                group.permissions.add(
                    *Permission.objects.filter(
                        content_type__app_label=app_label, codename__in=codenames
                    )
                )


def set_role(user, role: str | None) -> None:
    """Give ``user`` exactly one role group (or none). Admins get staff status so they can
    manage users in the Django admin."""
    ensure_groups()
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    if role:
        user.groups.add(Group.objects.get(name=role))
    if hasattr(user, "_explorer_role"):
        del user._explorer_role


def sync_admin_staff(
    sender, instance, action: str, pk_set=None, reverse: bool = False, **kwargs
) -> None:
    """``m2m_changed`` receiver: joining the admin group grants staff status (the Django
    admin needs it), whoever assigned the group."""
    if action != "post_add" or reverse or not pk_set:
        return
    if Group.objects.filter(pk__in=pk_set, name=ADMIN).exists() and not instance.is_staff:
        instance.is_staff = True
        instance.save(update_fields=["is_staff"])


def _require(role: str) -> Callable:
    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs):
            if not request.user.is_authenticated:
                from django.contrib.auth.views import redirect_to_login

                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"This needs the {role} role.")
            return view(request, *args, **kwargs)

        wrapped.required_role = role  # type: ignore[attr-defined]
        return wrapped

    return decorator


def viewer_required(view: Callable) -> Callable:
    return _require(VIEWER)(view)


def editor_required(view: Callable) -> Callable:
    """Every method needs editor: these views are write forms, and a form its reader cannot
    submit (or a dry run that may call a paid model) is no use to a viewer."""
    return _require(EDITOR)(view)


def admin_required(view: Callable) -> Callable:
    """Every method needs admin (import, delete)."""
    return _require(ADMIN)(view)


def get_session_for_user(request: HttpRequest, pk: int):
    """The session ``pk`` if the user may see it, else 404 (no role → 404, not 403, so the
    existence of sessions is not revealed)."""
    from explorer.models import Session

    if not has_role(request.user, VIEWER):
        from django.http import Http404

        raise Http404("No such session")
    return get_object_or_404(Session, pk=pk)


def role_context(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    role = role_of(user)
    return {
        "user_role": role,
        "can_edit": _RANK[role] >= _RANK[EDITOR],
        "can_admin": _RANK[role] >= _RANK[ADMIN],
        "share": getattr(request, "share_link", None),
    }
