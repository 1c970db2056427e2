"""Server memory under large request bodies: refused posts and an admin's real upload.

A real daphne process serves a temporary SQLite database (``tests/live/server.py``). Each
scenario runs on a fresh server, and the figure is the server's peak resident memory
(``VmHWM`` from ``/proc``) minus its resident memory when idle, so every ratio is measured
in the same run on the same machine:

- an anonymous post of SIZE bytes to a page (refused 413: over the small cap),
- an anonymous multipart post of SIZE bytes to the import (refused 403: not an admin),
- a declared SIZE-byte post that sends nothing (refused 413 at once from the headers),
- an admin's upload of a generated session file of about SIZE bytes (imported),

against the command line's import of the same file (``manage.py import_sessions``, its own
peak from ``getrusage``). Reported: each peak as a multiple of the body and the upload's
peak over the command line's.

    .venv/bin/python -m benchmarks.bench_upload_memory [--size-mb 200] [--write-results]
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402
from tests.live.server import LiveServer  # noqa: E402

CHUNK = 1024 * 1024
BOUNDARY = "----bench-upload-boundary"


def rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def filler(size: int) -> Iterator[bytes]:
    block = b"x" * CHUNK
    sent = 0
    while sent < size:
        piece = block[: min(CHUNK, size - sent)]
        sent += len(piece)
        yield piece


def file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        while piece := fh.read(CHUNK):
            yield piece


def multipart(parts: Iterator[bytes], size: int, token: str) -> tuple[Iterator[bytes], int]:
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n'
        f'{token}\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name="files"; '
        f'filename="bench.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n'
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()

    def body() -> Iterator[bytes]:
        yield head
        yield from parts
        yield tail

    return body(), len(head) + size + len(tail)


def post(server: LiveServer, path: str, body, length: int, headers: dict[str, str]) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=3600)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Content-Length", str(length))
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        try:
            for piece in body:
                conn.send(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the end: what a guard does
        return conn.getresponse().status
    finally:
        conn.close()


def scenario(workdir: Path, name: str, run) -> dict:
    with LiveServer(workdir / name, users={"ada": "admin"}) as server:
        pid = server.proc.pid
        time.sleep(0.5)
        idle = rss_kib(pid, "VmRSS")
        started = time.perf_counter()
        status = run(server)
        seconds = time.perf_counter() - started
        peak = rss_kib(pid, "VmHWM")
    return {"name": name, "status": status, "extra_mib": (peak - idle) / 1024, "s": seconds}


CLI = """
import resource, sys
import django
django.setup()
from django.core.management import call_command
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
idle = rss()
call_command("import_sessions", sys.argv[1], stdout=open("/dev/null", "w"))
print(idle, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def cli_import_peak(path: Path, workdir: Path) -> float:
    """Peak RSS (MiB) above its start of the command-line import of ``path``."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "sessions_site.settings",
        "SQLITE_PATH": str(workdir / "cli.sqlite3"),
        "SESSIONS_VAR_DIR": str(workdir),
        "SESSIONS_CACHE": "locmem",
        "PYTHONPATH": str(ROOT),
    }
    manage = str(ROOT / "manage.py")
    subprocess.run([sys.executable, manage, "migrate", "-v", "0"], env=env, check=True)
    out = subprocess.run([sys.executable, "-c", CLI, str(path)], env=env, check=True,
                         capture_output=True, text=True, cwd=ROOT).stdout  # fmt: skip
    idle, peak = map(int, out.split()[-2:])
    return (peak - idle) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()
    size = args.size_mb * 1024 * 1024
    with tempfile.TemporaryDirectory(prefix="bench-upload-") as tmp:
        workdir = Path(tmp)
        session_file = workdir / "bench.jsonl"
        entries = 2_000
        while True:  # grow the generated session until it reaches the wanted size
            generate_session(str(session_file), entries=entries, branch_points=20, seed=7)
            if session_file.stat().st_size >= size * 0.9:
                break
            entries = int(entries * size / session_file.stat().st_size * 1.05) + 1
        file_size = session_file.stat().st_size
        token = "b" * 32

        def anonymous_page(server):
            return post(server, "/", filler(size), size, {"Content-Type": "text/plain"})

        def anonymous_import(server):
            body, length = multipart(filler(size), size, token)
            return post(server, "/import/", body, length,
                        {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                         "Cookie": f"csrftoken={token}"})  # fmt: skip

        def declared_only(server):
            return post(server, "/", iter(()), 600 * 1024 * 1024, {})

        def admin_upload(server):
            body, length = multipart(file_chunks(session_file), file_size, token)
            return post(server, "/import/", body, length,
                        {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
                         "Cookie": f"{server.cookie('ada')}; csrftoken={token}",
                         "X-CSRFToken": token})  # fmt: skip

        rows = [
            scenario(workdir, "anonymous post to a page", anonymous_page),
            scenario(workdir, "anonymous post to the import", anonymous_import),
            scenario(workdir, "600 MB declared, nothing sent", declared_only),
            scenario(workdir, "admin upload (imported)", admin_upload),
        ]
        cli = cli_import_peak(session_file, workdir)
    lines = [
        f"Body {size / 2**20:.0f} MiB; generated session file {file_size / 2**20:.0f} MiB "
        f"({entries:,} entries). Server peak RSS above idle, per scenario (fresh daphne each):",
        "",
        "| Scenario | Status | Peak above idle | × body | Seconds |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        body = file_size if row["name"].startswith("admin") else size
        lines.append(
            f"| {row['name']} | {row['status']} | {row['extra_mib']:.0f} MiB | "
            f"{row['extra_mib'] * 2**20 / body:.2f} | {row['s']:.1f} |"
        )
    upload = rows[-1]["extra_mib"]
    lines += [
        "",
        f"Command-line import of the same file: peak {cli:.0f} MiB above its start "
        f"({cli * 2**20 / file_size:.2f}× the file). Admin upload over the command line: "
        f"{upload / cli:.2f}×.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        write_section("upload-memory", "## Upload memory (bench_upload_memory.py)\n\n" + text)


if __name__ == "__main__":
    main()
