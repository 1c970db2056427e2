"""The figures stored with each entry when it arrives: its route's figures (:class:`RouteFigure`),
its place in the tree's chains (:class:`Segment`, :class:`SegmentEntry`), a compaction's
survival check (:class:`SurvivalCheck`), a multi-MB line's row texts (:class:`BigLineText`) and the
files its tool calls name (:class:`FileUse`). Written by the entry writers only, never
invalidated (an entry's route never changes). Apart from ``explorer.models`` by topic; that
module re-exports them, so ``from explorer.models import RouteFigure`` keeps working.
"""

from __future__ import annotations

from django.db import models


class RouteFigure(models.Model):
    """The figures of the route from the root to one entry, written with the entry.

    An entry's route never changes (sessions only grow, parents never move), so these are
    computed once from the parent's row plus the entry (``explorer.session.route_figures``)
    and never invalidated: a page reads a row instead of walking and parsing a route. A
    table of its own rather than columns on :class:`Entry`: a migration test at an old state
    never meets them, and the entry table's rows (with their raw lines) stay as they were.
    ``explorer.route_store`` writes and reads them.
    """

    # No cascade from the entry: entries are deleted only with their session, which deletes
    # these rows too; a cascade here would make Django load every entry of a deleted
    # session instead of deleting them with one statement.
    entry = models.OneToOneField(
        "explorer.Entry",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        primary_key=True,
        related_name="figures",
    )
    session = models.ForeignKey("explorer.Session", on_delete=models.CASCADE, related_name="+")
    depth = models.IntegerField(help_text="Entries above this one on its route")
    turns = models.IntegerField(help_text="User messages on the route")
    responses = models.IntegerField(help_text="Entries recording a spend on the route")
    input = models.BigIntegerField()
    output = models.BigIntegerField()
    cache_read = models.BigIntegerField()
    cache_write = models.BigIntegerField()
    unpriced = models.IntegerField(help_text="Responses without a recorded cost")
    tokens = models.FloatField(help_text="Provider-reported tokens of every request")
    cost = models.FloatField(help_text="Provider-recorded cost of every request")
    tool_calls = models.IntegerField()
    compaction_id = models.CharField(max_length=200, null=True, blank=True)
    edit_id = models.CharField(max_length=200, null=True, blank=True)
    prev_edit_id = models.CharField(max_length=200, null=True, blank=True)
    role = models.CharField(max_length=64, blank=True, default="")
    text_size = models.IntegerField(help_text="Characters of the entry's readable text")
    context_tokens = models.FloatField(
        null=True, help_text="Projected-context estimate (pisession context); null for NaN"
    )
    usage_tokens = models.FloatField(null=True, help_text="Trusted provider usage, if any")
    trailing = models.FloatField(null=True, help_text="Estimates after that usage; null for NaN")
    pending_targets = models.TextField(
        blank=True, default="", help_text="JSON list of edit targets not yet in the session"
    )
    big_usage = models.TextField(
        blank=True, default="", help_text="JSON of the exact usage sums past a BIGINT, else empty"
    )
    every_estimate = models.FloatField(
        null=True, help_text="Every message of the projected context estimated; null for NaN"
    )
    messages = models.IntegerField(
        default=0, help_text="Messages of the projected context (the live meter's count)"
    )
    # Added by 0033: what a part of the route adds up to, as the difference of two rows.
    cost_partials = models.TextField(
        null=True,
        blank=True,
        help_text="Exact sum of the route's costs (exactsum partials, JSON); NULL: not exact",
    )
    message_entries = models.IntegerField(default=0, help_text="Entries of type message")
    file_use_entries = models.IntegerField(
        default=0, help_text="Entries naming a file (with a FileUse row)"
    )

    def __str__(self) -> str:
        return f"figures of entry {self.entry_id}"


