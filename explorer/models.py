"""Database mirror of Pi session files.

Each stored line keeps its original text (``Entry.raw``), so exports are byte-identical and
unknown fields survive; the other columns are an index of what pages query, parsed once at
import. Rows are only ever added: a context edit, a label or a rename is a new ``Entry``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from explorer.dbtext import VisibleCharField, VisibleTextField
from explorer.secrets import redact_entry
from explorer.session import jsonfmt
from explorer.titles import session_title, session_title_parts


class ReadyManager(models.Manager):
    """Sessions every page may show: not one whose import is still running.

    A new session's import commits its entries in batches (so no import holds the database's
    write lock for minutes, ``explorer.files``); until the last batch commits, the session
    is ``importing`` and nothing but the importer sees it. This is the default manager, so a
    page, a search, a list or an append that asks for sessions never gets a half-imported one.
    """

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().filter(state=Session.READY)


class Session(models.Model):
    READY = "ready"
    IMPORTING = "importing"

    session_id = VisibleCharField(max_length=200, unique=True, help_text="Header id")
    version = models.IntegerField(default=3, help_text="Version after migration (always 3)")
    source_version = models.IntegerField(default=3, help_text="Version of the imported file")
    cwd = VisibleTextField(blank=True, default="")
    header_timestamp = VisibleCharField(max_length=64, blank=True, default="")
    parent_session = VisibleTextField(blank=True, default="")
    source_path = VisibleTextField(blank=True, default="")
    header_raw = models.TextField(help_text="Header line as exported (verbatim for v3 files)")
    header_position = models.IntegerField(default=0, help_text="Line index of the header")
    name = VisibleTextField(blank=True, default="", help_text="From the newest session_info")
    entry_count = models.IntegerField(default=0)
    leaf_count = models.IntegerField(default=0)
    compaction_count = models.IntegerField(default=0)
    context_edit_count = models.IntegerField(default=0)
    # Bookkeeping for idempotent and incremental import of the same file.
    source_size = models.BigIntegerField(default=0, help_text="Bytes of the source consumed")
    source_sha256 = models.CharField(max_length=64, blank=True, default="")
    source_original = models.BinaryField(
        null=True,
        blank=True,
        editable=False,
        help_text="Original bytes of a legacy (v1/v2) file, which is stored migrated",
    )
    missing_final_newline = models.BooleanField(default=False)
    next_position = models.IntegerField(default=1)
    warning_count = models.IntegerField(default=0)
    secrets_rules = models.CharField(
        max_length=32, blank=True, default="", help_text="Secret rules version of its last scan"
    )
    created = models.DateTimeField(auto_now_add=True)
    modified = models.DateTimeField(auto_now=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="imported_sessions",
    )
    state = models.CharField(
        max_length=16,
        default=READY,
        choices=[(READY, "ready"), (IMPORTING, "importing")],
        help_text="importing: its first import is still committing batches (hidden)",
    )
    import_owner = models.CharField(
        max_length=200, blank=True, default="", help_text="host:pid of the running import"
    )
    import_heartbeat = models.DateTimeField(
        null=True, blank=True, help_text="When the running import last committed a batch"
    )
    # Whose file it is. Set when the session is created, from the stored id's prefix
    # (`formats.pi_form.stored_session_id`: "claude-code:…", "codex:…"), and never changed:
    # a column, so the list filters and counts by it with an index instead of a prefix
    # match on every id, and a Pi header id that happens to start with "codex:" imported
    # before this column existed is told apart only by it.
    agent = models.CharField(
        max_length=16,
        default="pi",
        choices=[("pi", "Pi"), ("claude-code", "Claude Code"), ("codex", "Codex")],
        help_text="Whose session file: pi, claude-code or codex",
    )
    # The exact sum of every entry's stored cost (``explorer.session.exactsum`` partials),
    # kept by the entry writers: the cost left on other branches is this less one route's,
    # rounded once, without reading every entry. Empty: not known (read the entries).
    cost_partials = models.TextField(
        blank=True, default="", help_text="Exact sum of the entries' costs (JSON partials)"
    )

    objects = ReadyManager()
    every = models.Manager()  # importing sessions too: the importer and its clean-up only

    class Meta:
        ordering = ["-modified", "-pk"]
        base_manager_name = "every"  # an entry's ``session`` is reachable whatever its state
        indexes = [
            models.Index(fields=["state"], name="session_state"),
            models.Index(fields=["agent"], name="session_agent"),
        ]

    def __str__(self) -> str:
        # The title when it is known without a query (a name, or a first message the query
        # brought); else the id: a list of rows naming their session (the admin's entries)
        # must not cost a query each.
        if self.name or hasattr(self, "first_message_raw"):
            return self.display_name
        return f"Session {self.session_id}"

    @property
    def group_name(self) -> str:
        """Channels group of everyone watching this session."""
        return f"session-{self.pk}"

    @property
    def display_name(self) -> str:
        """The session's one title, as every page, breadcrumb, import result, search hit and
        JSON ``name`` shows it: the list's rule (:func:`explorer.titles.session_title`), so
        an unnamed session is known by what it began with and its file everywhere, not by
        an id prefix many sessions share. A secret in a name or message is masked."""
        return session_title(self)

    @property
    def title_main(self) -> str:
        """The title without its file part: the list prints the file on a line of its own."""
        return session_title_parts(self)[0]

    @property
    def shown_name(self) -> str:
        """The stored name with any secret masked ("" when unnamed), for forms too."""
        if not self.name:
            return ""
        return redact_entry({"type": "session_info", "name": self.name})["name"]

    @property
    def shown_cwd(self) -> str:
        """The working directory as every page, JSON answer and form shows it: a secret in
        it is masked, as it is in the header line of a redacted export."""
        if not self.cwd:
            return ""
        return redact_entry({"type": "session", "cwd": self.cwd})["cwd"]

    def header(self) -> dict:
        return jsonfmt.loads(self.header_raw)

    @property
    def agent_notes(self) -> list[str]:
        """What its pages say about a Claude Code or Codex session's figures (estimates,
        where the projection comes from); empty for Pi sessions."""
        from explorer.session.formats.pi_form import agent_notes

        return agent_notes(self.agent)

    @property
    def agent_name(self) -> str:
        """Whose file it is, as people call the agent (Pi, Claude Code, Codex)."""
        from explorer.session.formats import AGENT_NAMES

        return AGENT_NAMES.get(self.agent, self.agent)


class EntryQuerySet(models.QuerySet):
    def children_of(self, session: Session, entry_id: str | None) -> EntryQuerySet:
        return self.filter(session=session, parent_id=entry_id).order_by("position")

    def roots(self, session: Session) -> EntryQuerySet:
        return self.filter(session=session, depth=0).order_by("position")

    def light(self) -> EntryQuerySet:
        """Everything but the raw line: lists and graphs never need the payload."""
        return self.defer("raw", "raw_bytes")


class EntryManager(models.Manager.from_queryset(EntryQuerySet)):  # type: ignore[misc]
    """Entries in file order without the model's default ``session, position`` ordering.

    Every read of entries is within one session, where that ordering is the position
    alone; spelled out, it joins the session table to sort by the session's own ordering
    on every query. The manager orders by position only (no migration: managers are not
    part of the schema)."""

    def get_queryset(self) -> EntryQuerySet:
        return super().get_queryset().order_by("position")


class Entry(models.Model):
    # No separate index on session: every composite index below starts with it.
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="entries", db_index=False
    )
    entry_id = VisibleCharField(max_length=200)
    parent_id = VisibleCharField(max_length=200, null=True, blank=True)
    type = VisibleCharField(max_length=64)
    timestamp = VisibleCharField(max_length=64, blank=True, default="")
    position = models.IntegerField(help_text="Line index in the exported file (header = 0)")
    line_no = models.IntegerField(help_text="1-based line number in the exported file")
    depth = models.IntegerField(default=0, help_text="Distance from its root")
    raw = models.TextField(help_text="The original JSON line, verbatim, without newline")
    raw_bytes = models.BinaryField(
        null=True,
        blank=True,
        editable=False,
        help_text="Original bytes when the line was not valid UTF-8",
    )
    role = VisibleCharField(max_length=64, blank=True, default="")
    custom_type = VisibleCharField(max_length=200, blank=True, default="")
    target_id = VisibleCharField(max_length=200, blank=True, default="")
    size = models.IntegerField(default=0, help_text="Bytes of the raw line")
    child_count = models.IntegerField(default=0)
    cost = models.FloatField(
        default=0.0,
        help_text="Provider-reported cost, stored when the line is (files.entry_fields)",
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who appended it in the app; empty for imported entries",
        db_index=False,
    )

    objects = EntryManager()

    class Meta:
        verbose_name_plural = "entries"
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "entry_id"], name="entry_unique_id"),
            models.UniqueConstraint(fields=["session", "position"], name="entry_unique_pos"),
        ]
        indexes = [
            models.Index(fields=["session", "parent_id", "position"], name="entry_children"),
            models.Index(fields=["session", "type", "position"], name="entry_by_type"),
            # Partial indexes: most entries have no target and are not roots, and every
            # index costs time on a 50,000-entry import.
            models.Index(
                fields=["session", "target_id"],
                name="entry_by_target",
                condition=~models.Q(target_id=""),
            ),
            models.Index(
                fields=["session", "position"], name="entry_roots", condition=models.Q(depth=0)
            ),
            # Covers the whole-session reads in file order (the tree skeleton, the integrity
            # stubs, the per-entry costs): the raw line sits between these columns in each row, so without it the
            # first read of a big session steps over every raw line (SQLite reads the whole
            # table); with it the read never leaves the index.
            models.Index(
                fields=[
                    "session",
                    "position",
                    "entry_id",
                    "parent_id",
                    "type",
                    "role",
                    "line_no",
                    "target_id",
                    "cost",
                ],
                name="entry_skeleton",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type} {self.entry_id}"

    def data(self) -> dict:
        return jsonfmt.loads(self.raw)


class ExtraLine(models.Model):
    """A line that is not a tree entry (malformed JSON, a blank line, a non-object value, an
    object without an id). Pi skips or ignores these; we keep them so nothing is lost and the
    export stays byte-identical."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="extra_lines")
    position = models.IntegerField()
    line_no = models.IntegerField()
    kind = models.CharField(max_length=32)
    raw = models.BinaryField()

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="extra_unique_pos"),
        ]


