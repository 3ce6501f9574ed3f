"""The privileged teacher's searches for an object that is not where the map remembers it
(:data:`SEARCHES`, by the ``--lm``/``--expert`` spec that selects one):

* ``belief`` (``expert``): the remembered holder first, then the unvisited asset with the highest
  ``P(here) / cost`` (:func:`lookplangraph.agent.search.ranked_holders`, the order the loop's
  search hint shows), each holder once;
* ``rooms`` (``expert-oracle``): the remembered holder, the other assets of its room, then the
  assets of the other rooms in the map's order;
* ``view`` (``expert-view``): ``belief`` limited to what the planner's view has shown; until the
  view has shown where the map remembers the object, it walks to the unvisited room likeliest to
  hold the object's class.

:class:`Search` is part of :class:`~lookplangraph.distill.teacher.policy.Policy`: it reads the
episode's state that the policy keeps (the task, the rooms visited, the instruction's hints, the
recalled classes) and uses its checks (``_ok``, ``_called``). The searches, and what each may
read: ``docs/guides/expert.md``.
"""

from __future__ import annotations

from grasif.priors import shipped
from sgs.actions import Action, make
from sgs.graph import Layer, SceneGraph, affords, node_class
from sgs.simulator import check

from lookplangraph.agent.recall import recalled
from lookplangraph.agent.search import hinted, holders, ranked_holders, weight

#: how the expert searches for an object that is not where it was remembered (module doc), by the
#: ``--lm`` spec that selects it
SEARCHES = {"expert": "belief", "expert-oracle": "rooms", "expert-view": "view"}


def _holder(g: SceneGraph, name: str) -> str:
    """The outermost non-object node holding ``name`` (what ``discover_objects`` must look at)."""
    node = g.parent[name][0]
    while node in g.nodes and g.nodes[node].layer is Layer.OBJECT and node in g.parent:
        node = g.parent[node][0]
    return node


class Search:
    """The next step of a search (module doc): a part of the policy, not used alone."""

    def _search(self, g: SceneGraph, key, obj: str) -> tuple[Action, str] | None:
        """The next step of the search for ``obj`` (module doc), or None when nothing is left."""
        prior = self.task.graph
        start = _holder(prior, obj) if obj in prior.parent else None
        if self.search == "view" and start is not None and prior.place_of(start) not in self.visited \
                and not recalled(obj, self.recall):
            explore = self._explore(g, key, obj)
            if explore is not None:
                return explore
        if self.search == "rooms":
            candidates = self._rooms_order(g, obj, start)
        else:
            candidates = self._belief_order(g, obj, start)
        for c, why in candidates:
            if c is None or c in g.inspected or c not in g.nodes:
                continue
            look = make("discover_objects", c)
            where = g.place_of(c)
            if where != g.agent.location:
                go = make("go_to", where)
                if self._ok(g, key, go):
                    return go, f"{why}; go to {where} to look at {c}"
                continue
            if self._ok(g, key, look):
                return look, why
            opened = check(g, look, correct=True)
            if opened.ok:
                for pre in opened.actions:
                    if pre.function_name == "open" and self._ok(g, key, pre):
                        return pre, f"open {pre.node} to look for {obj} inside ({why})"
        return None

    def _remembered(self, obj: str) -> str:
        """Where the map puts ``obj``: ``inside box-1 on shelf-2``."""
        prior, node, words = self.task.graph, obj, []
        while node in prior.parent and prior.nodes.get(prior.parent[node][0]) is not None:
            parent, rel = prior.parent[node]
            if prior.nodes[parent].layer is Layer.PLACE:
                break
            words.append(f"{'inside' if rel.value == 'inside' else 'on'} {parent}")
            node = parent
        return " ".join(words) or "nowhere"

    def _rooms_order(self, g: SceneGraph, obj: str, start: str | None) -> list[tuple[str, str]]:
        """The ``rooms`` search (module doc): the remembered holder, its room, then the other rooms."""
        prior = self.task.graph
        first_room = prior.place_of(start) if start is not None else g.agent.location
        rooms = [first_room] + [p for p in g.places if p != first_room]
        out = [(start, f"{self._called(obj)} is remembered {self._remembered(obj)} but not seen yet")] \
            if start is not None else []
        for room in rooms:
            out += [(n, f"{obj} was not found where it was remembered; look at {n}") for n in g.children(room)
                    if g.nodes[n].layer is Layer.ASSET
                    and (affords(g.nodes[n], "put_on") or affords(g.nodes[n], "put_inside"))]
        return out

    def _usually(self, cls: str) -> str:
        """Where the prior usually puts class ``cls``, in words ("on a desk or inside a cabinet"; ""
        for a class the prior does not know)."""
        priors = self.priors or shipped()
        usual = priors.holders(cls, 2) if priors.resolve(cls) else []
        return " or ".join(f"{'on' if p.relation == 'ontop' else 'inside'} a {p.holder.replace('_', ' ')}" for p in usual)

    def _explore(self, g: SceneGraph, key, obj: str) -> tuple[Action, str] | None:
        """The ``view`` search before the room where the map remembers ``obj`` was visited: a
        ``go_to`` of the unvisited room whose holders are likeliest for its class, or None."""
        prior, cls = self.task.graph, node_class(obj)
        mass: dict[str, float] = {}
        for n in holders(prior):
            room = prior.place_of(n)
            if room not in self.visited:
                mass[room] = mass.get(room, 0.0) + weight(prior, cls, n, self.hints, self.priors)
        kept = self._usually(cls)
        for room in sorted(mass, key=lambda r: (-mass[r], r)):
            go = make("go_to", room)
            if self._ok(g, key, go):
                thing = cls.replace("_", " ")
                why = f"a {thing} is usually {kept}" if kept else f"no {thing} is in view yet"
                return go, f"{why}, and {room} is the likeliest room not visited yet"
        return None

    def _belief_order(self, g: SceneGraph, obj: str, start: str | None) -> list[tuple[str, str]]:
        """The ``belief`` search (module doc; :func:`lookplangraph.agent.search.ranked_holders`):
        the unvisited holders, most likely per action first, each with the reason it is looked at."""
        prior, cls = self.task.graph, node_class(obj)
        thing = cls.replace("_", " ")
        out: list[tuple[str, str]] = []
        if start is not None and start not in g.inspected:
            out.append((start, f"{self._called(obj)} is remembered {self._remembered(obj)} but not seen yet"))
        room = prior.place_of(start) if start is not None else g.agent.location
        assets = [n for n in holders(prior) if n != start and n not in g.inspected]
        ranked = ranked_holders(prior, cls, room, assets, self.hints, self.priors, here=g.agent.location)
        lead = (f"{self._called(obj)} is not {self._remembered(obj)}, where it was remembered" if start in g.inspected
                else f"{self._called(obj)} is not seen yet")
        kept = self._usually(cls)
        for n in ranked:
            why = (f"{lead}; the instruction points to {n}" if any(hinted(prior, n, self.hints)) else
                   f"{lead}; a {thing} is usually {kept}, and {n} is the most likely place not looked at yet"
                   if kept else f"{lead}; {n} is the most likely place not looked at yet")
            out.append((n, why))
        return out
