"""The text tree's page maths: which rows start folded, which stretch of a long route is
drawn entry by entry. Pure functions over the folded graph's rows."""

from __future__ import annotations


def default_folds(rows: list, selected: str | None) -> tuple[set[int], set[int]]:
    """Side branches of the active route start folded, so the route reads as one column;
    a branch holding the selected entry stays open. Returns (collapsed rows, hidden rows)."""
    collapsed: set[int] = set()
    hidden: set[int] = set()
    n = 0
    while n < len(rows):
        item, indent = rows[n]
        if item.active and len(item.children) > 1:
            end = n + 1
            while end < len(rows) and rows[end][1] > indent:
                end += 1
            inside = range(n + 1, end)
            if inside and not any(rows[k][0].entry_id == selected for k in inside):
                collapsed.add(n)
                hidden.update(inside)
        n += 1
    return collapsed, hidden


PAGE_ROWS = 200  # entries of the active route drawn unfolded at once in the text tree


def path_window(
    path_ids: list[str], *, selected: str | None, before: str | None, after: str | None
) -> tuple[int, int]:
    """The stretch [lo, hi) of the route shown entry by entry: the page ending just before
    `before`, starting just after `after`, centred on the selected entry, or ending at the
    cursor (the route's end)."""
    n = len(path_ids)
    index = {eid: i for i, eid in enumerate(path_ids)}
    if before in index:
        hi = index[before]
        return max(0, hi - PAGE_ROWS), hi
    if after in index:
        lo = index[after] + 1
        return lo, min(n, lo + PAGE_ROWS)
    if selected in index:
        hi = min(n, max(0, index[selected] - PAGE_ROWS // 2) + PAGE_ROWS)
        return max(0, hi - PAGE_ROWS), hi
    return max(0, n - PAGE_ROWS), n
