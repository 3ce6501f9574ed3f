"""Training data in the conversation layout: one chat per episode, each answer marked trained or not.

An episode played in ``prompt_layout = "conversation"`` (:mod:`lookplangraph.agent.conversation`)
is one conversation whose every decision's prompt is a prefix: :func:`episode_conversation`
checks that on the calls the loop made and gives the whole chat, each assistant turn with
``"train": false`` when it is not to be learnt (a refused answer, an injected mistake); a turn
without the key is trained. :func:`decisions` cuts a conversation into the one-decision examples
it stands for (the prefix up to a trained answer, then that answer): the same tokens, trained
one prompt at a time, for comparisons and for trainers that take single turns.

**Injected mistakes** (:class:`MistakeInjector`, around the privileged expert): in a chosen share
of episodes, at a chosen decision, the answer is a wrong one of a kind the planner makes
(:data:`MISTAKE_KINDS`), built from the expert's own answer there; the loop checks it as any
answer (the simulator's real feedback follows in the next user turn), the expert is told it was
given (:meth:`~lookplangraph.distill.teacher.policy.Policy.follow`) and answers again. The
mistake stands untrained, the answer after it is trained: recovery after a refusal, at a rate
the data sets.

**Answers of several actions** (:func:`chained`): consecutive trained answers of which each but the
last was carried out as written and neither looked (``discover_objects``) nor ended the task
become one answer of up to *k* actions, a JSON list, ``done()`` always an answer of its own (the
loop does not try it after other actions); the outcome lines between them go, and what
the view showed between them moves into the user turn after it, after that turn's outcome line:
the chat the loop writes with ``actions_per_answer`` = *k* (:mod:`lookplangraph.agent.conversation`). The data writer keeps a chained conversation only when
replaying its answers in the loop gives that very chat. Format and use:
``docs/guides/distillation.md#conversations-one-episode-one-sequence``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from sgs.actions import Action, make
from sgs.graph import Layer, SceneGraph

from lookplangraph.agent.conversation import FEEDBACK
from lookplangraph.agent.replies import parse_reply
from lookplangraph.lm import Completion, Usage
from lookplangraph.planners.lookplangraph import follows_in_answer

#: The kinds of injected mistake, each built from the expert's answer ``a`` where it applies:
#: ``inside-on-surface`` (``put_on``/``rearrange ... ontop`` answered as ``inside``),
#: ``room-destination`` (the agent's room as the destination of a put), ``not-held`` (a put
#: while holding nothing, onto an asset of the room), ``slots-shuffled`` (a rearrange with its
#: object and destination swapped; a put with its slots swapped is what the loop's ``held_slot``
#: rule reads right, so it is no mistake), and
#: ``repeat-refused`` (a refused mistake given once more, right after its feedback).
MISTAKE_KINDS = ("inside-on-surface", "room-destination", "not-held", "slots-shuffled", "repeat-refused")

#: the decisions of an episode at which its one mistake may be injected (the first is 1)
MISTAKE_STEPS = range(1, 9)


class ConversationError(ValueError):
    """The calls of an episode do not make one conversation (a prompt that is not a prefix of the
    next): the layout broke its invariant, and no data is written from it."""


def trained(message: dict[str, Any]) -> bool:
    """Whether an assistant turn is to be learnt (no ``train`` key, or ``train`` true)."""
    return message.get("role") == "assistant" and message.get("train", True) is not False


def episode_conversation(calls: list[tuple[list[dict[str, Any]], str]], train: list[bool]) -> list[dict[str, Any]]:
    """The episode's whole chat from the loop's ``calls`` (each the messages of one decision and
    the reply text), each answer marked as ``train`` says. Raises :class:`ConversationError` when
    a decision's messages are not the chat so far."""
    if not calls:
        raise ConversationError("an episode without decisions")
    if len(train) != len(calls):
        raise ConversationError(f"{len(calls)} decisions but {len(train)} marks")
    first = calls[0][0]
    chat: list[dict[str, Any]] = [{"role": m["role"], "content": m["content"]} for m in first[:-1]]  # the system message
    for n, ((messages, text), learn) in enumerate(zip(calls, train), 1):
        plain = [{"role": m["role"], "content": m["content"]} for m in messages]
        have = [{"role": m["role"], "content": m["content"]} for m in chat]
        if plain[:len(have)] != have or len(plain) != len(have) + 1 or plain[-1]["role"] != "user":
            raise ConversationError(f"decision {n}'s prompt is not the conversation so far plus one user turn")
        chat.append(plain[-1])
        chat.append({"role": "assistant", "content": text, **({} if learn else {"train": False})})
    return chat


