from __future__ import annotations

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from explorer import diskfull, services
from explorer.agent_import import import_agent_file, is_agent_file
from explorer.files.progress import ImportProgress


def session_files(path: Path) -> list[Path]:
    """A file, a per-project directory (``--<cwd>--/*.jsonl``) or a sessions root with one
    such directory per working directory; files in byte-wise name order per directory."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise CommandError(f"{path} does not exist")
    found: list[Path] = []
    for root, dirs, files in os.walk(path, followlinks=True):
        dirs.sort()
        found.extend(Path(root) / name for name in sorted(files) if name.endswith(".jsonl"))
    return found


def is_workflow_journal(path: Path) -> bool:
    """Claude Code's workflow runs keep a `journal.jsonl` of step events beside their agent
    files (`<session>/subagents/workflows/<run>/`): JSON lines that are no session of any
    format, skipped when a project folder is walked rather than rejected."""
    return path.name == "journal.jsonl" and "workflows" in path.parts


class Command(BaseCommand):
    help = (
        "Import Pi session files or whole session directories (e.g. ~/.pi/agent/sessions), "
        "Claude Code project folders (~/.claude/projects/...) and Codex session folders "
        "(~/.codex/sessions, ~/.codex/archived_sessions). "
        "Idempotent: files imported before only add their new entries."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("paths", nargs="+", help="session files or directories")
        parser.add_argument(
            "--quiet-warnings", action="store_true", help="do not list tolerated problems"
        )
        parser.add_argument(
            "--progress",
            action="store_true",
            help="report entries and bytes on stderr while each file imports (every second)",
        )

    def _progress(self, file: Path, enabled: bool) -> ImportProgress | None:
        """A big import takes minutes: with --progress, say how far it got as it streams."""
        if not enabled:
            return None

        def report(p: ImportProgress) -> None:
            share = f" ({100 * p.bytes / p.total:.0f}%)" if p.total else ""
            self.stderr.write(
                f"{file}: {p.phase}: {p.entries:,} entries, {p.bytes:,} of {p.total:,} bytes{share}"
            )

        return ImportProgress(total=file.stat().st_size, report=report, every=1.0)

    def handle(self, *args, **options) -> None:
        failed = 0
        totals = {"created": 0, "grown": 0, "unchanged": 0}
        for raw in options["paths"]:
            given = Path(raw).expanduser()
            for file in session_files(given):
                if file != given and is_workflow_journal(file):
                    self.stdout.write(f"{file}: skipped, a Claude Code workflow journal")
                    continue
                try:
                    if is_agent_file(str(file)):
                        # Claude Code project folders and Codex session folders: each file
                        # (sub-agent and archived ones included) is its own session.
                        result = import_agent_file(str(file), source_path=str(file.resolve()))
                    else:
                        result = services.import_file(
                            str(file),
                            source_path=str(file.resolve()),
                            progress=self._progress(file, options["progress"]),
                        )
                except Exception as exc:  # the raw sqlite3 cursor's errors are not Django's
                    if diskfull.refused_for_space(exc):
                        # The file's session stays hidden (its batches are removed now, or
                        # by the next import or serve), and the next files would fail the
                        # same way. Say so instead of a traceback.
                        self.stderr.write(self.style.ERROR(f"{file}: nothing imported"))
                        raise CommandError(diskfull.MESSAGE) from exc
                    if not isinstance(exc, OSError):
                        raise
                    self.stderr.write(self.style.ERROR(f"{file}: cannot read: {exc}"))
                    failed += 1
                    continue
                if not result.ok:
                    failed += 1
                    self.stderr.write(self.style.ERROR(f"{file}: rejected, nothing imported"))
                    # Every problem, blocking ones first: the user fixes the file in one pass.
                    for p in [*result.errors, *result.warnings]:
                        self.stderr.write(f"  {p}")
                    continue
                if result.created:
                    totals["created"] += 1
                    state = f"imported {result.added} entries"
                elif result.unchanged:
                    totals["unchanged"] += 1
                    state = "unchanged"
                else:
                    totals["grown"] += 1
                    state = f"added {result.added} new entries"
                self.stdout.write(f"{file}: {state}")
                if not options["quiet_warnings"]:
                    for p in result.warnings:
                        self.stdout.write(f"  {p}")
        self.stdout.write(
            f"{totals['created']} new, {totals['grown']} grown, {totals['unchanged']} unchanged, "
            f"{failed} rejected"
        )
        if failed:
            raise CommandError(f"{failed} file(s) could not be imported")
