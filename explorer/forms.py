"""One form per action. Engine errors become form errors at this edge: a view asks a form
whether its input is valid and performs it, and never sees a ``SessionError``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django import forms
from django.core import signing

from explorer import conf, files, queries, services
from explorer.agent_import import import_agent_bytes, is_agent_file
from explorer.analysis.compare import common_ancestor_index
from explorer.models import AuditEvent, SecretFinding, Session
from explorer.session.compaction import CompactionResult, prepare_compaction
from explorer.session.describe import entry_message, entry_text
from explorer.session.errors import SessionError
from explorer.session.formats import detect_bytes
from explorer.session.sentinel import UNSET
from explorer.session.tokens import DEFAULT_COMPACTION_SETTINGS, CompactionSettings


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault(
            "widget",
            MultipleFileInput(
                attrs={"accept": ".jsonl,application/jsonl,application/x-ndjson,text/plain"}
            ),
        )
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if not data and self.required:
            raise forms.ValidationError("Choose at least one session file.", code="required")
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class ImportForm(forms.Form):
    files = MultipleFileField(
        label="Session files",
        help_text="One or more Pi, Claude Code or Codex session files (.jsonl).",
        # An empty file gets its own result card ("empty, nothing imported"), like any other
        # file that is not a session, instead of failing the whole form.
        allow_empty_file=True,
    )

    def import_all(
        self, user, limit: int, progress_token: str = ""
    ) -> list[tuple[str, files.ImportResult]]:
        """Import every uploaded file, each in its own transaction; (name, result) each.

        ``progress_token``: the page's name for this upload, under which the importer
        publishes entries and bytes while it streams (polled by the page).
        """
        outcomes = []
        for uploaded in self.cleaned_data["files"]:
            progress = None
            if progress_token:
                progress = services.import_progress_tracker(
                    user, progress_token, uploaded.name, uploaded.size
                )
            if uploaded.size == 0:
                result = files.refused(
                    "empty",
                    f"{uploaded.name} is empty (0 bytes): not a Pi session, nothing imported.",
                )
            elif uploaded.size > limit:
                result = files.refused(
                    "too_large",
                    f"{uploaded.name} is {uploaded.size:,} bytes; the limit is {limit:,} bytes "
                    "(setting SESSIONS_MAX_UPLOAD_BYTES).",
                )
            elif hasattr(uploaded, "temporary_file_path") and is_agent_file(
                uploaded.temporary_file_path()
            ):
                # Read by its uploaded name (a sub-agent file is told by its name), not
                # by the temporary file's.
                with open(uploaded.temporary_file_path(), "rb") as fh:
                    result = import_agent_bytes(fh.read(), name=uploaded.name, user=user)
            elif hasattr(uploaded, "temporary_file_path"):
                # Uploads sit in a temporary file (FILE_UPLOAD_HANDLERS): import it line by line.
                result = services.import_file(
                    uploaded.temporary_file_path(),
                    source_path=uploaded.name,
                    user=user,
                    progress=progress,
                )
            else:
                data = uploaded.read()
                if detect_bytes(data[: 1024 * 1024]) in ("claude-code", "codex"):
                    result = import_agent_bytes(data, name=uploaded.name, user=user)
                else:
                    result = services.import_bytes(data, source_path=uploaded.name, user=user)
            if progress is not None:
                services.import_progress_done(user, progress_token, progress)
            outcomes.append((uploaded.name, result))
        return outcomes


class ForkForm(forms.Form):
    cwd = forms.CharField(
        label="Working directory of the fork",
        required=False,
        max_length=4096,
        help_text="Leave empty to keep the session's working directory.",
    )


# ---------------------------------------------------------------------------------------------
# Actions on one session: clean() asks the engine, apply() writes through services


class ActionForm(forms.Form):
    """One action on a stored session by one user at one cursor.

    ``clean()`` checks with the engine whether the action can apply, so an engine refusal
    (``SessionError``) reaches the user as a form error, never as a 500. :meth:`perform`
    then writes through ``explorer.services`` and returns the success message; a refusal
    raised by the write itself (the session changed meanwhile) becomes a form error too.
    """

    # The leaf the page showed (empty: no entry yet) and whether its author asked to append
    # there even if the cursor has moved on since (a deliberate branch). A post without
    # ``expected_leaf`` (an older page, a script) writes at the cursor as it is under the
    # session's lock, never at the one this request read before waiting for the lock.
    expected_leaf = forms.CharField(required=False, strip=False, widget=forms.HiddenInput)
    branch = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def __init__(
        self,
        data=None,
        *,
        session,
        user,
        cursor: str | None,
        target_entry=None,
        pinned: bool = False,
    ):
        super().__init__(data)
        self.session = session
        self.user = user
        self.cursor = cursor
        self.target_entry = target_entry
        self.pinned = pinned  # the cursor is a permalink (``?leaf=``), not the user's cursor
        self.conflict: services.StaleLeaf | None = None

    def write_leaf(self) -> dict[str, Any]:
        """``leaf_id`` and ``expected_leaf`` for ``services``: the user's cursor is read again
        under the session's lock and must still be the leaf the page showed.

        Without ``expected_leaf`` the cursor is read under the lock too: the cursor this
        request read before it waited for the lock may be a leaf another writer has just
        built on, and writing there would fork the session behind its author's back. A
        permalink's leaf (``pinned``) is a leaf named on purpose and stays as it is."""
        if self.data is None or "expected_leaf" not in self.data:
            return {"leaf_id": self.cursor} if self.pinned else {"leaf_id": UNSET}
        expected = self.data.get("expected_leaf") or None
        if self.data.get("branch") in ("1", "on", "true"):
            return {"leaf_id": expected}
        if self.pinned:
            return {"leaf_id": self.cursor, "expected_leaf": expected}
        return {"leaf_id": UNSET, "expected_leaf": expected}

    def apply(self) -> str:  # pragma: no cover - every action defines it
        raise NotImplementedError

    def perform(self) -> str | None:
        """Validate and write; the success message, or None with the reasons in
        :meth:`error_messages`."""
        if not self.is_valid():
            return None
        try:
            return self.apply()
        except services.StaleLeaf as exc:
            self.conflict = exc
            self.add_error(None, str(exc))
            return None
        except SessionError as exc:
            self.add_error(None, str(exc))
            return None

    def error_messages(self) -> list[str]:
        """Every error as one flat list, in the order the form found them."""
        if not self.is_bound:
            return []
        return [str(m) for messages in self.errors.values() for m in messages]


