"""Command line: find secrets in a session file, or write a redacted copy.

    python -m explorer.secrets scan SESSION.jsonl          # one JSON line per finding
    python -m explorer.secrets redact SESSION.jsonl -o OUT  # OUT is a valid, masked session

Useful before sharing a file by hand, and to check what the site would mask. Findings show
masked previews only; nothing printed contains a secret.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import orjson

from .redact import redact_bytes
from .scanner import scan_bytes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m explorer.secrets", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    scan = sub.add_parser("scan", help="print one JSON line per finding; exit 1 if any")
    scan.add_argument("path")
    redact = sub.add_parser("redact", help="write the file with every secret masked")
    redact.add_argument("path")
    redact.add_argument("-o", "--output", help="output file (default: standard output)")
    args = parser.parse_args(argv)

    with open(args.path, "rb") as fh:
        data = fh.read()
    if args.command == "scan":
        found = scan_bytes(data)
        for lf in found:
            record = {"line": lf.line, "entryId": lf.entry_id, **lf.finding.to_json()}
            sys.stdout.buffer.write(orjson.dumps(record) + b"\n")
        return 1 if found else 0
    out = redact_bytes(data)
    if args.output:
        with open(args.output, "wb") as fh:
            fh.write(out)
    else:
        sys.stdout.buffer.write(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
