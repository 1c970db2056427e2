"""Session files in and out of the database: import (new, grown, legacy), export, and the
files derived from a stored session (one branch, a fork).

Import parses each file once, in one streaming pass over its lines, and keeps every line's
original text, so an export is byte-identical to what was imported plus what was appended
since. This package returns results and calls nothing above it: ``explorer.services`` wraps
each import in the session's writer lock and broadcasts what it added.

Blocking problems ("error" severity): the bytes are not a Pi session at all (Pi would refuse
them), duplicate entry ids, parent cycles, or a file over the upload limit. Everything Pi
tolerates imports with a warning (SPEC section 1.7, Appendix D).

A newcomer looking for "where is a line read, stored or written out" reads this package, one
module per job: :mod:`.imports` (a file in: new session or more lines) and :mod:`.legacy`
(sessions stored before lines kept their text), over :mod:`.scan` (the streaming pass over
lines), :mod:`.store` (the batch writer), :mod:`.index` (the search index's rows),
:mod:`.findings` (secrets found on the way) and :mod:`.progress` (a running import, abandoned
ones); :mod:`.export` writes a stored session out again, whole, as one branch or as a fork.

The names callers use are re-exported here, so ``files.import_bytes(...)`` keeps working;
a test that patches a name must patch the module the code under test reads it from.
"""

from __future__ import annotations

from explorer.files.export import (
    branch_bytes,
    export_bytes,
    export_filename,
    fork_bytes,
    iter_export,
    redact_chunks,
)
from explorer.files.findings import (
    HEADER_FINDING,
    findings_for,
    rescan_session,
    secrets_current,
)
from explorer.files.imports import (
    ImportError_,
    ImportResult,
    import_bytes,
    import_file,
    refused,
)
from explorer.files.index import (
    index_new_entries,
    store_search_rows,
)
from explorer.files.progress import (
    ImportProgress,
    clear_abandoned,
    import_owner,
    reporting,
)
from explorer.files.scan import (
    Problem,
    entry_fields,
    find_header,
    session_name_of,
)
from explorer.files.store import (
    refresh_counters,
    sync_default_leaf,
)

__all__ = [
    "HEADER_FINDING",
    "ImportError_",
    "ImportProgress",
    "ImportResult",
    "Problem",
    "branch_bytes",
    "clear_abandoned",
    "entry_fields",
    "export_bytes",
    "export_filename",
    "find_header",
    "findings_for",
    "fork_bytes",
    "import_bytes",
    "import_file",
    "import_owner",
    "index_new_entries",
    "iter_export",
    "redact_chunks",
    "refresh_counters",
    "refused",
    "reporting",
    "rescan_session",
    "secrets_current",
    "session_name_of",
    "store_search_rows",
    "sync_default_leaf",
]
