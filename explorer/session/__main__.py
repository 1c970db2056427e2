"""Command line: inspect Pi session files without changing them.

    python -m explorer.session show FILE
    python -m explorer.session entries FILE --json
    python -m explorer.session tree FILE --json
    python -m explorer.session context FILE [--leaf ID | --all-leaves] [--json]
    python -m explorer.session compact FILE [--leaf ID | --all-leaves] --dry-run [--show-request] [--json]
    python -m explorer.session branch-summary FILE --from LEAF --to TARGET --dry-run [--json]
    python -m explorer.session validate FILE [--json]
    python -m explorer.session stats FILE [--leaf ID | --all-leaves] [--json]
    python -m explorer.session list [DIR] [--json]

FILE may also be a Claude Code transcript or a Codex rollout (detected by content): `show`,
`entries`, `tree`, `context`, `validate` and `stats` read it by its format's rules.
Human-readable by default; `--json` prints one JSON object (or array) per line, serialized
exactly like JavaScript's JSON.stringify, with Pi's camelCase keys. The file is only read:
legacy files are migrated in memory with ids that are the same on every run.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .cli_commands import (
    branch_summary_record,
    compact_record,
    context_record,
    entries_records,
    resolve_leaves,
    tree_json,
)
from .cli_load import CliError, Inspected, load_for_inspection, read_input
from .cli_render import Style, describe_entry, render_tree, snippet
from .errors import SessionError
from .jsonfmt import dumps
from .pi_version import PI_DEFAULT, PI_VERSIONS
from .request_preview import format_request_preview

__all__ = ["build_parser", "main"]


def _leaf_text(leaf_id: Any) -> str:
    return "(none)" if leaf_id is None else str(leaf_id)


def _emit_json(out: TextIO, value: Any) -> None:
    out.write(dumps(value))
    out.write("\n")


# ---------------------------------------------------------------------------------------------
# Commands. Each returns the exit code.


def _show_foreign(inspected: Inspected, leaf_arg: str | None, out: TextIO) -> int:
    from .formats import AGENT_NAMES
    from .formats.cli import tree_roots

    session = inspected.foreign
    style = Style(out)
    leaf = resolve_leaves(inspected, leaf_arg, False)[0]
    active = {r.id for r in session.route(leaf)} if leaf is not None else set()
    title = f"{AGENT_NAMES[session.format]} session {session.session_id}"
    if session.title:
        title += f" “{session.title}”"
    out.write(style.bold(title) + "\n")
    others = len(session.records) - len(session.entries())
    details = [
        f"cwd {session.cwd}",
        f"{len(session.entries())} entries",
        f"{others} other records",
        f"leaf {_leaf_text(leaf)}",
    ]
    out.write(style.dim(" · ".join(details)) + "\n")
    for line in render_tree(tree_roots(session), active, leaf, style):
        out.write(line + "\n")
    return 0


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    inspected = load_for_inspection(args.file)
    if inspected.foreign is not None:
        return _show_foreign(inspected, args.leaf, out)
    manager = inspected.manager
    style = Style(out)
    leaf = resolve_leaves(inspected, args.leaf, False)[0]
    active = {e.get("id") for e in manager.get_branch(leaf)} if leaf is not None else set()
    header = manager.get_header() or {}
    name = manager.get_session_name()
    title = f"session {header.get('id')}"
    if name:
        title += f" “{name}”"
    out.write(style.bold(title) + "\n")
    details = [f"cwd {header.get('cwd')}", f"{len(manager.get_entries())} entries"]
    if inspected.migrated_from is not None:
        details.append(f"version {inspected.migrated_from}, migrated in memory")
    details.append(f"leaf {_leaf_text(leaf)}")
    out.write(style.dim(" · ".join(details)) + "\n")
    for line in render_tree(manager.get_tree(), active, leaf, style):
        out.write(line + "\n")
    return 0


def _entries_foreign(args: argparse.Namespace, inspected: Inspected, out: TextIO) -> int:
    from .formats.cli import entries_records as foreign_entries

    session = inspected.foreign
    records = foreign_entries(session, args.all)
    if args.json:
        _emit_json(out, records)
        return 0
    style = Style(out)
    for record in records:
        parent = record["parentId"] if record["parentId"] is not None else "-"
        found = session.get(record["id"])
        text = (
            describe_entry(found.entry)
            if found is not None and found.entry
            else record.get("kind", "")
        )
        number = record["line"]
        out.write(
            f"{style.dim(f'{number:>6}')} {record['id']} {style.dim(f'← {parent}')} "
            f"{style.dim(record['recordType'])} {text}\n"
        )
    return 0


def cmd_entries(args: argparse.Namespace, out: TextIO) -> int:
    inspected = load_for_inspection(args.file)
    if inspected.foreign is not None:
        return _entries_foreign(args, inspected, out)
    records = entries_records(inspected)
    if args.json:
        _emit_json(out, records)
        return 0
    style = Style(out)
    lines = inspected.line_numbers[1:]  # the header is not an entry
    for i, (record, entry) in enumerate(zip(records, inspected.manager.get_entries(), strict=True)):
        line = lines[i] if i < len(lines) else "?"
        parent = record["parentId"] if record["parentId"] is not None else "-"
        out.write(
            f"{style.dim(f'{line:>6}')} {record['id']} {style.dim(f'← {parent}')} "
            f"{describe_entry(entry)}\n"
        )
    return 0


def cmd_tree(args: argparse.Namespace, out: TextIO) -> int:
    if not args.json:
        return cmd_show(args, out)
    inspected = load_for_inspection(args.file)
    if inspected.foreign is not None:
        from .formats.cli import tree_roots

        _emit_json(out, tree_json(tree_roots(inspected.foreign)))
        return 0
    _emit_json(out, tree_json(inspected.manager.get_tree()))
    return 0


def _render_context(inspected: Inspected) -> Callable[[dict[str, Any], TextIO, Style], None]:
    def render(record: dict[str, Any], out: TextIO, style: Style) -> None:
        model = record["model"]
        model_text = f"{model.get('provider')}/{model.get('modelId')}" if model else "none"
        tokens = record["tokens"]
        out.write(
            style.bold(f"leaf {_leaf_text(record['leafId'])}")
            + style.dim(
                f" · {len(record['messages'])} messages · ~{_num(tokens)} tokens"
                f" · thinking {record['thinkingLevel']} · model {model_text}"
            )
            + "\n"
        )
        for message, entry_id in zip(record["messages"], record["entryIds"], strict=True):
            role = message.get("role") if isinstance(message, dict) else None
            text = _message_text(message)
            out.write(f"  {style.cyan(f'{entry_id}')} {style.bold(str(role))}: {text}\n")

    return render


def _num(value: Any) -> str:
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _message_text(message: Any) -> str:
    if not isinstance(message, dict):
        return "(malformed)"
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return snippet(message.get("summary") or "", 90)
    if role == "bashExecution":
        return "$ " + snippet(message.get("command") or "", 88)
    text = describe_entry({"type": "message", "message": message})
    for prefix in (f"{role}: ", f"{role} "):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def cmd_context(args: argparse.Namespace, out: TextIO) -> int:
    inspected = load_for_inspection(args.file)
    if inspected.foreign is not None:
        from .formats.cli import context_record as foreign_context

        session = inspected.foreign
        return _per_leaf_loaded(
            args,
            out,
            inspected,
            lambda _manager, leaf: foreign_context(session, leaf),
            _render_context(inspected),
        )
    return _per_leaf_loaded(args, out, inspected, context_record, _render_context(inspected))


def _render_stats(record: dict[str, Any], out: TextIO, style: Style) -> None:
    usage = record["usage"]
    cost = record["cost"]
    out.write(
        style.bold(f"leaf {_leaf_text(record['leafId'])}")
        + f": {record['responses']} responses · input {usage['input']} · output {usage['output']}"
        f" · cache read {usage['cacheRead']} · cache write {usage['cacheWrite']}\n"
    )
    line = f"  cost ${cost['total']:.4f}"
    if cost["estimate"]:
        line += f" (estimate: ${cost['estimated']:.4f} priced with {cost['priceList']})"
    if cost["unpriced"]:
        line += f"; not priced: {', '.join(cost['unpriced'])}"
    out.write(line + "\n")


def cmd_stats(args: argparse.Namespace, out: TextIO) -> int:
    from .formats.cli import stats_record, stats_record_pi

    inspected = load_for_inspection(args.file)
    session = inspected.foreign
    if session is not None:
        return _per_leaf_loaded(
            args, out, inspected, lambda _m, leaf: stats_record(session, leaf), _render_stats
        )
    return _per_leaf_loaded(args, out, inspected, stats_record_pi, _render_stats)


def _per_leaf_loaded(
    args: argparse.Namespace,
    out: TextIO,
    inspected: Inspected,
    build: Callable[[Any, Any], dict[str, Any]],
    render: Callable[[dict[str, Any], TextIO, Style], None],
) -> int:
    leaves = resolve_leaves(inspected, args.leaf, args.all_leaves)
    style = Style(out)
    failed = False
    for leaf_id in leaves:
        try:
            record = build(inspected.manager, leaf_id)
        except SessionError as exc:
            record = {"leafId": leaf_id, "error": str(exc)}
            failed = True
        except Exception as exc:  # one broken leaf must not hide the others
            record = {"leafId": leaf_id, "error": f"{type(exc).__name__}: {exc}"}
            failed = True
        if args.json:
            _emit_json(out, record)
        elif "error" in record:
            out.write(
                style.red(f"leaf {_leaf_text(leaf_id)}: cannot build: {record['error']}") + "\n"
            )
        else:
            render(record, out, style)
    return 1 if failed else 0


def _render_compact(record: dict[str, Any], out: TextIO, style: Style) -> None:
    prep = record["preparation"]
    out.write(style.bold(f"leaf {_leaf_text(record['leafId'])}") + ": ")
    if prep is None:
        out.write("nothing to compact\n")
        return
    out.write(
        f"would summarize {len(prep['summarizeEntryIds'])} entries and keep from "
        f"{prep['firstKeptEntryId']} (~{_num(prep['tokensBefore'])} tokens before)\n"
    )
    if prep["isSplitTurn"]:
        out.write(
            f"  split turn: starts at {prep['turnStartEntryId']}, "
            f"{len(prep['turnPrefixEntryIds'])} entries summarized as the turn prefix\n"
        )
    details = prep.get("details") or {}
    for key, title in (("readFiles", "read"), ("modifiedFiles", "modified")):
        files = details.get(key) if isinstance(details, dict) else None
        if files:
            out.write(f"  {title}: {', '.join(str(f) for f in files)}\n")


def _request_options(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of the request previews from the shared summary options."""
    model: dict[str, Any] = {}
    if args.reasoning_model:
        model["reasoning"] = True
    if getattr(args, "context_window", None):
        model["contextWindow"] = args.context_window
    return {
        "model": model or None,
        "custom_instructions": args.instructions,
        "thinking_level": args.thinking_level,
        "pi_version": args.pi_version,
    }