class Leaf(models.Model):
    """A named navigation cursor. Moving it appends nothing, as in the engine: the file's
    own leaf ("default") is always its last entry; each user has a private cursor."""

    DEFAULT = "default"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="leaves")
    name = models.CharField(max_length=150)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="session_cursors",
    )
    entry_id = VisibleCharField(max_length=200, null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "name"], name="leaf_unique_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name} → {self.entry_id}"


class TurnLock(models.Model):
    """The one running turn of a session, across every worker.

    A row exists while a turn runs (unique per session, so a second worker's insert fails);
    the running worker refreshes ``updated`` as a heartbeat, so a row nobody refreshed for a
    while belongs to a dead worker and may be taken over. A cancel from another worker sets
    ``cancel_requested``, which the running turn reads at its next heartbeat."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="turn_lock")
    turn_id = models.CharField(max_length=64)
    cancel_requested = models.BooleanField(default=False)
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"turn {self.turn_id} in {self.session_id}"


class ImportProblem(models.Model):
    """Warnings found when a file was imported (errors block the import and are never
    stored), kept so the session page can list them with their line numbers."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="problems")
    line = models.IntegerField()
    severity = models.CharField(max_length=16)
    code = models.CharField(max_length=64)
    message = VisibleTextField()
    entry_id = VisibleCharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["session", "line", "pk"]


