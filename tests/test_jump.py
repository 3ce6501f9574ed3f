"""Jump-forward decoding of flat JSON schemas (lookplangraph.lm.jump).

The unit tests drive :class:`JumpDecoder` with ``ScriptedLlama``, a test double labelled as such:
a tiny byte-level vocabulary whose "model" puts the highest logit on the token that continues a
target text it was given. It checks the decoder's own logic (what is fixed, what is chosen, when
the model is run). The real-model test at the end uses the embedded 0.5B model."""

from __future__ import annotations

import ctypes
import json

import numpy as np
import pytest

from lookplangraph.agent.decoding import action_schema, chain_schema, constrained_schema
from lookplangraph.lm.jump import JumpDecoder, flat_chain, flat_schema

PIECES = [bytes([b]) for b in range(256)] + [
    b'{"', b'":', b' "', b'",', b' null', b'"}', b"function", b"_name", b"node", b"reason", b"kitchen", b"-1",
    b"go", b"_to", b"pick", b"_up", b"done", b"the", b" cup", b" is", b" here", b"relation", b"destination"]


class ScriptedLlama:
    """TEST DOUBLE for ``llama_cpp.Llama``: greedy longest-match tokenizer over :data:`PIECES`;
    after each ``eval`` the logits favour the token that continues ``target`` from the text
    evaluated so far (longer matches higher), everything else gets -10. Counts ``eval`` calls."""

    def __init__(self, target: bytes, prompt_len: int = 3):
        self.target, self.evals, self.evaluated = target, 0, []
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self.prompt_len = prompt_len
        self._logits = np.zeros(len(PIECES), dtype=np.float32)
        self._ctx = self

    def n_vocab(self) -> int:
        return len(PIECES)

    def detokenize(self, ids, special=False) -> bytes:
        return b"".join(PIECES[i] for i in ids)

    def tokenize(self, text: bytes, add_bos=False, special=False) -> list[int]:
        out, i = [], 0
        while i < len(text):
            best = max((j for j, p in enumerate(PIECES) if text.startswith(p, i)), key=lambda j: len(PIECES[j]))
            out.append(best)
            i += len(PIECES[best])
        return out

    def kv_cache_seq_rm(self, seq, start, end) -> bool:
        return True

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens) -> None:
        self.evals += 1
        self.evaluated.append(len(tokens))
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        written = self.detokenize(self.input_ids[self.prompt_len:self.n_tokens].tolist())
        rest = self.target[len(written):] if self.target.startswith(written) else b""
        self._logits[:] = -10
        for i, p in enumerate(PIECES):
            if rest.startswith(p):
                self._logits[i] = len(p)

    def get_logits(self):
        return self._logits.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def reply(fn, node, relation=None, destination=None, reason=None) -> bytes:
    d = {"function_name": fn, "node": node, "relation": relation, "destination": destination}
    if reason is not None:
        d["reason"] = reason
    return json.dumps(d).encode()


def decode(target: bytes, schema: dict, max_tokens: int = 200):
    llm = ScriptedLlama(target)
    text, cached, n = JumpDecoder(llm).decode([0, 1, 2], flat_schema(schema), max_tokens)
    return text, llm, n


def test_the_schemas_it_takes_and_the_ones_it_leaves_to_the_grammar():
    assert flat_schema(action_schema(["kitchen-1"])).keys == ("function_name", "node", "relation", "destination",
                                                              "reason")
    excluded = constrained_schema(["kitchen-1", "cup-1"], [("go_to", "kitchen-1", None, None)])
    assert len(flat_schema(excluded).variants) > 1
    assert flat_schema(action_schema(["kitchen-1"], reason_max_length=0)).keys[-1] == "destination"
    for other in ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
                   "additionalProperties": False},
                  {"type": "object", "properties": {"a": {"type": "string", "enum": ["x"]}}, "required": [],
                   "additionalProperties": False},
                  {"type": "array"}, None):
        assert flat_schema(other) is None


