"""The message forms of SG-RwR's two agents and how a reply is read.

A Reasoner reply is one form, the one whose marker comes *first*: ``query`` (``[Query]``: the
question up to the next section), ``code`` (``[Code]`` or a fenced block), ``action``
(``[Action]``, step mode only: one call, :func:`sgs.actions.parse_action`) or ``summary``
(``[Summary]``, ``[Actions]`` or ``TASK TERMINATE``: the action list; :data:`TERMINATE` must be
present). A marker is ``[Name]`` anywhere, or ``Name:`` or a ``Name`` heading at the start of a
line, any case. A reply with no marker, an empty query, a code section without code or a summary
without :data:`TERMINATE` or a readable action list is ``malformed``, and :attr:`Reply.error`
says why in words meant for the LM. In static mode an ``[Action]`` is malformed; in step mode a
summary with ``TASK TERMINATE`` ends the episode like ``done()``.

A Retriever reply with a fenced block is ``code`` (a line holding only the marker is dropped);
otherwise one with :data:`RETRIEVED` is a ``summary``; a reply that is, as a whole, Python
reading ``G`` is ``code``; anything else is ``malformed``. Action lists are read leniently
(``[go_to(kitchen-1), open(fridge-1)]``, a JSON list of strings, or one call per line), but every
call must parse as an action. Docs: ``docs/guides/sg-rwr.md``.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from sgs.actions import Action, ActionSyntaxError, parse_action

#: the Reasoner's termination marker and the Retriever's (paper, appendix A)
TERMINATE = "TASK TERMINATE"
RETRIEVED = "INFO RETRIEVED"

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.S)
_NAMES = ("Explanation", "Query", "Code", "Action", "Actions", "Summary")


def _marker_pattern(names: str) -> str:
    """A section marker: ``[Name]`` anywhere, or ``Name:`` / a ``Name`` heading at the start of
    a line, in markdown bold or after ``#`` (``**Query:**``, ``### Query``)."""
    return (rf"\[(?:{names})\]|^[ \t>*#]*(?:{names})\b[ \t*]*:[ \t*]*|^[ \t>*#]*(?:{names})\b[ \t*]*$")


_MARKERS = {n: re.compile(_marker_pattern(n), re.I | re.M) for n in _NAMES}
_SECTION = re.compile(_marker_pattern("|".join(_NAMES)), re.I | re.M)
_CALL = re.compile(r"[A-Za-z_][\w-]*\s*\([^()\[\]]*\)")


@dataclass
class Reply:
    """One reply read as a form. ``query``/``code``/``summary`` hold the form's text, ``actions``
    the summary's action list, ``action`` the step-mode action; ``error`` is set exactly when
    ``form`` is ``malformed``."""

    form: str  # query | code | action | summary | malformed
    query: str | None = None
    code: str | None = None
    summary: str | None = None
    actions: list[Action] = field(default_factory=list)
    action: Action | None = None
    error: str | None = None


def first_code_block(text: str) -> str | None:
    """The first fenced code block of ``text`` (language tag dropped); an unclosed fence runs to
    the end. None when there is none or it is empty."""
    m = _FENCE.search(text)
    if not m:
        return None
    code = m.group(2).strip("\n")
    return code if code.strip() else None


def _section(text: str, name: str) -> str | None:
    """The text after the ``name`` marker up to the next section marker, the termination markers
    or a fence (None when there is no such section)."""
    m = _MARKERS[name].search(text)
    if not m:
        return None
    rest = text[m.end():]
    cut = len(rest)
    for pattern in (_SECTION, re.compile(re.escape(TERMINATE)), re.compile(re.escape(RETRIEVED))):
        n = pattern.search(rest)
        if n:
            cut = min(cut, n.start())
    return rest[:cut].strip()


def read_action_list(text: str) -> list[Action]:
    """Actions written as a bracketed list, a JSON list or one call per line; raises
    :class:`ActionSyntaxError` (a message for the LM) when none is found or one is not an action."""
    body = text.strip()
    if body.startswith("```"):
        body = first_code_block(body) or ""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, list) and all(isinstance(s, str) for s in data):
        calls = data
    else:
        calls = _CALL.findall(body)
    if not calls:
        raise ActionSyntaxError("no action found under [Actions]; write a list like [go_to(kitchen-1), open(fridge-1)]")
    out = []
    for i, call in enumerate(calls, 1):
        try:
            out.append(parse_action(call.strip()))
        except ActionSyntaxError as exc:
            raise ActionSyntaxError(f"action {i} of the list: {exc}") from None
    return out


