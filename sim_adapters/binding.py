"""Names the planner uses → the environment's own nodes.

With ground-truth augmentation the planner only ever uses the environment's names. A describer or
parser makes names up (``mug-7`` for what the environment calls ``cup-3``), and the environment
must still know what ``pick_up(mug-7)`` means. :class:`NameBinding` answers that:

* a name the environment has binds to itself, unless it was seen (:meth:`NameBinding.note`)
  under a holder where the environment's node of that name is not (a made-up name that happens to
  be a true one: with no priors, a parser calls the apple it sees ``apple-1``, and the true
  ``apple-1`` is another apple elsewhere);
* otherwise, a name seen on or inside a holder (:meth:`NameBinding.note`, which the planner calls
  for every object an augmentation reports) binds to a true instance of the same class under that
  holder (the holder itself bound first), one no other name is bound to, the first by ``order``;
* anything else raises :class:`BindingError`, whose text is the feedback for the planner.

A binding holds until :meth:`NameBinding.clear` (an environment clears it on ``reset``).
"""

from __future__ import annotations

from typing import Callable, Iterable

from sgs.graph import SceneGraph, node_class


class BindingError(ValueError):
    """A name that binds to no node of the environment; ``str(exc)`` is feedback for the planner."""


class NameBinding:
    """Planner names → environment names (module doc). ``known``: the environment's names;
    ``order``: the sort key choosing among several candidates (default: the name); ``scene``: how
    the environment is called in messages."""

    def __init__(self, known: Iterable[str], order: Callable[[str], object] | None = None, scene: str = "the scene"):
        self.known = set(known)
        self.order = order or (lambda name: name)
        self.scene = scene
        self.bound: dict[str, str] = {}
        self.seen: dict[str, str] = {}

    def clear(self) -> None:
        self.bound.clear()
        self.seen.clear()

    def note(self, name: str, parent: str) -> None:
        """``name`` was seen on or inside ``parent`` (a name the planner uses)."""
        self.seen[name] = parent

    def bind(self, name: str | None, truth: SceneGraph) -> str:
        """The environment's name for ``name`` in ``truth`` (the environment's current graph)."""
        if not name:
            raise BindingError("the action names no node")
        if name in self.bound:
            return self.bound[name]
        parent = self.seen.get(name)
        holder = self.bind(parent, truth) if parent is not None else None
        if name in self.known and (holder is None or truth.is_ancestor(holder, name)):
            self.bound[name] = name
            return name
        if holder is None:
            raise BindingError(f"{name} is not a node of {self.scene} and was not seen anywhere")
        taken = set(self.bound.values())
        cls = node_class(name)
        candidates = [c for c in truth.children(holder) if node_class(c) == cls and c not in taken]
        if not candidates:
            raise BindingError(f"{name}: {self.scene} has no unbound {cls} on or inside {parent}")
        self.bound[name] = min(candidates, key=self.order)
        return self.bound[name]
