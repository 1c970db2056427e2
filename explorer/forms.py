"""One form per action. Engine errors become form errors at this edge: a view asks a form
whether its input is valid and performs it, and never sees a ``SessionError``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from django import forms

from explorer import conf, files, queries, services
from explorer.analysis.compare import common_ancestor_index
from explorer.session.compaction import prepare_compaction
from explorer.session.describe import entry_message, entry_text
from explorer.session.errors import SessionError
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
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class ImportForm(forms.Form):
    files = MultipleFileField(
        label="Session files",
        help_text="One or more Pi session files (.jsonl).",
    )

    def import_all(self, user, limit: int) -> list[tuple[str, files.ImportResult]]:
        """Import every uploaded file, each in its own transaction; (name, result) each."""
        outcomes = []
        for uploaded in self.cleaned_data["files"]:
            if uploaded.size > limit:
                result = files.refused(
                    "too_large",
                    f"{uploaded.name} is {uploaded.size:,} bytes; the limit is {limit:,} bytes "
                    "(setting SESSIONS_MAX_UPLOAD_BYTES).",
                )
            elif hasattr(uploaded, "temporary_file_path"):
                # Big uploads already sit in a temporary file: import it line by line.
                result = services.import_file(
                    uploaded.temporary_file_path(), source_path=uploaded.name, user=user
                )
            else:
                result = services.import_bytes(
                    uploaded.read(), source_path=uploaded.name, user=user
                )
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

    def __init__(self, data=None, *, session, user, cursor: str | None, target_entry=None):
        super().__init__(data)
        self.session = session
        self.user = user
        self.cursor = cursor
        self.target_entry = target_entry

    def apply(self) -> str:  # pragma: no cover - every action defines it
        raise NotImplementedError

    def perform(self) -> str | None:
        """Validate and write; the success message, or None with the reasons in
        :meth:`error_messages`."""
        if not self.is_valid():
            return None
        try:
            return self.apply()
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

        result = services.append_via_manager(self.session, user, self.cursor, append)
        edit_id = result.entries[0].entry_id if result.entries else ""
        done = "hidden" if replacement is None else "replaced"
        return f"Context edit {edit_id} appended: {done} {target}."


class UndoForm(ActionForm):
    """Undo an edit by appending a restoring edit (the original content as replacement)."""

    target = forms.CharField()

    def apply(self) -> str:
        target = self.cleaned_data["target"]
        restore = {"content": original_content(self.target_entry or {})}
        services.add_context_edit(self.session, self.user, target, restore, leaf_id=self.cursor)
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
        services.set_label(self.session, self.user, target, label or None, leaf_id=self.cursor)
        return f"Label {'set to “' + label + '”' if label else 'cleared'} on {target}."


class RenameForm(ActionForm):
    """Name the session (a ``session_info`` entry; the engine sanitises the name)."""

    name = forms.CharField(required=False, strip=False)

    def apply(self) -> str:
        name = (self.cleaned_data.get("name") or "")[:500]
        services.rename_session(self.session, self.user, name, leaf_id=self.cursor)
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
        choices=[("none", "none"), ("auto", "auto"), ("custom", "custom")], required=False
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
        if mode != "custom" or not text:
            from explorer.session.branch_summary import generate_branch_summary

            res = generate_branch_summary(abandoned, conf.summarizer())
            if res.error or res.aborted or not res.summary:
                raise SessionError(res.error or "Branch summarization was aborted")
            text, details, usage = res.summary, res.details, res.usage
        services.branch_with_summary(
            self.session, self.user, target, text, details=details, usage=usage,
            leaf_id=self.cursor,
        )  # fmt: skip
        return f"Moved to {target} with a branch summary of {len(abandoned)} entries."


class CompactForm(ActionForm):
    """Compact the route at the cursor; ``keep_recent`` is the reviewer's choice."""

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

    def settings(self) -> CompactionSettings:
        value = None
        if self.is_bound and self.is_valid():
            value = self.cleaned_data.get("keep_recent")
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
        services.compact_now(self.session, self.user, leaf_id=self.cursor, settings=self.settings())
        return "Compaction appended."
