"""Greedy decoding of a flat JSON reply schema in process, with the text the schema fixes evaluated
in batches ("jump-forward" decoding).

:class:`JumpDecoder` decodes greedily, running the model only where the schema offers a choice
and evaluating the text it fixes (``{"function_name":``, ``", "node":``, the rest of a name once
its first tokens single it out) as one batch with the next choice. It takes the schemas of
:func:`flat_schema`: objects with a fixed key order, all keys required, whose values are a
finite set of strings and/or null or a free string (``maxLength`` caps it), or an ``anyOf`` of
such objects with the same keys; and (:func:`flat_chain`) an answer of several such objects, one
alone or a list. Anything else gives None and the caller uses its grammar.

The reply is written as ``json.dumps`` writes it. A value is chosen among its candidates token by
token (allowed: tokens whose text is a prefix of a remaining candidate; taken: the highest logit);
once one candidate is left, the rest of it is fixed. A free string ends when the model picks a
token that closes it or at ``maxLength``. Fixed text is tokenized as the tokenizer would; text
after the last choice is not evaluated. Invariant: the result is the JSON text a grammar decode
would give, except where the model would have split fixed text into unusual tokens.
Docs: ``docs/guides/lm-backends.md`` (*In process: jump-forward decoding*).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

#: a value slot: a tuple of JSON literals (``" \\"kitchen-1\\""``, ``" null"``), an int: a
#: free string of at most that many characters, or :data:`VALUE`: any JSON value
Slot = "tuple[str, ...] | int | str"
#: a slot of any JSON value (a number, a list ...), written by the model unconstrained; only in
#: schemas read with ``flat_schema(..., values=True)``, whose replies the caller validates
VALUE = "value"


class Unsure(Exception):
    """The decode left the model's first choice (:meth:`JumpDecoder.decode` with ``strict``): the
    caller decodes the reply another way."""


@dataclass(frozen=True)
class FlatSchema:
    """A schema :class:`JumpDecoder` can decode: per variant of an ``anyOf``, its keys in order
    and the allowed values of each key (:data:`Slot`). The variants' keys are the same except
    with ``flat_schema(..., values=True)``, where the variants still alive at a position must
    agree on its key."""

    variant_keys: tuple[tuple[str, ...], ...]
    variants: tuple[tuple[Any, ...], ...]

    @property
    def keys(self) -> tuple[str, ...]:
        """The first variant's keys (every variant's, outside ``values=True``)."""
        return self.variant_keys[0]


def _literals(prop: dict, values: bool = False) -> "tuple[str, ...] | int | str | None":
    """The values one property allows: JSON literals, a free string's cap, or None (unsupported);
    with ``values``, a constant is a literal and anything else is :data:`VALUE`."""
    prop = {k: v for k, v in prop.items() if k not in ("description", "title")}
    if values:
        if "const" in prop and set(prop) <= {"const", "type"}:
            return (json.dumps(prop["const"]),)
        found = _literals(prop)
        return VALUE if found is None else found
    if prop.get("type") == "null" and len(prop) == 1:
        return ("null",)
    if prop.get("type") == "string" and set(prop) <= {"type", "enum"} and "enum" in prop:
        return tuple(json.dumps(v) for v in prop["enum"] if isinstance(v, str)) or None
    if prop.get("type") == "string" and set(prop) <= {"type", "maxLength"}:
        return int(prop.get("maxLength", 1 << 20))
    if set(prop) == {"anyOf"}:
        out: list[str] = []
        for option in prop["anyOf"]:
            values = _literals(option)
            if not isinstance(values, tuple):
                return None
            out += [v for v in values if v not in out]
        return tuple(out)
    return None


def flat_schema(schema: dict | None, values: bool = False) -> FlatSchema | None:
    """The :class:`FlatSchema` of a JSON schema (module doc), None for one outside that form.
    With ``values``, also objects with other values (:data:`VALUE` slots) and an ``anyOf`` whose
    objects have different keys; such a reply must be validated by the caller."""
    if not isinstance(schema, dict):
        return None
    objects = schema["anyOf"] if set(schema) - {"title", "description"} == {"anyOf"} else [schema]
    variants, variant_keys = [], []
    for obj in objects:
        if not isinstance(obj, dict) or obj.get("type") != "object" or obj.get("additionalProperties") is not False:
            return None
        props = obj.get("properties") or {}
        order = tuple(props)
        if not order or list(obj.get("required") or []) != list(order) or (variant_keys and order != variant_keys[0]
                                                                            and not values):
            return None
        slots = tuple(_literals(props[k], values) for k in order)
        if any(s is None for s in slots):
            return None
        variants.append(slots)
        variant_keys.append(order)
    return FlatSchema(tuple(variant_keys), tuple(variants)) if variant_keys else None


@dataclass(frozen=True)
class ChainSchema:
    """An answer of up to ``limit`` actions (:func:`lookplangraph.agent.decoding.chain_schema`):
    ``first`` alone, or a list of 2 to ``limit`` objects, ``first`` then ``rest``; both flat, with
    the same keys, the last key's values literals."""

    first: FlatSchema
    rest: FlatSchema
    limit: int