def _render_compact_with_requests(record: dict[str, Any], out: TextIO, style: Style) -> None:
    _render_compact(record, out, style)
    if record["preparation"] is not None:
        out.write(format_request_preview({"requests": record["requests"]}))


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    if not args.dry_run:
        raise CliError("compact only previews (this tool never writes the file): add --dry-run", 2)
    inspected = load_for_inspection(args.file)
    options = _request_options(args) if args.show_request else None

    def build(manager: Any, leaf_id: Any) -> dict[str, Any]:
        return compact_record(manager, leaf_id, args.keep_recent, args.reserve, options)

    render = _render_compact_with_requests if args.show_request else _render_compact
    return _per_leaf_loaded(args, out, inspected, build, render)


def cmd_branch_summary(args: argparse.Namespace, out: TextIO) -> int:
    if not args.dry_run:
        raise CliError(
            "branch-summary only previews (this tool never writes the file): add --dry-run", 2
        )
    inspected = load_for_inspection(args.file)
    options = _request_options(args)
    options["replace_instructions"] = args.replace_instructions
    options["reserve_tokens"] = args.reserve
    record = branch_summary_record(inspected.manager, args.from_id, args.to_id, options)
    if args.json:
        _emit_json(out, record)
        return 0
    style = Style(out)
    out.write(
        style.bold(f"from {record['fromId']} to {record['targetId']}")
        + f": {len(record['entryIds'])} abandoned entries after the common ancestor "
        f"{_leaf_text(record['commonAncestorId'])}, {record['summarizedMessages']} messages summarized\n"
    )
    out.write(format_request_preview(record))
    return 0


