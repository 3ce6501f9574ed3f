"""A GBNF grammar for problems of the appendix-D domain over one scene (LLM+P's constrained mode).

:func:`problem_grammar` writes a grammar (llama.cpp's GBNF) that admits exactly the problems an
LLM+P reply may hold for one scene, laid out as the prompt's example is: ``(define (problem NAME)
(:domain instruction-following) (:objects ROOMS - room OBJECTS - object) (:init ATOMS) (:goal
(and LITERALS)))``, with at least one atom in ``:init`` and any number of goal literals (79
VirtualHome tasks have none). Every atom uses one of the domain's eight predicates with
arguments of its types (``robot-in`` and the room of ``object-room`` take a room name, every
other argument an asset or object name), goal literals may be negated, and every name is one of
the scene's, in its PDDL form (:class:`~lookplangraph.planners.pddl.problem.PddlNames`).
:func:`~lookplangraph.planners.pddl.problem.graph_problem` writes problems in the same layout, so
every oracle problem is a sentence of the grammar (:func:`accepts` checks one).

What it decides is syntax and vocabulary only: which facts hold, which nodes to declare and what
the goal is stay the LM's. A grammar-constrained problem can still declare a node twice, use an
undeclared one, state a false fact or ask for an unreachable goal; Fast Downward still judges it.
The grammar removes the failures a small model makes most (actions written as predicates,
invented names, prose around the problem); whether a backend can enforce it is the backend's
business (``complete(..., grammar=...)``).
"""

from __future__ import annotations

import ctypes
from typing import Iterable

from sgs.graph import Layer, SceneGraph

from lookplangraph.planners.pddl.problem import PddlNames

#: predicates of the appendix-D domain and the type of each argument (``r``: room, ``o``: object)
PREDICATES: dict[str, str] = {
    "robot-in": "r", "object-room": "or", "agent-hold": "o", "hand-empty": "",
    "ontop": "oo", "inside": "oo", "closed": "o", "on-state": "o",
}


def _alternatives(names: Iterable[str]) -> str:
    quoted = [f'"{n}"' for n in sorted(set(names))]
    return " | ".join(quoted) if quoted else '"none"'


def problem_grammar(graph: SceneGraph, names: PddlNames | None = None) -> str:
    """The GBNF grammar of appendix-D problems over ``graph``'s nodes (module doc)."""
    names = names or PddlNames(graph.nodes)
    rooms = [names(n.name) for n in graph.nodes.values() if n.layer == Layer.PLACE]
    things = [names(n.name) for n in graph.nodes.values() if n.layer in (Layer.ASSET, Layer.OBJECT)]
    atoms = []
    for pred, types in PREDICATES.items():
        args = "".join(' " " ' + ("room" if t == "r" else "thing") for t in types)
        atoms.append(f'"{pred}"{args}')
    return "\n".join([
        'root ::= "(define (problem " ident ")\\n  (:domain instruction-following)\\n  (:objects" decl+ ")\\n'
        '  (:init" ("\\n    " atom)+ ")\\n  (:goal (and" ("\\n    " literal)* ")))"',
        'ident ::= [a-z] [a-z0-9_-]{0,60}',
        'decl ::= "\\n    " ((room " ")+ "- room" | (thing " ")+ "- object")',
        'literal ::= atom | "(not " atom ")"',
        "atom ::= \"(\" (" + " | ".join(atoms) + ") \")\"",
        f"room ::= {_alternatives(rooms)}",
        f"thing ::= {_alternatives(things)}",
    ]) + "\n"


def accepts(gbnf: str, text: str, llm) -> bool:
    """Whether llama.cpp's own grammar engine admits ``text`` as a whole sentence of ``gbnf``.

    ``llm`` is a ``llama_cpp.Llama`` (``vocab_only=True`` is enough): ``text`` is tokenized with
    its vocabulary and fed token by token through a grammar sampler, as constrained decoding
    would; the end-of-generation token must be allowed after the last one. For checking that a
    grammar admits the problems it should (``benchmarks/pddl_oracle.py --grammar``, tests)."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    if not sampler:
        raise ValueError("llama.cpp could not parse the grammar")
    try:
        def allowed(token: int) -> bool:
            cell = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
            candidates = llama_cpp.llama_token_data_array(cell, 1, -1, False)
            llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
            return cell[0].logit != float("-inf")

        for token in llm.tokenize(text.encode(), add_bos=False, special=False):
            if not allowed(token):
                return False
            llama_cpp.llama_sampler_accept(sampler, token)
        return allowed(llm.token_eos())
    finally:
        llama_cpp.llama_sampler_free(sampler)