def _engine(fn: Callable[[], Any]) -> Any:
    """Run an engine check; its ``SessionError`` becomes this form's ``ValidationError``."""
    try:
        return fn()
    except SessionError as exc:
        raise forms.ValidationError(str(exc)) from exc


EDITABLE_ROLES = ("user", "assistant", "toolResult")
REASON_TYPE = "session-explorer/edit-reason"


def editable(entry: dict) -> bool:
    """Whether a context edit can hide or replace this entry (SPEC: user, assistant and
    tool-result messages, and custom messages, contribute editable content)."""
    if entry.get("type") == "custom_message":
        return True
    m = entry_message(entry)
    return m is not None and m.get("role") in EDITABLE_ROLES


def original_content(entry: dict) -> Any:
    """The entry's own content: what a restoring edit puts back."""
    if entry.get("type") == "custom_message":
        c = entry.get("content")
    else:
        c = (entry_message(entry) or {}).get("content")
    return c if isinstance(c, str | list) else ""


class EditForm(ActionForm):
    """Hide an entry from the model or replace its content (a ``context_edit``)."""

    target = forms.CharField()
    mode = forms.ChoiceField(choices=[("hide", "hide"), ("replace", "replace")], required=False)
    content = forms.CharField(required=False, strip=False)
    reason = forms.CharField(required=False)

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or "hide"

    def clean_reason(self) -> str:
        return (self.cleaned_data.get("reason") or "").strip()[:500]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        entry = self.target_entry or {}
        if not editable(entry):
            self.add_error(None, "This entry does not contribute editable model content.")
        if not self.on_path():
            self.add_error(
                None,
                "This entry is not on your current route; move your cursor to a leaf below "
                "it first.",
            )
        return data

    def on_path(self) -> bool:
        target = self.data.get("target", "")
        return any(e.entry_id == target for e in queries.light_path(self.session, self.cursor))

    def replacement(self) -> Any:
        """``None`` hides the target; ``{"content": …}`` replaces it."""
        if (self.data.get("mode") or "hide") == "hide":
            return None
        content = self.data.get("content")
        if content is None:
            entry = self.target_entry or {}
            original = original_content(entry)
            content = original if isinstance(original, str) else entry_text(entry)
        return {"content": content}

    def apply(self) -> str:
        target, reason = self.cleaned_data["target"], self.cleaned_data["reason"]
        replacement = self.replacement()
        user = self.user

        def append(manager: Any) -> str:
            edit_id = manager.append_context_edit(target, replacement)
            if reason:
                manager.append_custom_entry(
                    REASON_TYPE,
                    {"editId": edit_id, "targetId": target, "reason": reason, "by": user.get_username()},
                )  # fmt: skip
            return edit_id

        result = services.append_via_manager(
            self.session, user, fn=append, targets=(target,), lean=True, **self.write_leaf()
        )
        edit_id = result.entries[0].entry_id if result.entries else ""
        done = "hidden" if replacement is None else "replaced"
        services.record_audit(
            user, AuditEvent.CONTEXT_EDIT, self.session, target=target,
            what=f"Context edit {edit_id}: {done} {target}", reason=reason,
        )  # fmt: skip
        return f"Context edit {edit_id} appended: {done} {target}."