class EntryTextManager(models.Manager):
    """Texts in session then file order without joining the session table: the model's
    default ordering names the session, which sorts by the session's own ordering (its
    modification time) on every query, search included. Within one session the order is
    the same; across sessions it is by the session's key (search pages order explicitly)."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().order_by("session_id", "position")


class EntryText(models.Model):
    """The visible text of one entry (what a reader sees, never its JSON keys), for search.

    Filled when entries are imported or appended, only through ``files.store_search_rows``.
    On SQLite a trigram FTS5 table over ``text`` (migration 0008; filled by that function
    since 0012, deletes and updates followed by triggers) answers substring queries; elsewhere the same rows are searched with ``icontains``."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="texts")
    entry_id = models.CharField(max_length=200)
    position = models.IntegerField()
    type = models.CharField(max_length=64)
    role = models.CharField(max_length=64, blank=True, default="")
    text = models.TextField()

    objects = EntryTextManager()

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="text_unique_pos"),
        ]

    def __str__(self) -> str:
        return f"text of {self.entry_id}"


class SecretFinding(models.Model):
    """A secret the scanner found in a stored entry: where it is and a keyed fingerprint,
    never the secret itself, so the table is safe to read. Pages show entries masked; the
    status records what the team decided (a false positive is shown in clear again)."""

    OPEN = "open"
    FALSE_POSITIVE = "false_positive"
    ROTATED = "rotated"
    STATUSES = [(OPEN, "Open"), (FALSE_POSITIVE, "False positive"), (ROTATED, "Rotated")]

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="secret_findings")
    entry_id = models.CharField(max_length=200)
    line_no = models.IntegerField(help_text="1-based line number in the exported file")
    kind = models.CharField(max_length=64)
    path = models.TextField(help_text="JSON Pointer of the string inside the entry")
    start = models.IntegerField()
    end = models.IntegerField()
    fingerprint = models.CharField(max_length=128)
    preview = models.TextField(help_text="Masked preview, safe to show")
    rules_version = models.CharField(max_length=32)
    status = models.CharField(max_length=16, choices=STATUSES, default=OPEN)
    status_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["session", "line_no", "path", "start"]
        indexes = [
            models.Index(fields=["session", "entry_id"], name="finding_by_entry"),
            models.Index(fields=["status", "session"], name="finding_by_status"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} in {self.entry_id} line {self.line_no}"


class SecretReveal(models.Model):
    """Audit: who saw which finding in clear, when, and why (the reason they gave)."""

    finding = models.ForeignKey(SecretFinding, on_delete=models.CASCADE, related_name="reveals")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    revealed_at = models.DateTimeField(auto_now_add=True)
    reason = models.TextField(blank=True, default="", help_text="Why the secret was revealed")

    class Meta:
        ordering = ["-revealed_at", "-pk"]


class AuditEvent(models.Model):
    """One action the team may have to account for later: a secret revealed, a context
    edit appended (or undone), a session deleted. Who, when, what, and the reason given.

    Kept apart from the session (no foreign key): the row outlives a deleted session and a
    deleted user, so it names both as text. Admins read the list and download it."""

    REVEAL = "reveal"
    CONTEXT_EDIT = "context_edit"
    UNDO = "undo"
    DELETE = "delete_session"
    DELETE_COMMENT = "delete_comment"
    ARCHIVE = "archive"
    UNARCHIVE = "unarchive"
    ACTIONS = [
        (REVEAL, "Secret revealed"),
        (CONTEXT_EDIT, "Context edit"),
        (UNDO, "Context edit undone"),
        (DELETE, "Session deleted"),
        (DELETE_COMMENT, "Comment deleted"),
        (ARCHIVE, "Branch archived"),
        (UNARCHIVE, "Branch unarchived"),
    ]

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    username = models.CharField(max_length=150, blank=True, default="")
    action = models.CharField(max_length=32, choices=ACTIONS)
    session_ref = models.CharField(max_length=200, blank=True, default="",
                                   help_text="The session's header id")  # fmt: skip
    session_name = models.TextField(blank=True, default="", help_text="Its name, masked")
    target = models.CharField(max_length=200, blank=True, default="",
                              help_text="The entry or finding acted on")  # fmt: skip
    what = models.TextField(blank=True, default="", help_text="What was done, in words")
    reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-at", "-pk"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.username} {self.action} {self.target}"


class ReviewComment(models.Model):
    """A reviewer's comment on one entry: site data, never written into the session file.
    A comment with no ``parent`` opens a thread; replies point at the thread's first
    comment, so a thread is one level deep and reads in time order. Resolving is recorded
    on the thread's first comment."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="review_comments")
    entry_id = VisibleCharField(max_length=200)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies"
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    body = VisibleTextField(help_text="Markdown, as typed (shown sanitised and masked)")
    created = models.DateTimeField(auto_now_add=True)
    edited = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created", "pk"]
        indexes = [
            models.Index(fields=["session", "entry_id"], name="review_by_entry"),
            models.Index(fields=["session", "parent", "resolved_at"], name="review_threads"),
        ]

    def __str__(self) -> str:
        return f"comment {self.pk} on {self.entry_id}"


class EntryReview(models.Model):
    """The review status of one entry (approved or flagged), with who set it and when."""

    APPROVED = "approved"
    FLAGGED = "flagged"
    STATUSES = [(APPROVED, "Approved"), (FLAGGED, "Flagged")]

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="entry_reviews")
    entry_id = VisibleCharField(max_length=200)
    status = models.CharField(max_length=16, choices=STATUSES)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "entry_id"], name="one_review_per_entry")
        ]

    def __str__(self) -> str:
        return f"{self.status} {self.entry_id}"


class StoredFigure(models.Model):
    """A whole-session figure as it stood at file position ``upto``, kept with the session.

    Sessions only grow, so a figure right up to a position stays right for those entries
    (``queries.grown``). The process and the shared cache keep such figures too, but both
    start empty: after an import, a restart or a cleared cache the first reader of a
    50,000-entry session would build the tree shape, the skeleton and the tree checks from
    every row again. Stored here (written by the import and again whenever the copy falls
    behind), that reader loads one row and extends it by the entries appended since."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="stored_figures")
    name = models.CharField(max_length=200)
    upto = models.IntegerField(help_text="File position the figure covers up to")
    data = models.BinaryField(help_text="The figure, pickled")
    written = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "name"], name="one_stored_figure_per_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} of session {self.session_id} up to {self.upto}"


