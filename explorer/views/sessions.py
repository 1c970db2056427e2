"""Session list, import, export, fork, branch download and delete."""

from __future__ import annotations

import os

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import (
    Http404,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponsePermanentRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from explorer import archives, conf, files, queries, read_marks, services
from explorer.forms import ForkForm, ImportForm
from explorer.models import ImportProblem, Session
from explorer.permissions import (
    admin_required,
    can_admin,
    editor_required,
    get_session_for_user,
    viewer_required,
)
from explorer.session.errors import SessionError
from explorer.views.common import HtmxHttpRequest
from explorer.views.jsonapi import json_page, problem_rows, wants_json

PROBLEMS_SHOWN = 200


@login_not_required
@require_GET
def healthz(request: HtmxHttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@login_not_required
@require_GET
def favicon(request: HtmxHttpRequest) -> HttpResponse:
    """Browsers ask for ``/favicon.ico`` by themselves (for a JSON or SVG answer opened on
    its own, say); send them to the pages' own icon rather than a 404 in every console."""
    from django.templatetags.static import static

    return HttpResponsePermanentRedirect(static("explorer/favicon.svg"))


@viewer_required
@require_GET
def session_list(request: HtmxHttpRequest) -> HttpResponse:
    from explorer.agent_import import filter_by_agent
    from explorer.queries.listing import SORTS, list_path_totals, list_row_labels, search_sessions
    from explorer.session.formats import AGENT_NAMES
    from explorer.titles import first_message_text

    q = request.GET.get("q", "").strip()
    sort = request.GET.get("sort", "activity")
    sort = sort if sort in SORTS else "activity"
    # Search covers the first user message too; groups keep the order of their best session.
    agent = request.GET.get("agent", "")
    agent = agent if agent in AGENT_NAMES else ""
    sessions = list(
        search_sessions(filter_by_agent(Session.objects.all(), agent), q, sort).defer(
            "header_raw", "source_original"
        )
    )
    totals = list_path_totals(sessions)
    new = read_marks.new_counts(request.user, sessions)
    archives.mark_totals(sessions)  # the Entries / Leaves totals leave archived branches out
    groups: dict[str, list[Session]] = {}
    for s in sessions:
        s.new_count = new.get(s.pk, 0)
        s.first_message = first_message_text(s)
        s.labels = list_row_labels(s)
        s.path_totals = totals[s.pk]
        groups.setdefault(s.shown_cwd, []).append(s)
    if wants_json(request):
        return json_page(
            {
                "query": q,
                "sort": sort,
                "agent": agent or None,
                "sessions": [_session_json(request, s) for s in sessions],
            }
        )
    context = {
        "groups": [{"cwd": cwd, "sessions": items} for cwd, items in groups.items()],
        "total": len(sessions),
        "q": q,
        "sort": sort,
        "sorts": [(k, v[1]) for k, v in SORTS.items()],
        "agent": agent,
        "agents": list(AGENT_NAMES.items()),
    }
    return render(request, "explorer/session_list.html", context)


def _session_json(request: HtmxHttpRequest, s: Session) -> dict:
    from django.urls import reverse

    return {
        "id": s.session_id,
        "pk": s.pk,
        "agent": s.agent,
        "name": s.display_name,
        "cwd": s.shown_cwd,
        "created": s.header_timestamp or None,
        "last_activity": s.last_activity,
        "entries": s.entry_count,
        "leaves": s.leaf_count,
        "compactions": s.compaction_count,
        "context_edits": s.context_edit_count,
        "warnings": s.warning_count,
        "new": s.new_count,  # entries since the reader's last visit (0 when never opened)
        "first_message": s.first_message or None,
        "file_name": s.labels["file_name"] or None,
        "fork_of": s.labels["fork_of_full"] or None,
        "default_path_usage": s.path_totals,
        "url": request.build_absolute_uri(reverse("explorer:session_detail", args=[s.pk])),
    }


# ---------------------------------------------------------------------------------------------
# Import


def _wants_fragment(request: HtmxHttpRequest) -> bool:
    return request.headers.get("X-Upload") == "1" or bool(request.htmx)


def _too_large(request: HtmxHttpRequest) -> bool:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return False
    # Allow for the multipart envelope around the file itself.
    return length > settings.SESSIONS_MAX_UPLOAD_BYTES + 64 * 1024


@admin_required
def import_view(request: HtmxHttpRequest) -> HttpResponse:
    limit = settings.SESSIONS_MAX_UPLOAD_BYTES
    context = {"form": ImportForm(), "limit": limit, "results": []}
    if request.method == "GET":
        return render(request, "explorer/import.html", context)
    if request.method != "POST":
        return HttpResponseNotAllowed(["GET", "POST"])
    if _too_large(request):
        result = files.refused(
            "too_large",
            f"The upload is larger than the limit of {limit:,} bytes (setting "
            "SESSIONS_MAX_UPLOAD_BYTES); nothing was imported. Several files are uploaded one "
            "by one from the page; without JavaScript, send fewer files at once.",
        )
        return _import_response(request, context, [("upload", result)], status=413)
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        if _wants_fragment(request):
            # The page's script shows the answer inside one file's card: never a whole page.
            result = files.refused("invalid", " ".join(form.errors.get("files", ["Bad upload."])))
            return _import_response(request, context, [("upload", result)], status=400)
        context["form"] = form
        return render(request, "explorer/import.html", context, status=400)
    token = _progress_token(request.headers.get("X-Upload-Token", ""))
    outcomes = form.import_all(request.user, limit, progress_token=token)
    failed = any(not r.ok for _n, r in outcomes)
    return _import_response(request, context, outcomes, status=422 if failed else 200)


def _progress_token(raw: str) -> str:
    """The page's random name for one upload (hex only, bounded), or "" for none."""
    raw = raw.strip()
    return raw if 16 <= len(raw) <= 64 and all(c in "0123456789abcdef" for c in raw) else ""


@admin_required
@require_GET
def import_progress_view(request: HtmxHttpRequest, token: str) -> HttpResponse:
    """Entries and bytes the running import of upload ``token`` has done (polled by the
    import page while the server processes a big file)."""
    state = queries.import_progress(request.user, _progress_token(token))
    return json_page(state or {"phase": "waiting", "entries": 0, "bytes": 0, "total": 0})


def _import_response(request, context, outcomes, *, status: int) -> HttpResponse:
    results = []
    for name, result in outcomes:
        problems = result.problems
        results.append(
            {
                "name": name,
                "result": result,
                "errors": [p for p in problems if p.severity == "error"][:PROBLEMS_SHOWN],
                "warnings": [p for p in problems if p.severity == "warning"][:PROBLEMS_SHOWN],
                "hidden": max(0, len(problems) - 2 * PROBLEMS_SHOWN),
            }
        )
    context["results"] = results
    template = (
        "explorer/import.html#import-results"
        if _wants_fragment(request)
        else ("explorer/import.html")
    )
    return render(request, template, context, status=status)


# ---------------------------------------------------------------------------------------------
# Export and derived sessions


def _attachment(chunks, filename: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@viewer_required
@require_GET
def export_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    # A Claude Code or Codex session exports its own file, byte for byte (its stored Pi form
    # with ?form=pi); a legacy (v1/v2) Pi file as uploaded with ?original=1.
    foreign = session.agent != "pi" and request.GET.get("form") != "pi"
    if request.GET.get("fork"):
        # A Codex fork file that joined this session's tree: its own bytes, unchanged.
        fork = get_object_or_404(session.codex_forks, thread_id=request.GET["fork"])
        name = os.path.basename(fork.source_path) or f"{fork.thread_id}.jsonl"
        return _masked_unless_admin(request, session, [bytes(fork.original)], name)
    if request.GET.get("original") == "1" or foreign:
        # A legacy (v1/v2) file as it was uploaded, before migration.
        original = (
            Session.objects.filter(pk=session.pk).values_list("source_original", flat=True).first()
        )
        if original is None:
            raise Http404("Only legacy-version sessions keep a separate original file")
        return _masked_unless_admin(
            request, session, [bytes(original)], "original-" + files.export_filename(session)
        )
    if request.GET.get("archived") == "without":
        # The second download: the session without its archived branches (README).
        from explorer.archives import iter_without_archived

        return _masked_unless_admin(
            request,
            session,
            iter_without_archived(session),
            "without-archived-" + files.export_filename(session),
        )
    return _masked_unless_admin(
        request, session, files.iter_export(session), files.export_filename(session)
    )


def _masked_unless_admin(request: HtmxHttpRequest, session: Session, chunks, filename: str):
    """Admins download the stored bytes; everyone else the same session with each secret
    masked (still a valid session file), and the response says so."""
    if can_admin(request.user):
        return _attachment(chunks, filename)
    allow = queries.allowed_fingerprints(session)
    masked = files.redact_chunks(chunks, allow=allow, key=conf.secrets_key())
    response = _attachment(masked, "redacted-" + filename)
    response["X-Secrets-Redacted"] = "true"
    return response


@viewer_required
def branch_download(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: download root → leaf as a new session file. POST (editor): store it as a new
    session instead."""
    session = get_session_for_user(request, pk)
    leaf_id = (request.GET.get("leaf") or request.POST.get("leaf") or "").strip()
    if not leaf_id:
        leaf_id = queries.cursor_id(session, request.user) or ""
    if request.method == "POST":
        return _branch_to_session(request, session, leaf_id)
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "POST"])
    try:
        data = files.branch_bytes(session, leaf_id)
    except SessionError as exc:
        raise Http404(str(exc)) from None
    return _masked_unless_admin(
        request, session, [data], f"branch-{leaf_id[:16]}-{files.export_filename(session)}"
    )


@editor_required
def _branch_to_session(request: HtmxHttpRequest, session: Session, leaf_id: str) -> HttpResponse:
    try:
        new = services.branch_session(session, request.user, leaf_id)
    except (SessionError, ValueError) as exc:
        messages.error(request, f"Could not create the branched session: {exc}")
        return redirect("explorer:session_detail", session.pk)
    if session.agent != "pi":
        messages.success(
            request,
            f"Continued the {session.agent_name} route ending at {leaf_id} as a Pi session: "
            "edit, compact and continue it here.",
        )
        return redirect("explorer:session_detail", new.pk)
    messages.success(request, f"Created a new session from the route ending at {leaf_id}.")
    return redirect("explorer:session_detail", new.pk)


@editor_required
def fork_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    if request.method == "GET":
        if wants_json(request):
            return json_page(
                {"session": session.pk, "name": session.display_name, "cwd": session.cwd}
            )
        return render(request, "explorer/fork.html", {"session": session, "form": ForkForm()})
    if request.method != "POST":
        return HttpResponseNotAllowed(["GET", "POST"])
    form = ForkForm(request.POST)
    if not form.is_valid():
        return render(request, "explorer/fork.html", {"session": session, "form": form}, status=400)
    cwd = form.cleaned_data["cwd"].strip() or None
    if cwd == session.shown_cwd:
        cwd = None  # the form's default, masked when it holds a secret: the same directory
    new = services.fork_session(session, request.user, cwd=cwd)
    messages.success(request, f"Forked “{session.display_name}” into a new session.")
    return redirect("explorer:session_detail", new.pk)


@admin_required
def delete_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    if request.method == "GET":
        if wants_json(request):
            return json_page(
                {
                    "session": session.pk,
                    "name": session.display_name,
                    "entries": session.entry_count,
                }
            )
        return render(request, "explorer/delete.html", {"session": session})
    if request.method != "POST":
        return HttpResponseNotAllowed(["GET", "POST"])
    name = session.display_name
    services.delete_session(session, request.user)
    messages.success(request, f"Deleted “{name}”.")
    return redirect("explorer:session_list")


@viewer_required
@require_GET
def problems_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    ctx = problems_context(session)
    if wants_json(request):
        return json_page({"total": ctx["total"], "problems": problem_rows(ctx["problems"])})
    return render(request, "explorer/problems.html", ctx)


def problems_context(session: Session) -> dict:
    """The import warnings the page and its JSON list (the first thousand, and how many)."""
    problems = ImportProblem.objects.filter(session=session)
    return {"session": session, "problems": list(problems[:1000]), "total": problems.count()}


__all__ = [
    "branch_download",
    "delete_view",
    "export_view",
    "fork_view",
    "healthz",
    "import_progress_view",
    "import_view",
    "problems_view",
    "require_POST",
    "session_list",
]