class UndoForm(ActionForm):
    """Undo an edit by appending a restoring edit (the original content as replacement)."""

    target = forms.CharField()

    def apply(self) -> str:
        target = self.cleaned_data["target"]
        restore = {"content": original_content(self.target_entry or {})}
        result = services.add_context_edit(
            self.session, self.user, target, restore, **self.write_leaf()
        )
        edit_id = result.entry.entry_id if result.entry is not None else ""
        services.record_audit(
            self.user, AuditEvent.UNDO, self.session, target=target,
            what=f"Context edit {edit_id}: restored the original content of {target}",
        )  # fmt: skip
        return f"Restored the original content of {target} (a restoring edit was appended)."


class LabelForm(ActionForm):
    """Set or clear an entry's label (a ``label`` entry)."""

    target = forms.CharField()
    label = forms.CharField(required=False)
    clear = forms.BooleanField(required=False)

    def current(self) -> str:
        return queries.current_labels(self.session).get(self.data.get("target", ""), "")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        label = "" if data.get("clear") else (data.get("label") or "").strip()[:200]
        data["label"] = label
        current, target = self.current(), data.get("target", "")
        if label == current:
            # Appending a label entry that changes nothing would only grow the history.
            raise forms.ValidationError(
                f"{target} already has the label “{label}”."
                if label
                else f"{target} has no label to clear."
            )
        return data

    def apply(self) -> str:
        target, label = self.cleaned_data["target"], self.cleaned_data["label"]
        services.set_label(self.session, self.user, target, label or None, **self.write_leaf())
        return f"Label {'set to “' + label + '”' if label else 'cleared'} on {target}."


class RenameForm(ActionForm):
    """Name the session (a ``session_info`` entry; the engine sanitises the name)."""

    name = forms.CharField(required=False, strip=False)

    def apply(self) -> str:
        name = (self.cleaned_data.get("name") or "")[:500]
        services.rename_session(self.session, self.user, name, **self.write_leaf())
        return "Session renamed." if name.strip() else "Session name cleared."


