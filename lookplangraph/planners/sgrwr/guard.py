"""The assume-guard: LM code that states scene facts instead of reading them is sent back.

The paper re-prompts code that contains the word "assume"; a keyword alone misses a program
that simply writes down a node it never looked up. :func:`assumption` returns a sentence for the
LM (None: the code passes) when

1. **it says it assumes**: the code, comments included, has a word starting with ``assum``;
2. **it names a node nobody gave it**: a string literal shaped like a node name
   (:data:`NODE_NAME`, like ``fridge-1``) does not occur in ``known``, the text the agent was
   given so far;
3. **the Retriever's code does not read the graph** (``reads_graph=True``): the name ``G`` does
   not occur in it.

Code that does not parse is not judged here: it goes to the sandbox, whose syntax error the LM
debugs. :func:`invented_plan` applies part 2 to the Reasoner's plan or action (ours, config
``sg_rwr.plan_guard``). Docs: ``docs/guides/sg-rwr.md``.
"""

from __future__ import annotations

import ast
import re

#: what a node name looks like in every GraSIF split (``kitchen-1``, ``water_glass-2``)
NODE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*-\d+$")
_ASSUME = re.compile(r"\bassum(?:e|es|ed|ing|ption|ptions)\b", re.I)


def unknown_names(names, known: str) -> list[str]:
    """The node names among ``names`` that do not occur in ``known`` (each once, in order)."""
    out: list[str] = []
    for name in names:
        if NODE_NAME.match(name) and not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", known) and name not in out:
            out.append(name)
    return out


def invented_plan(actions, known: str) -> str | None:
    """Why actions (:class:`sgs.actions.Action`) naming nodes absent from ``known`` are sent back
    (a sentence for the LM), or None (module doc)."""
    invented = unknown_names([n for a in actions for n in (a.node, a.destination) if n], known)
    if not invented:
        return None
    return (f"not run: it names {', '.join(invented)}, which no answer from the retriever contained. You do not "
            "see the scene: do not guess names. Ask the retriever for the nodes you need, then send it again.")


def assumption(code: str, known: str, *, reads_graph: bool = False) -> str | None:
    """Why ``code`` is sent back (a sentence for the LM), or None when it may run (module doc)."""
    m = _ASSUME.search(code)
    if m:
        return (f"your code says {m.group(0)!r}: do not assume anything about the scene. Remove the assumption and "
                "get the fact from the graph (or, as the planner, ask the retriever).")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    invented = unknown_names([node.value.strip() for node in ast.walk(tree)
                              if isinstance(node, ast.Constant) and isinstance(node.value, str)], known)
    if invented:
        return (f"your code writes the node name{'s' if len(invented) > 1 else ''} {', '.join(invented)}, which "
                "no answer or output so far contained: do not guess names. Find them in the graph first.")
    if reads_graph and not any(isinstance(n, ast.Name) and n.id == "G" for n in ast.walk(tree)):
        return ("your code does not read the graph G, so what it prints is not retrieved from the scene; "
                "write code that finds the answer in G.")
    return None