def _validate_foreign(args: argparse.Namespace, out: TextIO) -> int:
    from .formats.cli import validate_record

    inspected = load_for_inspection(args.file)
    record = validate_record(inspected.foreign, args.file, args.allow_warnings)
    if args.json:
        _emit_json(out, record)
        return 0 if record["ok"] else 1
    style = Style(out)
    for p in record["problems"]:
        severity = style.red("error") if p["severity"] == "error" else style.yellow("warning")
        where = f" (entry {p['entryId']})" if p["entryId"] else ""
        out.write(f"{args.file}:{p['line']}: {severity}: {p['message']}{where} [{p['code']}]\n")
    if record["problems"]:
        errors = sum(1 for p in record["problems"] if p["severity"] == "error")
        out.write(
            style.dim(f"{errors} error(s), {len(record['problems']) - errors} warning(s)") + "\n"
        )
    else:
        out.write(style.green("ok") + style.dim(f" · {record['format']} · no problems") + "\n")
    return 0 if record["ok"] else 1


def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    from .diagnostics import validate_bytes
    from .formats import detect_format

    if detect_format(args.file) in ("claude-code", "codex"):
        return _validate_foreign(args, out)
    data = read_input(args.file)
    report = validate_bytes(data, path=args.file)
    problems = list(report.problems)
    failing = [p for p in problems if p.severity == "error"] if args.allow_warnings else problems
    if args.json:
        _emit_json(
            out,
            {
                "file": args.file,
                "ok": not failing,
                "version": report.version,
                "problems": [
                    {
                        "line": p.line,
                        "severity": p.severity,
                        "code": p.code,
                        "message": p.message,
                        "entryId": p.entry_id,
                    }
                    for p in problems
                ],
            },
        )
    else:
        style = Style(out)
        for p in problems:
            severity = style.red("error") if p.severity == "error" else style.yellow("warning")
            where = f" (entry {p.entry_id})" if p.entry_id else ""
            out.write(f"{args.file}:{p.line}: {severity}: {p.message}{where} [{p.code}]\n")
        errors = sum(1 for p in problems if p.severity == "error")
        warnings = len(problems) - errors
        if problems:
            out.write(style.dim(f"{errors} error(s), {warnings} warning(s)") + "\n")
        else:
            out.write(style.green("ok") + style.dim(" · no problems") + "\n")
    return 1 if failing else 0