class CursorForm(ActionForm):
    """Move one's own cursor to an entry: any reader may, since it appends nothing."""

    target = forms.CharField()

    def clean_target(self) -> str:
        target = self.cleaned_data["target"]
        if not queries.entry_exists(self.session, target):
            raise forms.ValidationError(f"This session has no entry {target[:80]!r}.")
        return target

    def apply(self) -> str:
        target = self.cleaned_data["target"]
        services.move_cursor(self.session, self.user, target)
        return f"Cursor moved to {target}."


class NavigateForm(ActionForm):
    """Move the cursor to another entry, optionally leaving a branch summary behind."""

    target = forms.CharField()
    summary = forms.ChoiceField(
        choices=[("none", "none"), ("embedded", "embedded"), ("custom", "custom")], required=False
    )
    summary_text = forms.CharField(required=False)

    def abandoned(self) -> list[dict]:
        """The entries the move leaves behind (what a branch summary covers)."""
        old, target = self.cursor, self.data.get("target", "")
        if not old:
            return []
        lo, lt = queries.light_path(self.session, old), queries.light_path(self.session, target)
        k = common_ancestor_index([e.entry_id for e in lo], [e.entry_id for e in lt])
        return queries.full_path(self.session, lo[k + 1 :])

    def apply(self) -> str:
        target = self.cleaned_data["target"]
        mode = self.cleaned_data.get("summary") or "none"
        abandoned = self.abandoned()
        if mode == "none" or not abandoned:
            services.move_cursor(self.session, self.user, target)
            return f"Cursor moved to {target}."
        text = (self.cleaned_data.get("summary_text") or "").strip()
        details = usage = None
        from explorer.session.branch_summary import generate_branch_summary, unusable_target

        refused = unusable_target(self.target_entry)
        if refused:  # refused before a summary is asked for, as Pi places no summary there
            raise SessionError(f"Entry {target} {refused}")
        if mode != "custom" or not text:
            res = generate_branch_summary(abandoned, conf.summarizer())
            if res.error or res.aborted or not res.summary:
                raise SessionError(res.error or "Branch summarization was aborted")
            text, details, usage = res.summary, res.details, res.usage
        services.branch_with_summary(
            self.session, self.user, target, text, details=details, usage=usage,
            **self.write_leaf(),
        )  # fmt: skip
        return f"Moved to {target} with a branch summary of {len(abandoned)} entries."