def flat_chain(schema: dict | None) -> ChainSchema | None:
    """The :class:`ChainSchema` of a chain schema whose objects :func:`flat_schema` reads, None
    for any other schema."""
    if not isinstance(schema, dict) or set(schema) - {"title", "description"} != {"anyOf"}:
        return None
    first, *lists = schema["anyOf"]
    if not lists or not all(isinstance(x, dict) and x.get("type") == "array" for x in lists):
        return None
    items = [x.get("prefixItems") for x in lists]
    if any(not isinstance(it, list) or len(it) != n or x.get("minItems") != n or x.get("maxItems") != n
           for n, (x, it) in enumerate(zip(lists, items), 2)):
        return None
    rest = items[0][1]
    if any(it[0] != first or any(r != rest for r in it[1:]) for it in items):
        return None
    a, b = flat_schema(first), flat_schema(rest)
    if a is None or b is None or set(a.variant_keys) | set(b.variant_keys) != {a.keys}:
        return None
    if any(not isinstance(v[-1], tuple) for v in (*a.variants, *b.variants)):
        return None
    return ChainSchema(a, b, 1 + len(lists))


class JumpDecoder:
    """Greedy jump-forward decoding of :class:`FlatSchema` replies with a ``llama_cpp.Llama``
    (module doc). It keeps llama-cpp-python's own bookkeeping (``input_ids``, ``n_tokens``) so
    that the prefix cache of the next call, grammar-decoded or not, sees what is in the KV cache.
    The vocabulary's pieces are read once, on first use (about a second for 150k tokens)."""

    def __init__(self, llm):
        self.llm = llm
        self._pieces: list[bytes] | None = None
        self._feed: list[int] = []  # tokens to evaluate before the next choice
        self._n = 0  # tokens of the reply so far

    def _vocab(self) -> None:
        if self._pieces is not None:
            return
        n = self.llm.n_vocab()
        pieces = []
        for i in range(n):
            try:
                pieces.append(self.llm.detokenize([i], special=False))
            except Exception:  # noqa: BLE001 - a token llama.cpp cannot render is never allowed
                pieces.append(b"")
        self._pieces = pieces
        self._ids: dict[bytes, int] = {}
        for i, p in enumerate(pieces):
            if p and p not in self._ids:
                self._ids[p] = i
        bad = b'"\\' + bytes(range(32))
        self._safe = np.array([bool(p) and not any(b in bad for b in p) for p in pieces])
        self._chars = np.array([len(p.decode("utf-8", "ignore")) for p in pieces])

    # -- evaluation --------------------------------------------------------------------------
    def _start(self, prompt: list[int]) -> int:
        """Keep the longest prefix of ``prompt`` already in the KV cache and feed the rest (it is
        evaluated in one batch with the reply's first fixed text); the tokens served from the
        cache."""
        llm = self.llm
        common = 0
        for a, b in zip(llm.input_ids[: llm.n_tokens].tolist(), prompt):
            if a != b:
                break
            common += 1
        common = min(common, len(prompt) - 1)  # the last token is evaluated again for its logits
        if common > 0 and llm._ctx.kv_cache_seq_rm(-1, common, -1):
            llm.n_tokens = common
        else:
            llm.reset()
            common = 0
        self._feed = list(prompt[common:])
        return common

    def _tokens(self, text: bytes) -> list[int]:
        return self.llm.tokenize(text, add_bos=False, special=False) if text else []

    def _logits(self) -> np.ndarray:
        """The logits after everything fed so far (the feed is evaluated in one batch first)."""
        if self._feed:
            self.llm.eval(self._feed)
            self._feed = []
        return np.ctypeslib.as_array(self.llm._ctx.get_logits(), shape=(self.llm.n_vocab(),))

    # -- decoding ----------------------------------------------------------------------------
    def decode(self, prompt: list[int], schema: "FlatSchema | ChainSchema", max_tokens: int,
               strict: bool = False) -> tuple[str, int, int]:
        """The reply text for ``prompt`` (chat-formatted tokens), with the number of prompt tokens
        served from the KV cache and the reply's token count. Fixed text is fed to the model
        only when a later choice needs it: nothing after the last choice is evaluated.
        ``strict``: raise :class:`Unsure` where a free string would leave the model's first
        choice (an escape, a quote the schema does not allow there, the cap), where a value
        ends the reply, or where the variants still possible disagree on the next key. A
        :class:`ChainSchema` is one object or a list: the model chooses ``{`` or ``[{`` first and,
        after each listed object's last value, whether another follows (``}, {``) or not (``}]``)."""
        self._vocab()
        cached = self._start(prompt)
        self._n = 0
        try:
            if isinstance(schema, ChainSchema):
                text = self._chain(schema, max_tokens)
            else:
                text, _ = self._object(schema, max_tokens, strict)
        finally:
            self._feed = []
        return text.decode("utf-8", "replace"), cached, self._n

    def _chain(self, chain: ChainSchema, max_tokens: int) -> bytes:
        key = json.dumps(chain.first.keys[0]).encode() + b":"
        openers = [b"{" + key, b"[{" + key]
        listed = self._choose(openers) == 1
        out = [openers[listed]]
        if not listed:
            text, _ = self._object(chain.first, max_tokens, opened=True)
            return out[0] + text
        schema, n = chain.first, 1
        more = b"}, {" + key  # another object follows: its first key too, so that tokens may span them
        while True:
            ends = (more,) if n == 1 else (b"}]",) if n == chain.limit else (b"}]", more)
            text, end = self._object(schema, max_tokens, opened=True, ends=ends)
            out.append(text)
            if end == b"}]":
                return b"".join(out)
            schema, n = chain.rest, n + 1

    def _object(self, schema: FlatSchema, max_tokens: int, strict: bool = False, *, opened: bool = False,
                ends: tuple[bytes, ...] = (b"}",)) -> tuple[bytes, bytes]:
        """One object of ``schema``, its text and the text that closed it (one of ``ends``, the
        model's choice; each starts with ``}``). ``opened``: its ``{`` and first key are written."""
        out: list[bytes] = []
        alive = list(range(len(schema.variants)))
        k = 0
        closed = b"}"
        while True:
            keys = {schema.variant_keys[v][k] if k < len(schema.variant_keys[v]) else None for v in alive}
            lasts = {k == len(schema.variant_keys[v]) - 1 for v in alive}
            if len(keys) > 1 or len(lasts) > 1:
                raise Unsure("the variants still possible disagree on the next key")
            key = keys.pop()
            if key is None:
                break
            last = lasts.pop()
            lead = b"" if opened and k == 0 else (b"{" if k == 0 else b" ") + json.dumps(key).encode() + b":"
            tails = list(ends) if last else [b","]
            slots = [schema.variants[v][k] for v in alive]
            if all(s == VALUE for s in slots):
                self._fix(lead)
                out.append(lead + self._free_value(tails[0], max_tokens) + tails[0])
                closed = tails[0]
            elif isinstance(slots[0], int):
                self._fix(lead + b' "')
                body = self._free_string(min(s for s in slots if isinstance(s, int)), tails[0], max_tokens, strict)
                out.append(lead + b' "' + body + b'"' + tails[0])
                closed = tails[0]
            elif any(not isinstance(s, tuple) for s in slots):
                raise Unsure("a choice among literals and other values")
            else:
                self._fix(lead)
                values = list(dict.fromkeys(v for s in slots for v in s))
                pairs = [(v, t) for v in values for t in tails]
                chosen = self._choose([b" " + v.encode() + t for v, t in pairs])
                value, closed = pairs[chosen]
                out.append(lead + b" " + value.encode() + closed)
                alive = [v for v in alive
                         if isinstance(schema.variants[v][k], tuple) and value in schema.variants[v][k]]
            if last:
                break
            k += 1
        return b"".join(out), closed

    @property
    def tokens_decoded(self) -> int:
        """The tokens of the last reply so far (also after an :class:`Unsure`)."""
        return self._n

    def _fix(self, text: bytes) -> None:
        """Text the schema fixes: fed with the next evaluation."""
        tokens = self._tokens(text)
        self._feed += tokens
        self._n += len(tokens)

    def _choose(self, candidates: list[bytes]) -> int:
        """The index of the candidate the model writes next (greedy among the tokens that spell a
        prefix of some candidate still possible); the chosen one's rest is fixed text."""
        alive = list(range(len(candidates)))
        pos = 0
        while len(alive) > 1:
            shared = _common_prefix([candidates[i][pos:] for i in alive])
            jump = self._tokens(shared)
            if any(self._tokens(candidates[i][pos:])[:len(jump)] != jump for i in alive):
                jump = jump[:-1]  # the last shared token may merge with what follows: the model's choice
            for t in jump:
                self._feed.append(t)
                self._n += 1
                pos += len(self._pieces[t])
            logits = self._logits()
            best, best_piece, best_logit = None, b"", -np.inf
            for i in alive:
                rest = candidates[i][pos:]
                for end in range(1, len(rest) + 1):
                    t = self._ids.get(rest[:end])
                    if t is not None and logits[t] > best_logit:
                        best, best_piece, best_logit = t, rest[:end], float(logits[t])
            if best is None:  # no token spells the next bytes (cannot happen with a byte-level vocabulary)
                raise RuntimeError(f"no token continues {[candidates[i][pos:] for i in alive][:3]}")
            self._feed.append(best)
            self._n += 1
            alive = [i for i in alive if candidates[i][pos:pos + len(best_piece)] == best_piece]
            pos += len(best_piece)
        self._fix(candidates[alive[0]][pos:])
        return alive[0]

    def _free_string(self, max_chars: int, tail: bytes, max_tokens: int, strict: bool = False) -> bytes:
        """A free string's body, decoded after its opening quote until the model closes it (a
        token ``"`` plus the start of ``tail``), it reaches ``max_chars`` characters, or the
        reply reaches ``max_tokens``; the closing quote and the rest of ``tail`` are fixed.
        ``strict``: :class:`Unsure` unless every token is the model's first choice."""
        body = b""
        chars = 0
        closers = {self._ids[c]: c for c in (b'"' + tail[:i] for i in range(len(tail) + 1)) if c in self._ids}
        while chars < max_chars and self._n < max_tokens:
            logits = self._logits()
            masked = np.where(self._safe & (self._chars + chars <= max_chars), logits, -np.inf)
            best = int(masked.argmax())
            close = max(closers, key=lambda t: logits[t]) if closers else None
            if strict and int(logits.argmax()) not in (best, close):
                raise Unsure("the model's first choice is not allowed in the string")
            if close is not None and (not np.isfinite(masked[best]) or logits[close] >= masked[best]):
                self._feed.append(close)
                self._n += 1
                self._fix(tail[len(closers[close]) - 1:])
                return body
            if not np.isfinite(masked[best]):
                break
            self._feed.append(best)
            self._n += 1
            body += self._pieces[best]
            chars += int(self._chars[best])
        self._fix(b'"' + tail)
        return body

    def _first_choice(self) -> bytes | None:
        """The model's first choice of the next token, fed with the next evaluation: its text, or
        None for an end of turn or another special token (never part of JSON text; not fed)."""
        token = int(self._logits().argmax())
        if not self._pieces[token]:
            return None
        self._feed.append(token)
        self._n += 1
        return self._pieces[token]

    def _free_value(self, tail: bytes, max_tokens: int) -> bytes:
        """Any JSON value after its key's colon, the model's first choice token by token, until it
        writes ``tail`` outside the value (what follows in the token is dropped: the schema fixes
        ``tail``); :class:`Unsure` when the reply ends or runs out of tokens first."""
        text, scan = bytearray(), _JsonScan()
        while self._n < max_tokens:
            piece = self._first_choice()
            if piece is None:
                break
            for i, byte in enumerate(piece):
                if scan.depth == 0 and not scan.in_string and byte == tail[0]:  # the value ends in this
                    self._feed.pop()  # token: it is not evaluated; what it held of the value and the
                    self._n -= 1      # tail are fixed text
                    self._fix(piece[:i] + tail)
                    return bytes(text + piece[:i])
                scan.take(byte)
            text += piece
        raise Unsure("the reply ended inside a value")

    def free_object(self, prompt: list[int], max_tokens: int) -> tuple[bytes, int, int, bool]:
        """Greedy decoding without any constraint, up to the end of the JSON object (or list: an
        answer of several actions) the reply opens: ``(text, cached, tokens, closed)``. ``closed``
        is False when the reply does not open with ``{`` or ``[``, stops (an end-of-turn or other
        special token) or reaches ``max_tokens`` first. The text of the token that closes the
        value is cut after its ``}`` or ``]``; nothing after the last choice is evaluated."""
        self._vocab()
        cached = self._start(prompt)
        self._n = 0
        text, scan = bytearray(), _JsonScan()
        try:
            while self._n < max_tokens:
                piece = self._first_choice()
                if piece is None:
                    return bytes(text), cached, self._n, False
                for i, byte in enumerate(piece):
                    if not text and i == 0 and byte not in b"{[":
                        return bytes(piece), cached, self._n, False
                    scan.take(byte)
                    if scan.depth == 0:
                        return bytes(text + piece[: i + 1]), cached, self._n, True
                text += piece
            return bytes(text), cached, self._n, False
        finally:
            self._feed = []


class _JsonScan:
    """Where JSON text read byte by byte stands: the nesting depth of objects and lists, and
    whether it is inside a string (and after a backslash there)."""

    def __init__(self) -> None:
        self.depth, self.in_string, self.escaped = 0, False, False

    def take(self, byte: int) -> None:
        if self.in_string:
            self.escaped, self.in_string = (False, True) if self.escaped else (byte == 0x5C, byte != 0x22)
        elif byte == 0x22:
            self.in_string = True
        elif byte in b"{[":
            self.depth += 1
        elif byte in b"}]":
            self.depth -= 1


def _common_prefix(texts: list[bytes]) -> bytes:
    first, last = min(texts), max(texts)
    i = 0
    while i < len(first) and first[i] == last[i]:
        i += 1
    return first[:i]