def test_it_writes_what_the_model_prefers_and_runs_the_model_only_at_choices():
    target = reply("go_to", "kitchen-1")
    text, llm, n = decode(target, action_schema(["kitchen-1", "cup-1"], reason_max_length=0))
    assert text.encode() == target
    assert n == len(llm.tokenize(target))  # every reply token counted ...
    # ... but the model ran once per token it chose (`go`; ` "` rather than ` null`, then `kitchen`;
    # ` null`; ` null`), each time on the prompt or on the fixed text since the last choice in one
    # batch, and not at all after the last choice
    assert llm.evals == 5 and max(llm.evaluated) > 1 and n > 2 * llm.evals


def test_excluded_actions_cannot_be_written_even_when_the_model_wants_them():
    schema = constrained_schema(["kitchen-1", "cup-1"], [("go_to", "kitchen-1", None, None)], reason_max_length=0)
    text, _, _ = decode(reply("go_to", "kitchen-1"), schema)
    got = json.loads(text)
    assert (got["function_name"], got["node"]) != ("go_to", "kitchen-1")


def test_a_free_string_ends_where_the_model_closes_it_or_at_its_cap():
    text, _, _ = decode(reply("pick_up", "cup-1", reason="the cup is here"), action_schema(["cup-1"]))
    assert json.loads(text)["reason"] == "the cup is here"
    text, _, _ = decode(reply("pick_up", "cup-1", reason="the cup is here"), action_schema(["cup-1"],
                                                                                         reason_max_length=7))
    assert json.loads(text)["reason"] == "the cup"
    # a reply whose max_tokens run out in the reason is still one JSON object with its action
    full, _, n = decode(reply("pick_up", "cup-1", reason="the cup is here"), action_schema(["cup-1"]))
    cut, _, _ = decode(reply("pick_up", "cup-1", reason="the cup is here"), action_schema(["cup-1"]),
                       max_tokens=n - 3)
    assert json.loads(cut)["function_name"] == "pick_up"
    assert "the cup is here".startswith(json.loads(cut)["reason"]) and json.loads(cut)["reason"] != "the cup is here"


def test_quotes_and_backslashes_never_enter_a_free_string():
    text, _, _ = decode(reply("done", None, reason='say "hi" \\ bye'), action_schema(["cup-1"]))
    assert json.loads(text)["reason"] == "say "  # the model's quote closes the string


@pytest.mark.lm
def test_the_real_model_decodes_a_valid_reply_from_the_same_prompt_tokens(small_model_path):
    from lookplangraph.lm import LlamaCppBackend

    lm = LlamaCppBackend(str(small_model_path), n_ctx=2048)
    messages = [{"role": "system", "content": "Answer with one JSON action."},
                {"role": "user", "content": "Go to the kitchen. Places: kitchen-1, hall-1. You are in hall-1."}]
    schema = constrained_schema(["kitchen-1", "hall-1"], [("go_to", "hall-1", None, None)], reason_max_length=40)
    fast = lm.complete(messages, schema=schema)
    assert fast.error is None and fast.parsed["function_name"] in ("go_to", "done", "pick_up", "discover_objects",
                                                                   "open", "close", "turn_on", "turn_off",
                                                                   "put_on", "put_inside", "rearrange")
    assert (fast.parsed["function_name"], fast.parsed["node"]) != ("go_to", "hall-1")
    assert len(fast.parsed["reason"]) <= 40
    # the prompt is exactly the tokens create_chat_completion evaluates (the grammar path)
    lm.jump_forward = False
    lm.llm.reset()
    slow = lm.complete(messages, schema=schema)
    prompt = lm.prompt_tokens(messages)
    assert lm.llm.input_ids[:len(prompt)].tolist() == prompt and slow.usage.prompt_tokens == len(prompt)
    assert slow.error is None
    # and a second jump call reuses the KV cache of the first
    lm.jump_forward = True
    again = lm.complete(messages, schema=schema)
    assert again.usage.cached_tokens == len(prompt) - 1 and again.text == fast.text