class Segment(models.Model):
    """A run of entries each the child of the one before: the tree kept as its chains.

    Written with the entries (``explorer.segment_store``) and never moved: an entry joins its
    parent's segment when the parent is the tail, else heads a new one hanging at
    (``parent_segment``, ``parent_offset``). A route is then a short list of segments, and
    the tree's shape is read from these rows, about one per branch, not one per entry.
    """

    session = models.ForeignKey("explorer.Session", on_delete=models.CASCADE, related_name="+")
    head = models.ForeignKey(
        "explorer.Entry", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    head_position = models.IntegerField(help_text="File position of the first entry")
    parent_segment = models.ForeignKey(
        "self", null=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    parent_offset = models.IntegerField(null=True, help_text="The parent's place in its segment")
    length = models.IntegerField(help_text="Entries in the segment")
    missing_parent = models.CharField(
        max_length=200, null=True, blank=True, help_text="A root's parent id, never stored"
    )

    class Meta:
        indexes = [models.Index(fields=["session", "head_position"], name="segment_session_head")]

    def __str__(self) -> str:
        return f"segment {self.pk} of session {self.session_id}"


class SegmentEntry(models.Model):
    """An entry's place in the tree's segments (none: a repeated id's later line, or an
    entry whose parents loop, which the tree leaves out)."""

    entry = models.OneToOneField(
        "explorer.Entry",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        primary_key=True,
        related_name="+",
    )
    session = models.ForeignKey("explorer.Session", on_delete=models.CASCADE, related_name="+")
    segment = models.ForeignKey(
        "explorer.Segment",
        null=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    offset = models.IntegerField(null=True)

    class Meta:
        indexes = [models.Index(fields=["segment", "offset"], name="segmententry_seg_off")]

    def __str__(self) -> str:
        return f"entry {self.entry_id} at {self.segment_id}:{self.offset}"


class SurvivalCheck(models.Model):
    """The survival check of a compaction or a branch summary (which references of the
    history it replaced its summary kept), written with the entry and never invalidated.

    The check reads only what lies above the entry (the replaced entries, the summary, for a
    branch summary the route it summarised), which never changes: computed once when the
    entry is stored (an import, an append), it spares every Compactions page a pass over the
    replaced text (multi-MB tool outputs included). Its values are read masked, as a page
    shows them, so the row holds the masking it was read with (``mask``); a page under
    another (a finding marked a false positive since, new rules) checks the entry itself, as
    it does an entry without a row. ``explorer.survival_store`` writes and reads them.

    A compaction's row also holds its summary beside the previous compaction's on its route
    (``previous``: a word diff and the references dropped). Both summaries lie above the
    entry, so that comparison never changes either; it was the one part of the Compactions
    page still kept in a cache.
    """

    # No cascade from the entry, as for RouteFigure: entries go only with their session.
    entry = models.OneToOneField(
        "explorer.Entry",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        primary_key=True,
        related_name="survival_check",
    )
    session = models.ForeignKey("explorer.Session", on_delete=models.CASCADE, related_name="+")
    report = models.TextField(help_text="The report's items as JSON: [kind, value, kept, partial]")
    mask = models.CharField(
        max_length=64,
        help_text="The masking it was read with (survival_store.mask_stamp): another one, and "
        "the page checks the entry itself",
    )
    # Added by 0032 (nullable, so SQLite adds the column without rebuilding the table).
    previous = models.TextField(
        null=True,
        blank=True,
        help_text="A compaction's summary beside the previous compaction's on its route, as "
        "JSON (survival_store.encode_previous; JSON null: none before it); NULL: not stored, "
        "the page compares them itself",
    )

    def __str__(self) -> str:
        return f"Survival check of entry {self.entry_id}"


class BigLineText(models.Model):
    """The texts the rows of Raw vs projected, Compare and Compactions show of one multi-MB
    line (titles, role, previews: a few hundred characters), written with the entry.

    A line never changes, so what a row shows of it is computed once when it is stored
    (``explorer.line_text_store.TextWriter``, from the import's batches and the appends) and
    spares every page that lists it a parse of megabytes. The texts are masked as a page
    shows them, so the row holds the masking it was read with (``mask``); a page under
    another, or for a line without a row, parses the line itself, as for a short line.
    """

    # No cascade from the entry, as for RouteFigure: entries go only with their session.
    entry = models.OneToOneField(
        "explorer.Entry",
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        primary_key=True,
        related_name="big_line_text",
    )
    session = models.ForeignKey("explorer.Session", on_delete=models.CASCADE, related_name="+")
    texts = models.TextField(
        help_text="analysis.line_texts.line_texts of the masked entry, as JSON"
    )
    mask = models.CharField(
        max_length=64,
        help_text="The masking it was read with (survival_store.mask_stamp): another one, and "
        "the page parses the line itself",
    )

    def __str__(self) -> str:
        return f"Row texts of entry {self.entry_id}"


class FileUse(models.Model):
    """The files one entry's tool calls read and modify, written with the entry.

    Only entries that name a file have a row (most have none). Compare's "files read and
    modified" of a route after the common ancestor then reads these rows for the replies
    that called tools instead of parsing each one (thousands on a long route, some of
    them multi-MB). What an entry names never changes, so a row is never invalidated.
    Keyed by the entry's position in its session's file, like the entry's own unique
    index, so a route's calling positions are looked up without the entry table.
    ``explorer.file_use_store`` writes and reads them.
    """

    session = models.ForeignKey("explorer.Session", on_delete=models.CASCADE, related_name="+")
    position = models.IntegerField(help_text="The entry's position in the session's file")
    uses = models.TextField(
        help_text='JSON list of ["read" | "modified", path], in call order (describe.file_uses)'
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="fileuse_unique_pos")
        ]

    def __str__(self) -> str:
        return f"file uses at {self.position} of session {self.session_id}"