class ReadMark(models.Model):
    """How far a reader has looked at a session: the newest position shown on their last
    visit. Pages mark what arrived after it ("new since you last looked"); the visit itself
    is recorded by a POST the page sends once shown (a GET never writes)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="read_marks")
    position = models.IntegerField(help_text="Newest entry position the reader was shown")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "session"], name="read_mark_once"),
        ]


class ShareLink(models.Model):
    """A read-only link to a session or to one route, for readers without an account.

    Only the SHA-256 of the token is kept: the token itself is shown once, to its creator,
    so a copy of the database (a backup, a leaked dump) opens no share. Revoking sets
    ``revoked_at``; the row stays so the admin list and the view log keep their history."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="share_links")
    token_hash = models.CharField(max_length=64, unique=True, help_text="sha256 of the token")
    leaf_id = VisibleCharField(
        max_length=200, blank=True, default="", help_text="Route scope: the route's leaf"
    )
    with_reviews = models.BooleanField(default=False, help_text="Readers see the review threads")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    views = models.IntegerField(default=0, help_text="Pages read through the link")
    last_viewed = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self) -> str:
        return f"share {self.pk} of session {self.session_id}"

    @property
    def scope(self) -> str:
        return f"route to {self.leaf_id}" if self.leaf_id else "whole session"