def test_a_free_object_is_decoded_greedily_up_to_its_closing_brace():
    target = json.dumps({"thought": "t", "tool": "answer", "answer": ["cup-1", "a}b"]}).encode() + b"\n trailing"
    llm = ScriptedLlama(target)
    text, cached, n, closed = JumpDecoder(llm).free_object([0, 1, 2], 500)
    assert closed and text == target.split(b"\n")[0]  # a brace inside a string does not close it
    assert llm.n_tokens == 3 + n - 1  # the closing token is not evaluated
    # a reply that does not open an object, or stops first, is reported as not closed
    assert JumpDecoder(ScriptedLlama(b'x{"a": 1}')).free_object([0, 1, 2], 500)[3] is False
    cut = JumpDecoder(ScriptedLlama(b'{"a": "long text"}')).free_object([0, 1, 2], 4)
    assert cut[3] is False and cut[2] == 4


def test_grammar_text_is_json_as_dumps_writes_it_with_keys_in_the_schemas_order():
    from lookplangraph.lm.llamacpp import grammar_text

    schema = {"anyOf": [{"type": "object", "properties": {"thought": {"type": "string"}, "tool": {"const": "q"},
                                                           "query": {"type": "string"}}},
                        {"$ref": "#/$defs/A"}],
              "$defs": {"A": {"type": "object", "properties": {"thought": {"type": "string"},
                                                               "answer": {"type": "array", "items": {"$ref": "#/$defs/N"}}}},
                        "N": {"type": "object", "properties": {"node": {"type": "string"}, "rel": {"type": "string"}}}}}
    assert grammar_text('{"thought": "t", "tool": "q", "query": "MATCH (n) RETURN n"}', schema)
    assert grammar_text('{"thought": "é", "answer": [{"node": "a", "rel": "b"}]}', schema)
    assert not grammar_text('{"tool": "q", "thought": "t", "query": "x"}', schema)  # keys out of order
    assert not grammar_text('{"thought": "t", "answer": [{"rel": "b", "node": "a"}]}', schema)  # nested order
    assert not grammar_text('{"thought":"t", "tool": "q", "query": "x"}', schema)  # other spacing
    assert not grammar_text('{"thought": "t", "tool": "q", "query": "x"', schema)  # cut off


@pytest.mark.lm
def test_the_real_model_gives_the_grammar_decodes_text_without_the_grammar(small_model_path):
    from lookplangraph.cypher.agent import AgentConfig, reply_schema
    from lookplangraph.cypher.answers import answer_schema
    from lookplangraph.lm import LlamaCppBackend

    lm = LlamaCppBackend(str(small_model_path), n_ctx=2048)
    messages = [{"role": "system", "content": 'Reply with JSON: {"thought": "...", "tool": "answer", "answer": [...]}'},
                {"role": "user", "content": "Which fruits are on table-1? Rows: apple-1, pear-2. Answer now."}]
    schema = reply_schema(answer_schema("set"), AgentConfig(), query=False)
    fast = lm.complete(messages, schema=schema)
    lm.jump_forward = False
    lm.llm.reset()
    slow = lm.complete(messages, schema=schema)
    assert slow.error is None and fast.error is None
    # kept without the grammar only when it is the grammar's own text; else decoded with it
    assert fast.text == slow.text.rstrip()


CYPHER_LIKE = {"anyOf": [
    {"type": "object", "properties": {"thought": {"type": "string", "maxLength": 50}, "tool": {"const": "query"},
                                      "query": {"type": "string", "maxLength": 80}},
     "required": ["thought", "tool", "query"], "additionalProperties": False},
    {"type": "object", "properties": {"thought": {"type": "string", "maxLength": 50}, "tool": {"const": "answer"},
                                      "answer": {"type": "array", "items": {"type": "string"}}},
     "required": ["thought", "tool", "answer"], "additionalProperties": False}]}


