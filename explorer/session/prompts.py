"""Prompt texts for summary requests (SPEC section 6.8).

The instruction prose is this project's own wording; what is fixed - and observable in stored
summaries - is the structure: the `<conversation>` and `<previous-summary>` wrappers, the
`# Conversation` / `# Instructions` form of the turn-prefix request, the section headings and
the `Additional focus:` suffix. The embedded summarizer recognizes the request kind from these
markers, so change them only together.
"""

from __future__ import annotations

__all__ = [
    "BRANCH_INSTRUCTIONS",
    "BRANCH_SUMMARY_PREAMBLE",
    "INITIAL_INSTRUCTIONS",
    "PREFIX_INSTRUCTIONS",
    "SUMMARIZATION_SYSTEM_PROMPT",
    "UPDATE_INSTRUCTIONS",
    "build_branch_prompt",
    "build_history_prompt",
    "build_turn_prefix_prompt",
]

SUMMARIZATION_SYSTEM_PROMPT = (
    "You are a context-summarization assistant. You read a conversation between a user and an "
    "AI coding assistant and write a structured summary of it in the format you are given.\n\n"
    "Do not continue the conversation and do not answer any question asked in it. Output only "
    "the structured summary."
)

_CLOSING = (
    "Keep every section short. Preserve exact file paths, function names, identifiers and "
    "error messages verbatim."
)

INITIAL_INSTRUCTIONS = f"""The messages above are a conversation to summarize. Write a structured checkpoint that another LLM will use to continue the work.

Use exactly this format:

## Goal
[What the user is trying to accomplish; list several items if the session covers several tasks.]

## Constraints & Preferences
- [Constraints, preferences or requirements stated by the user]
- [Or "(none)" if there were none]

## Progress
### Done
- [x] [Completed tasks or changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Data, examples or references needed to continue]
- [Or "(none)" if there are none]

{_CLOSING}"""

UPDATE_INSTRUCTIONS = f"""The messages above are NEW messages of the conversation. Merge them into the existing summary given in the <previous-summary> tags. Rules:
- KEEP all information of the previous summary
- ADD new progress, decisions and context from the new messages
- MOVE items from "In Progress" to "Done" once they are completed
- UPDATE "Next Steps" to reflect what was accomplished
- KEEP exact file paths, function names and error messages
- Remove only what is clearly no longer relevant

Use exactly this format:

## Goal
[Preserve existing goals, add new ones if the task grew]

## Constraints & Preferences
- [Preserve existing ones, add newly stated ones]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work, updated to the latest state]

### Blocked
- [Current blockers; remove resolved ones]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Updated to the current state]

## Critical Context
- [Preserve important context, add new if needed]

{_CLOSING}"""

PREFIX_INSTRUCTIONS = """The messages above are the earlier part of a turn that is still going on. Its later messages are kept separately and do not need to be reconstructed.

Write a concise checkpoint of the user's request and of the progress shown above; it will be placed before the later messages so the work can continue.

## Original Request
[What the user asked for]

## Progress So Far
- [Decisions made and work completed in these messages]

## Context Needed to Continue
- [Information from these messages needed to understand the later work]

Summarize only what is explicitly present above. Do not infer or invent later messages."""

BRANCH_INSTRUCTIONS = f"""Write a structured summary of this conversation branch, to give context when the user returns to it later.

Use exactly this format:

## Goal
[What the user was trying to accomplish in this branch]

## Constraints & Preferences
- [Constraints, preferences or requirements that were stated]
- [Or "(none)" if there were none]

## Progress
### Done
- [x] [Completed tasks or changes]

### In Progress
- [ ] [Work that was started but not finished]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [What should happen next to continue this work]

{_CLOSING}"""

BRANCH_SUMMARY_PREAMBLE = (
    "The user explored a different conversation branch before returning here.\n"
    "Summary of that exploration:\n\n"
)


def build_history_prompt(
    conversation_text: str,
    previous_summary: str | None = None,
    custom_instructions: str | None = None,
) -> str:
    """History request text: first-compaction form, or update form for a truthy summary."""
    instructions = UPDATE_INSTRUCTIONS if previous_summary else INITIAL_INSTRUCTIONS
    if custom_instructions:
        instructions = f"{instructions}\n\nAdditional focus: {custom_instructions}"
    text = f"<conversation>\n{conversation_text}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    return text + instructions


def build_turn_prefix_prompt(conversation_text: str, custom_instructions: str | None = None) -> str:
    """Turn-prefix request text: never a previous summary; custom instructions as added focus.

    Pi 1.6.0 appends truthy custom instructions as `Additional focus:`; callers that follow
    1.0.3 pass none.
    """
    text = f"# Conversation\n{conversation_text}\n\n# Instructions\n{PREFIX_INSTRUCTIONS}"
    if custom_instructions:
        text += f"\n\nAdditional focus: {custom_instructions}"
    return text


def build_branch_prompt(
    conversation_text: str,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
) -> str:
    """Branch-summary request text; custom instructions append to or replace the defaults."""
    if custom_instructions and replace_instructions:
        instructions = custom_instructions
    elif custom_instructions:
        instructions = f"{BRANCH_INSTRUCTIONS}\n\nAdditional focus: {custom_instructions}"
    else:
        instructions = BRANCH_INSTRUCTIONS
    return f"<conversation>\n{conversation_text}\n</conversation>\n\n{instructions}"