class ShareView(models.Model):
    """One request read through a share link: when, from which address, which page."""

    link = models.ForeignKey(ShareLink, on_delete=models.CASCADE, related_name="view_log")
    at = models.DateTimeField(auto_now_add=True)
    address = models.CharField(max_length=64, blank=True, default="")
    path = models.CharField(max_length=300, blank=True, default="")
    user_agent = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["-at", "-pk"]


class ArchivedBranch(models.Model):
    """A subtree an editor set aside (an abandoned attempt): the branch starting at
    ``entry_id`` is hidden from the pages unless asked for. Site data only: the session file
    is never written, and deleting the row (unarchive) restores every page as it was."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="archived")
    entry_id = VisibleCharField(max_length=200, help_text="First entry of the archived branch")
    reason = VisibleTextField(help_text="Why the branch was set aside")
    archived_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    archived_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "entry_id"], name="archived_branch_once"),
        ]

    def __str__(self) -> str:
        return f"branch {self.entry_id} of session {self.session_id} (archived)"


class CodexFork(models.Model):
    """A Codex fork file (`session_meta.forked_from_id`) and its original bytes.

    In the app a fork joins its parent's stored tree as a branch, its replayed prefix stored
    once (`explorer.codex_forks`); its own file is still exported byte for byte from here,
    since the session it joined exports the parent's file. Until the parent is stored,
    ``session`` is empty and the fork is a session of its own."""

    thread_id = VisibleCharField(max_length=200, unique=True, help_text="The fork's thread id")
    parent_thread_id = VisibleCharField(
        max_length=200, db_index=True, help_text="forked_from_id: the parent thread"
    )
    source_path = VisibleTextField(blank=True, default="")
    original = models.BinaryField(help_text="The fork file's bytes, exported unchanged")
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="codex_forks",
        help_text="The parent's stored session the fork joined (empty: not joined yet)",
    )
    modified = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"Codex fork {self.thread_id} of {self.parent_thread_id}"


# The figures stored with each entry, by topic in their own module (re-exported here).
from explorer.figure_models import (  # noqa: E402, F401
    BigLineText,
    FileUse,
    RouteFigure,
    Segment,
    SegmentEntry,
    SurvivalCheck,
)