def test_with_values_it_decodes_variants_with_other_keys_and_any_json_value():
    from lookplangraph.lm.jump import Unsure

    assert flat_schema(CYPHER_LIKE) is None  # the planner's strict form leaves it to the grammar
    keyed = flat_schema(CYPHER_LIKE, values=True)
    for target in ({"thought": "t", "tool": "answer", "answer": ["cup-1", "a,b}"]},
                   {"thought": "go", "tool": "query", "query": "MATCH (n {name: 'x'}) RETURN n"}):
        text = json.dumps(target).encode()
        out, _, n = JumpDecoder(ScriptedLlama(text)).decode([0, 1, 2], keyed, 500, strict=True)
        assert out == text.decode()
    # strict: an escape the model wants in a free string is not silently dropped
    escaped = json.dumps({"thought": "t", "tool": "query", "query": 'say "hi"'}).encode()
    with pytest.raises(Unsure):
        JumpDecoder(ScriptedLlama(escaped)).decode([0, 1, 2], keyed, 500, strict=True)
    # and a value the reply never closes is unsure too
    with pytest.raises(Unsure):
        JumpDecoder(ScriptedLlama(b'{"thought": "t", "tool": "answer", "answer": ["a"')).decode(
            [0, 1, 2], keyed, 500, strict=True)


def chain(k: int = 3, excluded=()):
    names = ["kitchen-1", "cup-1"]
    first = constrained_schema(names, excluded, reason_max_length=0)
    return chain_schema(first, constrained_schema(names, (), reason_max_length=0), k)


def test_an_answer_of_several_actions_is_decoded_one_object_or_a_list():
    assert flat_chain(chain()).limit == 3 and flat_schema(chain()) is None
    assert flat_chain(chain_schema(action_schema(["cup-1"]), action_schema(["cup-1"]), 2)) is None  # a reason last
    assert flat_chain(action_schema(["cup-1"], reason_max_length=0)) is None
    one = reply("go_to", "kitchen-1")
    two = b"[" + reply("go_to", "kitchen-1") + b", " + reply("pick_up", "cup-1") + b"]"
    three = b"[" + b", ".join([reply("go_to", "kitchen-1"), reply("pick_up", "cup-1"), reply("done", None)]) + b"]"
    for target in (one, two, three):
        llm = ScriptedLlama(target)
        text, _, n = JumpDecoder(llm).decode([0, 1, 2], flat_chain(chain()), 400)
        assert text.encode() == target and n == len(llm.tokenize(target))
    # the limit closes the list whatever the model wants next; the exclusions bind the first action
    four = b"[" + b", ".join([reply("pick_up", "cup-1")] * 4) + b"]"
    text, _, _ = JumpDecoder(ScriptedLlama(four)).decode([0, 1, 2], flat_chain(chain(2)), 400)
    assert json.loads(text) == [json.loads(reply("pick_up", "cup-1"))] * 2
    text, _, _ = JumpDecoder(ScriptedLlama(two)).decode(
        [0, 1, 2], flat_chain(chain(3, [("go_to", "kitchen-1", None, None)])), 400)
    first = json.loads(text)[0] if text.startswith("[") else json.loads(text)
    assert (first["function_name"], first["node"]) != ("go_to", "kitchen-1")


def test_the_real_model_writes_the_grammars_chain_without_it(small_model_path):
    from lookplangraph.lm import LlamaCppBackend

    lm = LlamaCppBackend(str(small_model_path), n_ctx=2048)
    example = json.dumps([json.loads(reply("go_to", "kitchen-1")), json.loads(reply("pick_up", "cup-1"))])
    messages = [{"role": "system", "content": f"Answer with a JSON list of actions, e.g. {example}"},
                {"role": "user", "content": "The cup is in the kitchen. Go there, take the cup and stop."}]
    texts = []
    for jump in (True, False):
        lm.jump_forward = jump
        lm.llm.reset()
        done = lm.complete(messages, schema=chain(3))
        assert done.error is None
        texts.append(done.text.rstrip())
    assert texts[0] == texts[1] and texts[0].startswith("[")  # the same greedy text, by jumps or by the grammar
