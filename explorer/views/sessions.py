"""Session list, import, export, fork and branch download."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from explorer.models import Session
from explorer.permissions import viewer_required


@login_not_required
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@viewer_required
def session_list(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()
    sessions = Session.objects.all()
    if q:
        from django.db.models import Q

        sessions = sessions.filter(
            Q(name__icontains=q) | Q(session_id__icontains=q) | Q(cwd__icontains=q)
        )
    groups: dict[str, list[Session]] = {}
    for s in sessions.order_by("cwd", "-modified").defer("header_raw", "source_original"):
        groups.setdefault(s.cwd, []).append(s)
    context = {
        "groups": [{"cwd": cwd, "sessions": items} for cwd, items in groups.items()],
        "total": sum(len(v) for v in groups.values()),
        "q": q,
    }
    return render(request, "explorer/session_list.html", context)


@viewer_required
def session_summary(request: HttpRequest, pk: int) -> HttpResponse:
    raise NotImplementedError


import_view = export_view = branch_download = fork_view = delete_view = problems_view = (
    session_summary
)