class CompactForm(ActionForm):
    """Compact the route at the cursor with exactly the summary a preview showed.

    ``keep_recent`` is the reviewer's choice. The preview is computed once (a summary may
    come from a model and differ on every call) and travels in the Apply form, signed together
    with the session's version and the cursor (field ``previewed``): Apply stores that summary, or refuses when
    there was no preview or the session changed since.
    """

    SALT = "explorer.compact-preview"

    keep_recent = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=10_000_000,
        error_messages={
            "invalid": "Keep recent tokens must be a whole number.",
            "min_value": "Keep recent tokens must be between 0 and 10,000,000.",
            "max_value": "Keep recent tokens must be between 0 and 10,000,000.",
        },
    )
    previewed = forms.CharField(required=False, widget=forms.HiddenInput)

    def settings(self) -> CompactionSettings:
        """The engine's settings with the reviewer's tail: the typed value whenever it is a
        valid number, even when the action itself is refused (the form shows it again)."""
        if self.is_bound and self._errors is None:
            self.full_clean()
        value = getattr(self, "cleaned_data", {}).get("keep_recent")
        defaults = DEFAULT_COMPACTION_SETTINGS
        keep = defaults.keep_recent_tokens if value is None else value
        return replace(defaults, keep_recent_tokens=keep)

    def route(self) -> tuple[list, list[dict]]:
        light = queries.light_path(self.session, self.cursor)
        path, _ = queries.context_path(self.session, light)
        return light, path

    def preparation(self) -> Any:
        """The engine's cut point for these settings (None: nothing to compact)."""
        _light, path = self.route()
        return prepare_compaction(path, self.settings())

    def stamp(self) -> str:
        """The session version and cursor a preview belongs to."""
        return f"{queries.content_key(self.session)}|{self.cursor or ''}"

    def sign(self, result: CompactionResult) -> str:
        """The preview as a signed token for the Apply form (the summary cannot be altered)."""
        return signing.dumps(
            {"stamp": self.stamp(), "result": result.to_json()}, salt=self.SALT, compress=True
        )

    def clean_previewed(self) -> CompactionResult | None:
        token = self.cleaned_data.get("previewed") or ""
        if not token:
            return None
        try:
            data = signing.loads(token, salt=self.SALT)
        except signing.BadSignature as exc:
            raise forms.ValidationError("The preview was altered: preview again.") from exc
        if data.get("stamp") != self.stamp():
            raise forms.ValidationError(
                "The session changed since the preview (or the cursor moved): the summary "
                "shown no longer describes it. Preview again before applying."
            )
        r = data["result"]
        return CompactionResult(
            r["summary"], r["firstKeptEntryId"], r["tokensBefore"], r.get("usage"), r["details"]
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        light, path = self.route()
        settings = self.settings()
        if _engine(lambda: prepare_compaction(path, settings)) is None:
            already = bool(light) and light[-1].type == "compaction"
            raise forms.ValidationError(
                "Already compacted"
                if already
                else "Nothing to compact (session too small) while keeping the newest "
                f"{settings.keep_recent_tokens:,} tokens: try a smaller value."
            )
        return data

    def apply(self) -> str:
        result = self.cleaned_data.get("previewed")
        if result is None:
            raise SessionError("Preview the summary first: Apply stores exactly what it shows.")
        services.store_compaction(self.session, self.user, result, **self.write_leaf())
        return "Compaction appended with the previewed summary."


class ContextWindowForm(forms.Form):
    """The context window and reserve a raw-vs-projected page is judged against (GET).

    A window below 1,000 tokens or a reserve that leaves no room (threshold ≤ 0) describes
    no real model: it is refused with a message instead of being silently replaced. Without
    either, the page is judged against the configured window and reserve (:meth:`defaults`),
    the ones the Live meter and auto-compaction use.
    """

    window = forms.IntegerField(
        required=False,
        min_value=1_000,
        max_value=10_000_000,
        error_messages={
            "invalid": "The context window must be a whole number of tokens.",
            "min_value": "The context window must be between 1,000 and 10,000,000 tokens.",
            "max_value": "The context window must be between 1,000 and 10,000,000 tokens.",
        },
    )
    reserve = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=10_000_000,
        error_messages={
            "invalid": "The reserve must be a whole number of tokens.",
            "min_value": "The reserve must be between 0 and 10,000,000 tokens.",
            "max_value": "The reserve must be between 0 and 10,000,000 tokens.",
        },
    )

    @staticmethod
    def defaults() -> tuple[int, int]:
        """(window, reserve) when the query names none: the configured ones
        (``SESSIONS_CONTEXT_WINDOW``, ``SESSIONS_COMPACTION``), which the Live meter and the
        turn runner's auto-compaction judge against. A window of the page's own (200,000
        once) said "not needed" where the meter was over its threshold."""
        return conf.window_and_reserve()

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        window, reserve = data.get("window"), data.get("reserve")
        default_window, default_reserve = self.defaults()
        w = default_window if window is None else window
        r = default_reserve if reserve is None else reserve
        if not self.errors and r >= w:
            raise forms.ValidationError(
                f"The reserve ({r:,}) must be smaller than the context window ({w:,}): "
                "otherwise the compaction threshold would be zero or negative."
            )
        return data

    def values(self) -> tuple[int, int]:
        """(window, reserve): the valid choice, or the defaults when the input was refused."""
        default_window, default_reserve = self.defaults()
        if self.is_valid():
            w = self.cleaned_data.get("window")
            r = self.cleaned_data.get("reserve")
            return (default_window if w is None else w, default_reserve if r is None else r)
        return default_window, default_reserve

    def error_messages(self) -> list[str]:
        return [str(m) for errors in self.errors.values() for m in errors]