def _session_dirs(directory: str) -> list[str]:
    """The directory itself when it holds session files, else its sub-directories (a sessions
    root such as ~/.pi/agent/sessions holds one directory per project)."""
    names = sorted(os.listdir(directory))
    if any(n.endswith(".jsonl") for n in names):
        return [directory]
    return [os.path.join(directory, n) for n in names if os.path.isdir(os.path.join(directory, n))]


def _info_json(info: Any) -> dict[str, Any]:
    if hasattr(info, "to_json"):
        data = dict(info.to_json())
    elif isinstance(info, dict):
        data = dict(info)
    else:
        data = dict(vars(info))
    data.pop("allMessagesText", None)
    data.pop("all_messages_text", None)
    return data


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    from .manager import SessionManager

    if args.dir is None:
        infos = list(SessionManager.list_all())
    else:
        if not os.path.isdir(args.dir):
            raise CliError(f"{args.dir}: not a directory")
        infos = []
        for directory in _session_dirs(args.dir):
            infos.extend(SessionManager.list_all(directory))
    records = [_info_json(info) for info in infos]
    records.sort(key=lambda r: str(r.get("modified") or ""), reverse=True)
    if args.json:
        for record in records:
            _emit_json(out, record)
        return 0
    style = Style(out)
    if not records:
        out.write(style.dim("no sessions") + "\n")
    for record in records:
        name = record.get("name") or ""
        first = snippet(record.get("firstMessage") or "", 60)
        out.write(
            f"{style.dim(str(record.get('modified') or ''))} {style.bold(name or '(unnamed)')}"
            f" · {record.get('messageCount')} messages · {record.get('cwd') or ''}\n"
            f"    {first}\n    {style.dim(str(record.get('path') or ''))}\n"
        )
    return 0


# ---------------------------------------------------------------------------------------------
# Parser


def _leaf_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--leaf", metavar="ID", help="entry id to use as the leaf (default: the current leaf)"
    )
    group.add_argument(
        "--all-leaves",
        action="store_true",
        help="every entry without children, in file order (one line each)",
    )


