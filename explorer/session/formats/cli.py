"""What `pisession` prints for Claude Code and Codex files, as JSON-ready records.

The shapes are those of Pi files (`entries`, `tree`, `context`, `validate`) with a few added
keys (`line`, `recordType`, `format`, `contextSource`), so a tool reading Pi output reads these
too. `stats` is shared with Pi files (`stats_record_pi`).
"""

from __future__ import annotations

from typing import Any

from explorer.session import exactsum
from explorer.session.describe import usage_of
from explorer.session.manager import TreeNode
from explorer.session.pricing import CostEstimate, estimate_cost, price_list
from explorer.session.tokens import estimate_tokens

from .common import USAGE_KEYS, ForeignSession, empty_usage

__all__ = [
    "context_record",
    "entries_records",
    "stats_record",
    "stats_record_pi",
    "tree_roots",
    "validate_record",
]


def tree_roots(session: ForeignSession) -> list[TreeNode]:
    """The tree entries as `TreeNode`s (children in file order), built without recursion."""
    nodes = {r.id: TreeNode(entry=r.entry or {"id": r.id}) for r in session.entries()}
    roots: list[TreeNode] = []
    for record in session.entries():
        node = nodes[record.id]
        parent = nodes.get(record.parent) if record.parent is not None else None
        (parent.children if parent is not None else roots).append(node)
    return roots


def entries_records(session: ForeignSession, include_all: bool = False) -> list[dict[str, Any]]:
    """`{"id", "parentId", "type"}` of every tree entry in file order, plus its `line` and
    original `recordType`; `include_all` adds every other kept record (`kind` says which)."""
    out: list[dict[str, Any]] = []
    for record in session.records:
        if record.kind == "conversation":
            assert record.entry is not None
            out.append(
                {
                    "id": record.id,
                    "parentId": record.parent,
                    "type": record.entry["type"],
                    "line": record.line,
                    "recordType": record.record_type,
                }
            )
        elif include_all:
            out.append(
                {
                    "id": record.id,
                    "parentId": record.parent,
                    "type": record.record_type,
                    "line": record.line,
                    "recordType": record.record_type,
                    "kind": record.kind,
                }
            )
    return out


def context_record(session: ForeignSession, leaf: str | None) -> dict[str, Any]:
    """Pi's context record for one leaf: messages, their source entries, model, tokens; and
    whether the projection is derived by rules (Claude Code) or read from the file (Codex)."""
    pairs = session.context(leaf) if leaf is not None else []
    model = None
    for record in reversed(session.route(leaf) if leaf is not None else []):
        message = record.entry.get("message") if record.entry else None
        if isinstance(message, dict) and message.get("role") == "assistant" and message["model"]:
            model = {"provider": message["provider"], "modelId": message["model"]}
            break
    messages = [m for _, m in pairs]
    tokens = 0.0
    for message in messages:
        estimate = estimate_tokens(message)
        if isinstance(estimate, int | float) and estimate == estimate:
            tokens += estimate
    return {
        "leafId": leaf,
        "messages": messages,
        "entryIds": [i for i, _ in pairs],
        "thinkingLevel": "off",
        "model": model,
        "tokens": int(tokens),
        "format": session.format,
        "contextSource": session.context_source(),
    }


def validate_record(session: ForeignSession, path: str, allow_warnings: bool) -> dict[str, Any]:
    problems = [p.to_json() for p in session.problems]
    failing = [p for p in problems if p["severity"] == "error" or not allow_warnings]
    return {
        "file": path,
        "ok": not failing,
        "version": None,
        "format": session.format,
        "problems": problems,
    }


def _cost_json(recorded: float, estimated: CostEstimate, priced_responses: int) -> dict[str, Any]:
    """Recorded cost plus the estimate for what recorded none, and which list priced it."""
    out = estimated.to_json()
    out["total"] = recorded + estimated.total
    out["recorded"] = recorded
    out["estimated"] = estimated.total
    out["estimate"] = priced_responses > 0
    out["priceList"] = price_list() if priced_responses > 0 else None
    out["unpriced"] = estimated.unpriced
    return out


def stats_record(session: ForeignSession, leaf: str | None) -> dict[str, Any]:
    """The route's provider usage `{input, output, cacheRead, cacheWrite}`, each response once
    (R9 / X6), and its cost estimated from the price list (these files record no cost)."""
    parts = session.usage_parts(leaf) if leaf is not None else []
    usage = empty_usage()
    estimated = CostEstimate()
    for provider, model, part in parts:
        for key in USAGE_KEYS:
            usage[key] += part[key]
        estimated.add(estimate_cost(provider, model, part))
    return {
        "leafId": leaf,
        "format": session.format,
        "usage": usage,
        "responses": len(parts),
        "cost": _cost_json(0.0, estimated, len(parts)),
    }


def stats_record_pi(manager: Any, leaf: Any) -> dict[str, Any]:
    """The same for a Pi file: every entry on the branch that records spend (assistant
    messages, usage entries, summary requests) counts once; its recorded cost is used, and
    only usage without a cost is priced from the list."""
    usage = empty_usage()
    recorded: list[float] = []
    estimated = CostEstimate()
    responses = 0
    priced = 0
    branch = manager.get_branch(leaf) if leaf is not None else []
    for entry in branch:
        entry = manager.full_entry(entry) if hasattr(manager, "full_entry") else entry
        spend = usage_of(entry)
        if spend is None:
            continue
        responses += 1
        part = {key: _count(spend.get(key)) for key in USAGE_KEYS}
        for key in USAGE_KEYS:
            usage[key] += part[key]
        cost = spend.get("cost")
        total = cost.get("total") if isinstance(cost, dict) else None
        if isinstance(total, int | float) and not isinstance(total, bool) and total == total:
            recorded.append(float(total))
            continue
        message = entry.get("message") if entry.get("type") == "message" else entry
        provider = message.get("provider") if isinstance(message, dict) else None
        model = message.get("model") if isinstance(message, dict) else None
        estimated.add(
            estimate_cost(
                provider if isinstance(provider, str) else "",
                model if isinstance(model, str) else "",
                part,
            )
        )
        priced += 1
    return {
        "leafId": leaf,
        "format": "pi",
        "usage": usage,
        "responses": responses,
        # Exactly summed and rounded once, as every route cost the explorer shows of a
        # route's part (``analysis.compare.route_stats``): the same figure in any order.
        "cost": _cost_json(exactsum.total(recorded), estimated, priced),
    }


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return int(value)