def decisions(conversation: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The one-decision examples of ``conversation``: for each trained assistant turn, the turns
    before it (their answers marked ``"train": false``) and that answer, the only one trained."""
    out = []
    for i, m in enumerate(conversation):
        if trained(m):
            before = [{"role": x["role"], "content": x["content"], **({"train": False} if x["role"] == "assistant" else {})}
                      for x in conversation[:i]]
            out.append([*before, {"role": "assistant", "content": m["content"]}])
    return out


def chained(conversation: list[dict[str, Any]], limit: int, goes_on: list[bool],
            names: "list[set[str] | None] | None" = None) -> list[dict[str, Any]]:
    """``conversation`` (system message, then user and assistant turns) with its answers chained
    into answers of at most ``limit`` actions (module doc): a trained answer joins the one before
    it when that one is trained too, ``goes_on`` (one flag per assistant turn: the loop's
    :func:`~lookplangraph.planners.lookplangraph.goes_on` of its record) says the loop would try
    the next action after it, and it names only what the joined answer's first decision could
    name (``names``, per assistant turn: the names its schema allowed, None for any): an answer
    is decoded over the view it starts from. A ``done()`` joins nothing: the loop tries it only
    as an answer's first action. ``limit`` 1 gives the conversation unchanged."""
    head, turns = conversation[:1], conversation[1:]
    pairs = [(turns[i], turns[i + 1]) for i in range(0, len(turns) - 1, 2)]
    if len(turns) % 2 or any(u["role"] != "user" or a["role"] != "assistant" for u, a in pairs):
        raise ConversationError("a conversation is a system message, then user and assistant turns in turn")
    names = names if names is not None else [None] * len(pairs)
    if len(goes_on) != len(pairs) or len(names) != len(pairs):
        raise ConversationError(f"{len(pairs)} answers but {len(goes_on)} flags and {len(names)} vocabularies")
    out = list(head)
    carry = ""  # what the view showed between the actions of the last answer: into the next user turn
    i = 0
    while i < len(pairs):
        user, answer = pairs[i]
        content = user["content"]
        if carry:
            outcome = _outcome(content)
            content, carry = outcome + carry + content[len(outcome):], ""
        out.append({**user, "content": content})
        n = 1  # the answers joined
        while (i + n < len(pairs) and n < limit and goes_on[i + n - 1] and trained(pairs[i + n - 1][1])
               and trained(pairs[i + n][1]) and _joins(pairs[i + n][1]["content"], names[i])):
            between = pairs[i + n][0]["content"]
            carry += between[len(_outcome(between)):]
            n += 1
        if n == 1:
            out.append(answer)
        else:
            text = json.dumps([json.loads(a["content"]) for _, a in pairs[i:i + n]])
            out.append({**{k: v for k, v in answer.items() if k != "content"}, "content": text})
        i += n
    return out


def _joins(answer: str, allowed: set[str] | None) -> bool:
    """Whether ``answer`` may join the answer before it: an action the loop tries there
    (:func:`~lookplangraph.planners.lookplangraph.follows_in_answer`) that names only what
    ``allowed`` holds (None: anything)."""
    action, _, _ = parse_reply(answer)
    return action is not None and follows_in_answer(action) and (allowed is None or all(
        n in allowed for n in (action.node, action.destination) if n is not None))


def _outcome(user_turn: str) -> str:
    """The outcome line a user turn after an answer opens with (its first line)."""
    return user_turn.split("\n", 1)[0]


def merge_turns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One-turn examples written turn by turn from one chat (each the previous one's messages
    plus more, ending with an assistant turn: the Cypher agent's query, rows and answer) merged
    into one conversation each, in order: an assistant turn is trained where an example ended
    at it, untrained otherwise. A row that does not continue the one before it starts a new
    conversation; the merged row keeps the first row's ``meta`` without ``turn`` and gains
    ``turns`` (the trained turns' indices)."""
    out: list[dict[str, Any]] = []
    plain = lambda ms: [{"role": m["role"], "content": m["content"]} for m in ms]  # noqa: E731
    for row in rows:
        messages = plain(row["messages"])
        last = out[-1] if out else None
        if last is not None and len(messages) > len(last["messages"]) and \
                messages[:len(last["messages"])] == plain(last["messages"]):
            extended = [*last["messages"], *({**m, "train": False} if m["role"] == "assistant" else m
                                             for m in messages[len(last["messages"]):-1]), messages[-1]]
            last["messages"] = extended
            last["meta"]["turns"].append(len(extended) - 1)
            continue
        meta = {k: v for k, v in (row.get("meta") or {}).items() if k != "turn"}
        first = [{**m, "train": False} if m["role"] == "assistant" else m for m in messages[:-1]]
        out.append({"messages": [*first, messages[-1]], "meta": {**meta, "turns": [len(messages) - 1]}})
    return out


def mistake(kind: str, action: Action, graph: SceneGraph) -> Action | None:
    """The wrong answer of ``kind`` made from the expert's ``action`` in the true ``graph`` (the
    agent's room and what it holds), or None where the kind does not apply (module doc)."""
    fn, held, room = action.function_name, graph.agent.holding, graph.agent.location
    if kind == "inside-on-surface":
        if fn == "put_on":
            return make("put_inside", action.node, None, action.destination)
        if fn == "rearrange" and action.relation == "ontop":
            return make("rearrange", action.node, "inside", action.destination)
    elif kind == "room-destination":
        if fn in ("put_on", "put_inside") and action.destination != room:
            return make(fn, action.node, None, room)
        if fn == "rearrange" and action.destination != room:
            return make("rearrange", action.node, action.relation, room)
    elif kind == "not-held":
        if held is None and fn not in ("put_on", "put_inside", "done"):
            assets = sorted(n for n in graph.children(room) if graph.nodes[n].layer is Layer.ASSET)
            if assets:
                return make("put_on", None, None, assets[0])
    elif kind == "slots-shuffled":
        if fn == "rearrange" and action.destination and action.node:
            return make("rearrange", action.destination, action.relation, action.node)
    return None


def answer_text(expert_text: str, wrong: Action) -> str:
    """``wrong`` written as the expert writes its answers (the keys of ``expert_text``, its reason
    kept where it has one)."""
    reply = json.loads(expert_text)
    action = wrong.model_dump()
    return json.dumps({k: action[k] if k in action else v for k, v in reply.items()})


@dataclass
class Injected:
    """What :class:`MistakeInjector` did in one episode: the decisions (1-based) it answered with
    a mistake, and each one's kind."""

    steps: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)


class MistakeInjector:
    """The privileged expert's ``complete()`` with one mistake injected in a share ``rate`` of the
    episodes (module doc). Each episode draws, from ``seed`` and the task, whether it gets one,
    its kind (one of ``kinds``) and a decision of :data:`MISTAKE_STEPS`: the mistake is given at
    the first decision from there where its kind applies. When the writer sets
    :attr:`episode_decisions` (the decisions of the episode's clean run, played first), the
    decision is drawn before the last, and from the clean run's second-last decision on any other
    kind that applies is taken instead (in a drawn order), so the share of episodes with a mistake
    is near ``rate`` and the kinds stay mixed; a refused mistake is repeated once with probability
    ``repeat``. A harness tool like the
    expert it wraps: never a model."""

    def __init__(self, expert, rate: float, seed: int = 0, kinds: tuple[str, ...] = MISTAKE_KINDS[:-1],
                 repeat: float = 0.25):
        if not 0 <= rate <= 1 or not 0 <= repeat <= 1:
            raise ValueError(f"the mistake rate and the repeat share are in [0, 1], not {rate} and {repeat}")
        unknown = [k for k in kinds if k not in MISTAKE_KINDS]
        if unknown or not kinds:
            raise ValueError(f"mistake kinds are among {', '.join(MISTAKE_KINDS)}, not {unknown or 'none'}")
        self.expert, self.rate, self.seed, self.repeat = expert, rate, seed, repeat
        self.kinds = tuple(k for k in kinds if k != "repeat-refused")
        self.name = getattr(expert, "name", "expert")
        self.injected = Injected()
        self.episode_key = ""
        self.episode_decisions: int | None = None

    @property
    def constraints(self) -> frozenset[str]:
        return self.expert.constraints

    def begin_episode(self, task, env, planner: str = "lookplangraph", config=None) -> None:
        """Bind the expert to the episode and draw its mistake (from the seed, the task and
        :attr:`episode_key`, which the data writer sets to tell a task's episodes apart)."""
        self.expert.begin_episode(task, env, planner, config)
        self.env, self.calls, self.injected = env, 0, Injected()
        self.rng = self._rng(task)
        steps = MISTAKE_STEPS
        if self.episode_decisions is not None and self.episode_decisions > 1:
            steps = range(MISTAKE_STEPS.start, min(MISTAKE_STEPS.stop, self.episode_decisions))
        self.at = self.rng.choice(steps) if self.rng.random() < self.rate else None
        kind = self.rng.choice(self.kinds)  # the drawn kind first, then the others in a drawn order
        self.order = [kind, *self.rng.sample([k for k in self.kinds if k != kind], len(self.kinds) - 1)]
        self.last_wrong: str | None = None

    def _rng(self, task) -> random.Random:
        return random.Random(f"{self.seed}:{task.split}/{task.id}:{task.instruction}:{self.episode_key}")

    def draws_mistake(self, task) -> bool:
        """Whether :meth:`begin_episode` will draw a mistake for ``task`` under the current
        :attr:`episode_key` (the same first draw), so that a writer plays the clean run, which
        only places the mistake, for those episodes alone."""
        return self._rng(task).random() < self.rate

    def complete(self, messages: list[dict[str, Any]], **request: Any) -> Completion:
        self.calls += 1
        c = self.expert.complete(messages, **request)
        last = str(messages[-1].get("content", "")) if messages else ""
        if self.last_wrong is not None:  # the turn right after a mistake
            wrong, self.last_wrong = self.last_wrong, None
            if last.startswith(FEEDBACK) and self.rng.random() < self.repeat:
                return self._give(wrong, "repeat-refused", c)
            return c
        if self.at is None or self.calls < self.at or self.injected.steps:
            return c
        action, _, _ = parse_reply(c.text)
        if action is None:
            return c
        graph = self.env.true_graph()
        late = self.episode_decisions is not None and self.calls >= self.episode_decisions - 1
        for kind in self.order if late else self.order[:1]:
            wrong = mistake(kind, action, graph)
            if wrong is not None and wrong != action:
                text = answer_text(c.text, wrong)
                self.last_wrong = text
                return self._give(text, kind, c)
        return c  # tried again at the next decision

    def _give(self, text: str, kind: str, expert_reply: Completion) -> Completion:
        parsed, _, _ = parse_reply(text)
        self.expert.follow(str(parsed) if parsed is not None else None)
        self.injected.steps.append(self.calls)
        self.injected.kinds.append(kind)
        return Completion(text=text, usage=Usage(0, 0, None), seconds=0.0)
