"""The session engine: Pi's JSONL session format (version 3) in pure Python.

No Django imports here: the same code serves files on disk, the database store, the command
line and the web pages. The names below are the public API; everything else is reachable
through its module (`explorer.session.compaction`, `explorer.session.tokens`, ...).
"""

from __future__ import annotations

from .branch_summary import (
    collect_entries_for_branch_summary,
    generate_branch_summary,
    navigate_tree,
    prepare_branch_entries,
)
from .compaction import (
    CompactionPreparation,
    CompactionResult,
    compact,
    compact_session,
    find_cut_point,
    find_projected_cut_point,
    prepare_compaction,
)
from .context import (
    ProjectedEntry,
    SessionContext,
    SessionProjection,
    build_context_entries,
    build_session_context,
    build_session_path,
    build_session_projection,
    context_from_path,
    get_latest_compaction_entry,
    projection_from_path,
)
from .diagnostics import Problem, ValidationReport, validate_bytes, validate_file
from .entries import CURRENT_SESSION_VERSION, migrate_session_entries
from .errors import SessionError, SummarizationError
from .listing import find_most_recent_session
from .loading import load_entries_from_file, parse_session_entries
from .manager import SessionManager, TreeNode
from .message_meta import format_duration, message_facts, provider_total_name
from .messages import convert_to_llm, get_current_system_message, session_entry_to_context_messages
from .paths import get_default_session_dir
from .pi_version import PI_DEFAULT, PI_VERSIONS
from .providers import OpenAIChatProvider, provider_from_env
from .request_preview import (
    branch_entries_request_preview,
    branch_summary_request_preview,
    compaction_request_preview,
    format_request_preview,
)
from .sentinel import UNSET
from .storage import FileStorage, SessionStorage
from .summarizers import (
    EmbeddedSummarizer,
    OpenAICompatibleSummarizer,
    Summarizer,
    SummaryRequest,
    summarizer_from_env,
)
from .tokens import (
    DEFAULT_COMPACTION_SETTINGS,
    CompactionSettings,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    should_compact,
)

__all__ = [
    "CURRENT_SESSION_VERSION",
    "DEFAULT_COMPACTION_SETTINGS",
    "PI_DEFAULT",
    "PI_VERSIONS",
    "UNSET",
    "CompactionPreparation",
    "CompactionResult",
    "CompactionSettings",
    "EmbeddedSummarizer",
    "FileStorage",
    "OpenAIChatProvider",
    "OpenAICompatibleSummarizer",
    "Problem",
    "ProjectedEntry",
    "SessionContext",
    "SessionError",
    "SessionManager",
    "SessionProjection",
    "SessionStorage",
    "SummarizationError",
    "Summarizer",
    "SummaryRequest",
    "TreeNode",
    "ValidationReport",
    "build_context_entries",
    "build_session_context",
    "build_session_path",
    "branch_entries_request_preview",
    "branch_summary_request_preview",
    "build_session_projection",
    "collect_entries_for_branch_summary",
    "compact",
    "compact_session",
    "context_from_path",
    "convert_to_llm",
    "estimate_context_tokens",
    "estimate_projected_context_tokens",
    "estimate_tokens",
    "find_cut_point",
    "find_most_recent_session",
    "find_projected_cut_point",
    "generate_branch_summary",
    "get_current_system_message",
    "get_default_session_dir",
    "get_latest_compaction_entry",
    "load_entries_from_file",
    "migrate_session_entries",
    "navigate_tree",
    "parse_session_entries",
    "prepare_branch_entries",
    "prepare_compaction",
    "projection_from_path",
    "provider_from_env",
    "session_entry_to_context_messages",
    "should_compact",
    "summarizer_from_env",
    "validate_bytes",
    "validate_file",
    "compaction_request_preview",
    "format_duration",
    "format_request_preview",
    "message_facts",
    "provider_total_name",
]