def read_reasoner(text: str, *, step_mode: bool = False) -> Reply:
    """The Reasoner's reply as a form (module doc)."""
    starts: dict[str, int] = {}
    for form, patterns in (("query", [_MARKERS["Query"]]), ("code", [_MARKERS["Code"], re.compile("```")]),
                           ("action", [_MARKERS["Action"]]),
                           ("summary", [_MARKERS["Summary"], _MARKERS["Actions"], re.compile(re.escape(TERMINATE))])):
        hits = [m.start() for p in patterns for m in [p.search(text)] if m]
        if hits:
            starts[form] = min(hits)
    if not step_mode:
        starts.pop("action", None)
    if not starts:
        what = "[Query], [Code], [Action] (one action) or [Summary]" if step_mode else "[Query], [Code] or [Summary]"
        return Reply("malformed", error=f"your reply has none of the message forms; answer with exactly one of {what}")
    form = min(starts, key=starts.get)
    if form == "query":
        q = _section(text, "Query")
        if not q:
            return Reply("malformed", error="your [Query] is empty; write the question for the retriever after [Query]")
        return Reply("query", query=q)
    if form == "code":
        code = first_code_block(text)
        if code is None:
            body = _section(text, "Code")
            code = body if body and body.strip() else None
        if code is None:
            return Reply("malformed", error="your [Code] has no code; put Python code in a ```python block after [Code]")
        return Reply("code", code=code)
    if form == "action":
        body = _section(text, "Action") or ""
        calls = _CALL.findall(body)
        if not calls:
            return Reply("malformed", error="no action after [Action]; write one call like go_to(kitchen-1)")
        try:
            action = parse_action(calls[0])
        except ActionSyntaxError as exc:
            return Reply("malformed", error=str(exc))
        return Reply("action", action=action)
    summary = _section(text, "Summary") or ""
    if TERMINATE not in text:
        return Reply("malformed", error=f"a solution summary ends with {TERMINATE} on its own line")
    if step_mode:
        return Reply("summary", summary=summary)
    listed = _section(text, "Actions")
    if listed is None:
        return Reply("malformed", error="your summary has no [Actions] list; give the whole plan as [Actions] [a(x), b(y), ...]")
    try:
        actions = read_action_list(listed)
    except ActionSyntaxError as exc:
        return Reply("malformed", error=str(exc))
    return Reply("summary", summary=summary, actions=actions)


def _is_graph_code(text: str) -> bool:
    """Whether ``text`` as a whole parses as Python that names ``G`` (code sent without a fence)."""
    try:
        tree = ast.parse(text.strip())
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.Name) and n.id == "G" for n in ast.walk(tree))


def _without_marker_lines(code: str) -> str:
    """``code`` without lines that hold only :data:`RETRIEVED` (a small model held to a code
    block by ``sg_rwr.code_grammar`` writes its marker as the block's last line, a SyntaxError
    that self-debugging would resend unchanged)."""
    lines = code.splitlines()
    kept = [line for line in lines if line.strip(" \t*#") != RETRIEVED]
    return "\n".join(kept) if len(kept) < len(lines) else code


def read_retriever(text: str) -> Reply:
    """The Retriever's reply as a form (module doc)."""
    code = first_code_block(text)
    if code is not None:
        return Reply("code", code=_without_marker_lines(code))
    if RETRIEVED in text:
        summary = _section(text, "Summary")
        if summary is None:
            summary = text.replace(RETRIEVED, "").strip()
        if not summary:
            return Reply("malformed", error=f"your summary is empty; write the answer after [Summary], then {RETRIEVED}")
        return Reply("summary", summary=summary)
    if _is_graph_code(text):
        return Reply("code", code=text.strip())
    return Reply("malformed", error=f"reply with Python code in a ```python block, or with [Summary] and {RETRIEVED} "
                                    "once your code's output answers the question")
