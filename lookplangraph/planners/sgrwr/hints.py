"""Hints for SG-RwR's self-debugging (ours, not the paper's; config ``sg_rwr.debug_hints``, off by
default).

:func:`debug_hint` takes a failed run's error and returns a sentence or two on what a known mistake
means for *this* graph (an indexed ``G.successors(n)``, the holder read as an attribute instead
of an edge, a guessed node name or attribute), or None for an error it does not know; it names
how to read the schema and never writes the fix. A Retriever that answers a query with a summary
before running any code gets :data:`NO_CODE_YET`, with a worked example from another scene (the
paper's Retriever reads the graph with code before it may answer). Why the hints are off by
default: ``docs/guides/sg-rwr.md`` (*Debug hints*) and the results log.
"""

from __future__ import annotations

import re

_ITERATOR = re.compile(r"'(dict_keyiterator|dict_keys|dict_values|generator|filter|map|zip)' object is not subscriptable")
_KEY = re.compile(r"KeyError: '([^']*)'")
_ATTRIBUTES = ("name", "layer", "class", "states", "affordances", "properties", "seen", "holding")
_HOLDER_WORDS = ("holding", "holder", "held", "parent", "location", "room", "on", "in", "inside", "ontop",
                 "in_room", "position", "container")

#: What a Retriever's summary sent before any of its code ran is answered (the plain refusal).
NOT_RUN_YET = "You have not run any code on the graph for this query, so nothing is retrieved yet. "
NO_CODE = NOT_RUN_YET + "Write code that finds the answer in G."
#: The same with a worked example (``sg_rwr.debug_hints``).
NO_CODE_YET = (
    NOT_RUN_YET + "Reply with a ```python block that finds the answer in G; for example, for \"where are the cups?\" "
    "in another scene:\n```python\nfor n, d in G.nodes(data=True):\n    if d[\"class\"] == \"cup\":\n"
    "        holder = list(G.successors(n))\n"
    "        print(n, d[\"states\"], holder, [G.edges[n, h][\"relation\"] for h in holder])\n"
    "if not any(d[\"class\"] == \"cup\" for m, d in G.nodes(data=True)):\n    print(None)\n```")


def debug_hint(error: str | None) -> str | None:
    """One or two sentences on what ``error`` (a sandbox run's error text) means for the scene
    graph's schema, or ``None`` when it is not one of the known mistakes."""
    if not error:
        return None
    hints = []
    if _ITERATOR.search(error):
        hints.append("G.successors(n), G.predecessors(n), G.neighbors(n) and G.nodes.keys() are iterators, "
                     "not lists: wrap them in list(...) before indexing, e.g. list(G.successors(n)).")
    key = _KEY.search(error)
    if key:
        name = key.group(1)
        if name in _HOLDER_WORDS:
            owner = ("'holding' is an attribute of the agent node only (what it has in hand)" if name == "holding"
                     else f"Nodes have no attribute '{name}'")
            hints.append(f"{owner}. What holds a node n is an edge: list(G.successors(n)) is [its holder], and "
                         "G.edges[n, holder]['relation'] is 'in_room', 'ontop', 'inside' or 'held'.")
        elif name not in _ATTRIBUTES and "-" in name:
            hints.append(f"There is no node '{name}' in G: find nodes by their attributes (e.g. d['class']) "
                         "instead of guessing names.")
        elif name not in _ATTRIBUTES:
            hints.append(f"'{name}' is not a node attribute: nodes have {', '.join(_ATTRIBUTES[:6])} "
                         "(the agent also 'holding'); relations are edges.")
    return " ".join(hints) or None