def _summary_request_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--instructions", metavar="TEXT", help="custom instructions (the user's focus)"
    )
    parser.add_argument(
        "--thinking-level", metavar="LEVEL", help="thinking level, sent as reasoning"
    )
    parser.add_argument(
        "--reasoning-model",
        action="store_true",
        help="the summarizing model supports reasoning (otherwise no reasoning option is sent)",
    )
    parser.add_argument(
        "--pi-version",
        choices=PI_VERSIONS,
        default=PI_DEFAULT,
        help=f"build the requests as this Pi release did (default {PI_DEFAULT})",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pisession",
        description="Inspect Pi coding-agent session files (JSONL, format v3), Claude Code"
        " transcripts and Codex rollouts. Never writes to them.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("show", help="the tree as indented text, active path marked with *")
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--leaf", metavar="ID", help="mark the path to this entry instead of the current leaf"
    )
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("entries", help="id, parentId and type of every entry, in file order")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="one JSON array")
    p.add_argument(
        "--all",
        action="store_true",
        help="Claude Code / Codex: also the records that are not tree entries (metadata, events)",
    )
    p.set_defaults(func=cmd_entries)

    p = sub.add_parser("tree", help='the tree, children oldest first; with --json {"roots": [...]}')
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tree, leaf=None)

    p = sub.add_parser("context", help="what the model sees at a leaf (projected messages, tokens)")
    p.add_argument("file", metavar="FILE")
    _leaf_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object per leaf")
    p.set_defaults(func=cmd_context)

    p = sub.add_parser(
        "compact", help="preview a compaction at a leaf (--dry-run; nothing is written)"
    )
    p.add_argument("file", metavar="FILE")
    _leaf_options(p)
    p.add_argument(
        "--keep-recent",
        type=int,
        default=20000,
        metavar="N",
        help="keepRecentTokens (default 20000)",
    )
    p.add_argument(
        "--reserve", type=int, default=16384, metavar="N", help="reserveTokens (default 16384)"
    )
    p.add_argument("--dry-run", action="store_true", help="required: only compute the preparation")
    p.add_argument(
        "--show-request",
        action="store_true",
        help="also print exactly what would be sent to the summarizer (nothing is called)",
    )
    _summary_request_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object per leaf")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser(
        "branch-summary",
        help="preview the branch summary of navigating --from LEAF --to TARGET (--dry-run)",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument(
        "--from", dest="from_id", required=True, metavar="LEAF", help="the leaf being left"
    )
    p.add_argument(
        "--to", dest="to_id", required=True, metavar="TARGET", help="the entry navigated to"
    )
    p.add_argument(
        "--reserve", type=int, default=16384, metavar="N", help="reserveTokens (default 16384)"
    )
    p.add_argument(
        "--context-window",
        type=int,
        metavar="N",
        help="the model's context window (default 128000)",
    )
    p.add_argument(
        "--replace-instructions",
        action="store_true",
        help="--instructions replace the default instructions instead of adding focus",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="required: print the request, call nothing"
    )
    _summary_request_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_branch_summary)

    p = sub.add_parser("validate", help="every problem with its line number; exit 1 if any")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--allow-warnings",
        action="store_true",
        help="exit 0 when there are only warnings (things Pi tolerates)",
    )
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "stats",
        help="a route's provider usage (each response once) and its cost, estimated where "
        "the file records none",
    )
    p.add_argument("file", metavar="FILE")
    _leaf_options(p)
    p.add_argument("--json", action="store_true", help="one JSON object per leaf")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser(
        "list", help="sessions in a Pi sessions directory (default: ~/.pi/agent/sessions)"
    )
    p.add_argument("dir", metavar="DIR", nargs="?")
    p.add_argument("--json", action="store_true", help="one JSON object per session")
    p.set_defaults(func=cmd_list)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = sys.stdout
    try:
        code = args.func(args, out)
        out.flush()
        return code
    except CliError as exc:
        print(f"pisession: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # Output piped into `head`: stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    except SessionError as exc:
        print(f"pisession: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug, not bad input: say so in one line unless debugging
        if os.environ.get("PISESSION_DEBUG"):
            raise
        print(
            f"pisession: internal error: {type(exc).__name__}: {exc} (set PISESSION_DEBUG=1 for details)",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