class FindingStatusForm(forms.Form):
    """An editor's decision on one secret finding: still open, a false positive (shown in
    clear from then on), or rotated (the credential was replaced; still masked)."""

    status = forms.ChoiceField(choices=SecretFinding.STATUSES)

    def __init__(self, *args, finding: SecretFinding, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.finding = finding
        self.user = user

    def apply(self) -> SecretFinding:
        return services.set_finding_status(self.finding, self.user, self.cleaned_data["status"])


class RevealFindingForm(forms.Form):
    """Show one finding's secret in clear, once; the reveal is recorded before it is shown.
    A form (a POST with its CSRF token) so a link or a prefetch can never reveal, and a
    second step: the reader confirms and says why (the reason is kept with the reveal and
    in the audit list), so no click alone shows a secret."""

    confirm = forms.BooleanField(required=True)
    reason = forms.CharField(
        max_length=500, strip=True,
        error_messages={"required": "Say why you need to see this secret."},
    )  # fmt: skip

    def __init__(self, *args, finding: SecretFinding, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.finding = finding
        self.user = user

    def apply(self) -> str | None:
        return services.reveal_finding(self.finding, self.user, self.cleaned_data["reason"])


# ---------------------------------------------------------------------------------------------
# Review comments (site data; viewers may comment, only the author or an admin edits)

COMMENT_MAX = 20_000


class CommentForm(forms.Form):
    """A new thread on an entry, or (``parent``) a reply in a thread."""

    entry = forms.CharField(max_length=200, required=False)
    parent = forms.IntegerField(required=False)
    body = forms.CharField(max_length=COMMENT_MAX, strip=True)

    def __init__(self, *args, session: Session, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.session = session
        self.user = user

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        parent_pk = data.get("parent")
        data["parent_obj"] = None
        if parent_pk:
            data["parent_obj"] = queries.get_comment(self.session, parent_pk)
            if data["parent_obj"] is None:
                raise forms.ValidationError("That thread does not exist in this session.")
        elif not queries.entry_exists(self.session, data.get("entry")):
            raise forms.ValidationError("That entry does not exist in this session.")
        return data

    def apply(self):
        d = self.cleaned_data
        return services.add_comment(
            self.session, self.user, d.get("entry") or "", d["body"], parent=d["parent_obj"]
        )


class CommentEditForm(forms.Form):
    """New text for a comment; ``delete`` removes it instead."""

    body = forms.CharField(max_length=COMMENT_MAX, strip=True, required=False)
    delete = forms.BooleanField(required=False)

    def __init__(self, *args, comment, user=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.comment = comment
        self.user = user

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not data.get("delete") and not data.get("body"):
            raise forms.ValidationError("A comment needs some text (or delete it).")
        return data

    def apply(self) -> None:
        if self.cleaned_data.get("delete"):
            services.delete_comment(self.comment, self.user)
        else:
            services.edit_comment(self.comment, self.cleaned_data["body"])


class ResolveForm(forms.Form):
    """Resolve a thread, or open it again (``reopen``)."""

    reopen = forms.BooleanField(required=False)

    def __init__(self, *args, comment, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.comment = comment
        self.user = user

    def apply(self):
        return services.resolve_thread(
            self.comment, self.user, resolved=not self.cleaned_data.get("reopen")
        )


class EntryReviewForm(forms.Form):
    """Approve or flag an entry; an empty status clears it."""

    entry = forms.CharField(max_length=200)
    status = forms.ChoiceField(choices=[("", "None"), ("approved", "Approved"), ("flagged", "Flagged")], required=False)  # fmt: skip

    def __init__(self, *args, session: Session, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.session = session
        self.user = user

    def clean_entry(self) -> str:
        entry = self.cleaned_data["entry"]
        if not queries.entry_exists(self.session, entry):
            raise forms.ValidationError("That entry does not exist in this session.")
        return entry

    def apply(self):
        d = self.cleaned_data
        return services.set_entry_review(self.session, self.user, d["entry"], d["status"])
