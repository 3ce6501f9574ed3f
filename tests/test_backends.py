"""LM backends: reply parsing, the reply schema, the OpenAI-compatible client against a tiny local
HTTP server (retries, backoff, clear errors), the reply cache, and (marked ``lm``) the real
Qwen2.5-Coder-0.5B model in process and through ``llama_cpp.server``."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lookplangraph.agent.decide import LMReply, decide
from lookplangraph.agent.decoding import action_schema, reply_format_instructions
from lookplangraph.agent.replies import parse_reply
from lookplangraph.lm import (
    LMBackend, LMError, Relaxed, ScriptedBackend, Usage, default_gpu_layers, default_threads, make_backend, parse_spec,
)
from lookplangraph.lm.cache import CachedBackend, completion_key
from sgs.actions import FUNCTIONS, Action

# ------------------------------------------------------------------------------------------
# Parsing. SCRIPTED_REPLIES: scripted, not a real LM -- hand-written texts of the shapes small
# models produce, each with the action it must parse to (call syntax) or None for an error.
# ------------------------------------------------------------------------------------------

SCRIPTED_REPLIES = [
    ('{"function_name": "pick_up", "node": "apple-1", "relation": null, "destination": null, "reason": "needed"}',
     "pick_up(apple-1)", "needed"),
    ('```json\n{"function_name": "open", "node": "fridge-1", "relation": null, "destination": null, "reason": "r"}\n```',
     "open(fridge-1)", "r"),
    ('Sure! My next action:\n{"function_name": "go_to", "node": "kitchen-1", "reason": "first line\nsecond line"}\nDone.',
     "go_to(kitchen-1)", "first line\nsecond line"),
    ("{'function_name': 'turn_on', 'node': 'lamp-1', 'relation': None, 'destination': None, 'reason': 'dark'}",
     "turn_on(lamp-1)", "dark"),
    ('{"function_name": "put_inside", "node": null, "relation": null, "destination": "fridge-1", "reason": "x",}',
     "put_inside(fridge-1)", "x"),
    ('{"reason": "tidy up", "action": {"function_name": "rearrange", "node": "cup-1", "relation": "inside", "destination": "sink-1"}}',
     "rearrange(cup-1, inside, sink-1)", "tidy up"),
    ('{"action": "discover_objects(table-1)", "reason": "look"}', "discover_objects(table-1)", "look"),
    ("pick_up(apple-1)", "pick_up(apple-1)", None),
    ("`rearrange(cup-1, on, table-1)`", "rearrange(cup-1, ontop, table-1)", None),
    ("I think the robot should go_to(bedroom-1) to find the book.", "go_to(bedroom-1)", "I think"),
    # cut off by max_tokens inside the final reason: the action is complete, keep it
    ('{"function_name": "close", "node": "fridge-1", "relation": null, "destination": null, "reason": "the fridge is',
     "close(fridge-1)", "the fridge is"),
    ('[{"function_name": "done", "node": null, "relation": null, "destination": null, "reason": "finished"}]',
     "done()", "finished"),
    # errors: short feedback for the LM, never an exception
    ("", None, None),
    ("   \n", None, None),
    ("I am not sure what to do.", None, None),
    ('{"function_name": "pick_up", "node": "app', None, None),  # cut inside an action field
    ('{"function_name": 42, "node": "apple-1"}', None, None),
    ('{"function_name": "pick_up", "node": ["apple-1"]}', None, None),
    ('{"node": "apple-1", "reason": "no function"}', None, "no function"),
    ('[{"function_name": "go_to", "node": "a-1"}, {"function_name": "done"}]', None, None),
    ("pick_up(apple-1, table-1)", None, None),
]


@pytest.mark.parametrize("text,expected,reason", SCRIPTED_REPLIES)
def test_parse_scripted_replies(text, expected, reason):
    action, got_reason, error = parse_reply(text)
    if expected is None:
        assert action is None
        assert isinstance(error, str) and error.endswith(".") and len(error) < 400
    else:
        assert error is None, error
        assert str(action) == expected
    if reason is not None:
        assert got_reason is not None and got_reason.startswith(reason)


def test_parse_never_raises_on_odd_input():
    for text in [None, "{", "}", "[", "{{{{", '{"a": }', "```", "```json\n", "null", "42", '"pick_up"', "()", "{'a': 1"]:
        action, _, error = parse_reply(text)
        assert action is None and error


def test_parse_empty_reply_says_so():
    assert "empty" in parse_reply("")[2]
    assert "cut off" in parse_reply('{"function_name": "pick_up", "node": "app')[2]


# ------------------------------------------------------------------------------------------
# Schema
# ------------------------------------------------------------------------------------------

def test_schema_enums_and_order():
    names = ["kitchen-1", "apple-1", "table-1"]
    s = action_schema(names)
    assert list(s["properties"]) == ["function_name", "node", "relation", "destination", "reason"]
    assert s["required"] == list(s["properties"]) and s["additionalProperties"] is False
    assert s["properties"]["function_name"]["enum"] == list(FUNCTIONS)
    for key in ("node", "destination"):
        variants = s["properties"][key]["anyOf"]
        assert {"type": "string", "enum": names} in variants and {"type": "null"} in variants
    assert {"type": "string", "enum": ["ontop", "inside"]} in s["properties"]["relation"]["anyOf"]
    assert "maxLength" not in s["properties"]["reason"]
    json.dumps(s)  # serialisable


def test_schema_options():
    s = action_schema(None, reason_first=True, reason_max_length=120)
    assert list(s["properties"])[0] == "reason" and s["properties"]["reason"]["maxLength"] == 120
    assert {"type": "string"} in s["properties"]["node"]["anyOf"]  # free names
    assert action_schema([])["properties"]["node"] == {"description": s["properties"]["node"]["description"], "type": "null"}
    assert action_schema(["a-1", "a-1", "b-1"])["properties"]["node"]["anyOf"][0]["enum"] == ["a-1", "b-1"]


def test_instructions_match_schema_order():
    text = reply_format_instructions()
    assert text.index('"function_name"') < text.index('"reason"')
    action, reason, error = parse_reply(text[text.index("{"): text.rindex("}") + 1])
    assert error is None and str(action) == "pick_up(apple-1)"
    assert reply_format_instructions(reason_first=True).index('"reason"') < reply_format_instructions(True).index('"function_name"')


def test_schema_is_accepted_by_llama_cpp_grammar():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    for schema in (action_schema(["kitchen-1", "apple-1"]), action_schema(None, reason_max_length=200), action_schema([])):
        llama_cpp.LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


# ------------------------------------------------------------------------------------------
# Specs, scripted backend, cache
# ------------------------------------------------------------------------------------------

def test_parse_spec():
    assert parse_spec("llamacpp:qwen2.5-coder-0.5b") == ("llamacpp", "qwen2.5-coder-0.5b", None)
    assert parse_spec("llamacpp:/models/x.gguf") == ("llamacpp", "/models/x.gguf", None)
    assert parse_spec("llamacpp:") == ("llamacpp", "qwen2.5-coder-1.5b", None)
    assert parse_spec("openai:gpt-4o") == ("openai", "gpt-4o", None)
    assert parse_spec("openai:gpt-4o@https://api.example.com/v1") == ("openai", "gpt-4o", "https://api.example.com/v1")
    assert parse_spec("openai:qwen2.5-coder:1.5b@http://localhost:11434/v1") == (
        "openai", "qwen2.5-coder:1.5b", "http://localhost:11434/v1")
    assert parse_spec("openai:user@org/model") == ("openai", "user@org/model", None)
    with pytest.raises(LMError, match="unknown backend kind"):
        parse_spec("gpt:4")
    with pytest.raises(LMError, match="no kind"):
        parse_spec("gpt-4o")


def test_scripted_backend_and_make_backend():
    b = make_backend("scripted:go_to(kitchen-1)||pick_up(apple-1)")
    r1, r2, r3 = (decide(b, "sys", "user", None) for _ in range(3))
    assert [str(r.action) for r in (r1, r2, r3)] == ["go_to(kitchen-1)", "pick_up(apple-1)", "pick_up(apple-1)"]
    assert isinstance(r1, LMReply) and r1.usage.prompt_tokens >= 0 and b.name == "scripted"
    assert isinstance(b, LMBackend)


def test_default_threads_leaves_busy_cpus_alone(monkeypatch):
    import lookplangraph.lm.llamacpp as llamacpp

    monkeypatch.delenv("LOOKPLANGRAPH_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    for busy, threads in ((0.2, 4), (0.6, 3), (2.4, 2), (3.5, 1), (9.0, 1)):
        monkeypatch.setattr(llamacpp, "busy_cpus", lambda: busy)
        assert default_threads() == threads, busy
    monkeypatch.setenv("LOOKPLANGRAPH_THREADS", "3")  # a queue of runs sets it: the load average lags
    assert default_threads() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("LOOKPLANGRAPH_THREADS", bad)
        with pytest.raises(LMError, match="LOOKPLANGRAPH_THREADS must be a positive integer"):
            default_threads()


def test_busy_cpus_reads_the_machine_now_and_falls_back_to_the_load_average(monkeypatch):
    import lookplangraph.lm.llamacpp as llamacpp

    if os.path.exists("/proc/stat"):
        assert 0.0 <= llamacpp.busy_cpus(0.05) <= (os.cpu_count() or 1)
    counters = iter([[100, 0, 100, 800, 0, 0, 0, 0], [150, 0, 150, 900, 0, 0, 0, 0]])  # half busy over the window
    monkeypatch.setattr(llamacpp, "_cpu_times", lambda: next(counters))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert llamacpp.busy_cpus(0) == pytest.approx(2.0)

    def unreadable():
        raise OSError("no /proc here")

    monkeypatch.setattr(llamacpp, "_cpu_times", unreadable)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.7, 0.0, 0.0))
    assert llamacpp.busy_cpus(0) == 1.7


def test_default_gpu_layers_reads_the_environment(monkeypatch):
    monkeypatch.delenv("LOOKPLANGRAPH_GPU_LAYERS", raising=False)
    assert default_gpu_layers() == 0
    for value, layers in (("-1", -1), ("28", 28), (" 0 ", 0)):
        monkeypatch.setenv("LOOKPLANGRAPH_GPU_LAYERS", value)
        assert default_gpu_layers() == layers
    for bad, message in (("all", "must be an integer"), ("-2", "must be -1")):
        monkeypatch.setenv("LOOKPLANGRAPH_GPU_LAYERS", bad)
        with pytest.raises(LMError, match=message):
            default_gpu_layers()


def test_extra_buffers_are_off_on_amx_cpus_unless_the_environment_says(monkeypatch):
    from lookplangraph.lm import llamacpp

    monkeypatch.delenv("LOOKPLANGRAPH_LLAMA_EXTRA_BUFFERS", raising=False)
    for amx in (True, False):
        monkeypatch.setattr(llamacpp, "cpu_has_amx", lambda amx=amx: amx)
        assert llamacpp.default_extra_buffers() is (not amx)
    for value, on in (("1", True), ("0", False), (" 1 ", True)):
        monkeypatch.setenv("LOOKPLANGRAPH_LLAMA_EXTRA_BUFFERS", value)
        assert llamacpp.default_extra_buffers() is on
    monkeypatch.setenv("LOOKPLANGRAPH_LLAMA_EXTRA_BUFFERS", "yes")
    with pytest.raises(LMError, match="must be 1 or 0"):
        llamacpp.default_extra_buffers()


def test_load_llama_sets_use_extra_bufts_only_while_loading(monkeypatch, small_model_path):
    """The setting reaches the model parameters llama.cpp loads with, and the library's own
    default is back afterwards."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from lookplangraph.lm.llamacpp import load_llama

    seen = []
    real = llama_cpp.Llama.__init__

    def spy(self, *a, **kw):
        seen.append(llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts)
        return real(self, *a, **kw)

    monkeypatch.setattr(llama_cpp.Llama, "__init__", spy)
    for on in (False, True):
        load_llama(small_model_path, extra_buffers=on, vocab_only=True, verbose=False)
    assert seen == [False, True]
    assert llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts is True


def test_reply_cache_records_and_replays(tmp_path):
    path = tmp_path / "replies.jsonl"
    inner = ScriptedBackend(['{"function_name": "pick_up", "node": "apple-1", "reason": "r"}', "garbage"], name="scripted:x")
    cached = CachedBackend(inner, path)
    r1 = decide(cached, "S", "D1", ["apple-1"])
    r2 = decide(cached, "S", "D2", ["apple-1"])
    again = decide(cached, "S", "D1", ["apple-1"])
    assert inner.calls == 2 and cached.hits == 1 and again == r1
    assert len(path.read_text().splitlines()) == 2
    with open(path, "a") as f:
        f.write('{"key": "torn')  # an interrupted write
    replay = CachedBackend(None, path, name="scripted:x")  # recorded from a backend that enforces nothing
    assert decide(replay, "S", "D1", ["apple-1"]) == r1
    r2b = decide(replay, "S", "D2", ["apple-1"])
    assert r2b.action is None and r2b.error == r2.error and r2b.text == "garbage"
    with pytest.raises(LMError, match="replay"):
        decide(replay, "S", "D3", ["apple-1"])
    msgs = [{"role": "user", "content": "D"}]
    assert completion_key("a", msgs, None, None, None, None) != completion_key("b", msgs, None, None, None, None)
    assert completion_key("a", msgs, None, {"type": "object"}, None, None) != completion_key("a", msgs, None, None, None, None)
    # the same request with another exclusion count asks a backend without a grammar for another sample
    relaxed = [completion_key("a", msgs, None, None, None, None, relaxed=Relaxed(None, n)) for n in (1, 2)]
    assert relaxed[0] != relaxed[1] and completion_key("a", msgs, None, None, None, None) not in relaxed


# ------------------------------------------------------------------------------------------
# OpenAI-compatible client against a tiny local server
# ------------------------------------------------------------------------------------------

HAVE_OPENAI = importlib.util.find_spec("openai") is not None
needs_openai = pytest.mark.skipif(not HAVE_OPENAI, reason="the openai package is not installed (pip install openai)")

GOOD = '{"function_name": "open", "node": "fridge-1", "relation": null, "destination": null, "reason": "closed"}'


def completion(text: str, cached: int | None = 64) -> dict:
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": "c-1", "object": "chat.completion", "created": 0, "model": "m1",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": usage}


class FakeServer:
    """An OpenAI-style server on 127.0.0.1 that answers chat completions from a script of
    ``(status, body, delay_s)`` (the last entry repeats) and lists ``models`` at /v1/models."""

    def __init__(self, script, models=("m1", "m2")):
        self.script, self.models, self.requests = list(script), list(models), []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body):
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in server.models]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append((self.path, body))
                i = min(len(server.requests) - 1, len(server.script) - 1)
                status, reply, delay = server.script[i]
                if delay:
                    time.sleep(delay)
                self._send(status, reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def err(status, message):
    return (status, {"error": {"message": message, "type": "server_error", "code": status}}, 0)


def backend(url, **kw):
    from lookplangraph.lm import OpenAIBackend
    kw.setdefault("backoff", 0.01)
    return OpenAIBackend("m1", base_url=url, api_key="test-key", **kw)


@needs_openai
def test_openai_success_usage_and_request():
    with FakeServer([(200, completion(GOOD), 0)]) as srv:
        b = backend(srv.url)
        r = decide(b, "STATIC", "DYNAMIC", ["fridge-1", "kitchen-1"])
    assert str(r.action) == "open(fridge-1)" and r.reason == "closed" and r.error is None
    assert r.usage == Usage(prompt_tokens=100, completion_tokens=20, cached_tokens=64)
    assert b.name == f"openai:m1@{srv.url}"
    path, body = srv.requests[0]
    assert path.endswith("/chat/completions")
    assert body["messages"] == [{"role": "system", "content": "STATIC"}, {"role": "user", "content": "DYNAMIC"}]
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["schema"]["properties"]["node"]["anyOf"][0]["enum"] == ["fridge-1", "kitchen-1"]
    assert body["temperature"] == 0


@needs_openai
@pytest.mark.parametrize("mode", ["json_schema", "json_object", "structured_outputs"])
def test_openai_exclusions_go_into_grammar_schemas_or_fall_back_to_sampling(mode):
    excluded = [("open", "fridge-1", None, None)]
    with FakeServer([(200, completion(GOOD), 0), (200, completion(GOOD), 0)]) as srv:
        b = backend(srv.url, structured=mode, retry_temperature=0.8)
        decide(b, "S", "D", ["fridge-1", "kitchen-1"])
        decide(b, "S", "D", ["fridge-1", "kitchen-1"], excluded)
    plain, narrowed = (body for _, body in srv.requests)
    schema = {"json_schema": lambda body: body["response_format"]["json_schema"]["schema"],
              "json_object": lambda body: body["response_format"]["schema"],
              "structured_outputs": lambda body: body["structured_outputs"]["json"]}[mode]
    assert "anyOf" not in schema(plain) and plain["temperature"] == 0
    if mode == "json_schema":  # OpenAI's strict mode: object root, so sample instead
        assert schema(narrowed) == schema(plain)
        assert narrowed["temperature"] == 0.8 and narrowed["seed"] != plain["seed"]
    else:
        variants = schema(narrowed)["anyOf"]
        opens = [v for v in variants if "open" in v["properties"]["function_name"]["enum"]]
        assert len(opens) == 1 and "fridge-1" not in json.dumps(opens[0]["properties"]["node"])
        assert narrowed["temperature"] == 0


@needs_openai
def test_openai_no_cached_tokens_reported_is_none():
    with FakeServer([(200, completion(GOOD, cached=None), 0)]) as srv:
        r = decide(backend(srv.url), "S", "D", None)
    assert r.usage.cached_tokens is None and r.usage.prompt_tokens == 100


@needs_openai
@pytest.mark.parametrize("mode", ["json_object", "guided_json", "structured_outputs", "none"])
def test_openai_structured_modes(mode):
    with FakeServer([(200, completion(GOOD), 0)]) as srv:
        decide(backend(srv.url, structured=mode), "S", "D", ["fridge-1"])
    body = srv.requests[0][1]
    if mode == "json_object":
        assert body["response_format"]["type"] == "json_object"
        assert body["response_format"]["schema"]["properties"]["function_name"]["enum"] == list(FUNCTIONS)
    elif mode == "guided_json":
        assert "response_format" not in body and body["guided_json"]["required"][0] == "function_name"
    elif mode == "structured_outputs":
        assert "response_format" not in body and body["structured_outputs"]["json"]["type"] == "object"
    else:
        assert "response_format" not in body and "guided_json" not in body


@needs_openai
@pytest.mark.parametrize("mode, field", [("json_object", "grammar"), ("guided_json", "guided_grammar"),
                                         ("structured_outputs", "structured_outputs"), ("json_schema", None),
                                         ("none", None)])
def test_openai_grammar_goes_where_the_mode_reads_one(mode, field):
    grammar = 'root ::= "(" ("yes" | "no") ")"'
    with FakeServer([(200, completion("(yes)"), 0)]) as srv:
        c = backend(srv.url, structured=mode).complete([{"role": "user", "content": "Q"}], grammar=grammar)
    body = srv.requests[0][1]
    assert c.text == "(yes)" and "response_format" not in body
    if field == "structured_outputs":
        assert body["structured_outputs"] == {"grammar": grammar}
    elif field is not None:
        assert body[field] == grammar
    else:
        assert not any("grammar" in json.dumps(v) for k, v in body.items() if k != "messages")
    with pytest.raises(ValueError, match="schema or a grammar"):
        backend(srv.url, structured=mode).complete([{"role": "user", "content": "Q"}], grammar=grammar, schema={"type": "object"})


def test_reply_cache_keys_a_grammar_only_when_given(tmp_path):
    from lookplangraph.lm.cache import completion_key

    msgs = [{"role": "user", "content": "Q"}]
    plain = completion_key("b", msgs, None, None, None, 10)
    assert completion_key("b", msgs, None, None, None, 10, None) == plain  # earlier caches stay valid
    assert completion_key("b", msgs, None, None, None, 10, 'root ::= "a"') != plain
    assert completion_key("b", msgs, None, None, None, 10, 'root ::= "a"') != completion_key("b", msgs, None, None, None, 10, 'root ::= "b"')
    inner = ScriptedBackend(["(a)"])  # SCRIPTED replies, not an LM
    cached = CachedBackend(inner, tmp_path / "c.jsonl")
    cached.complete(msgs, grammar='root ::= "(a)"')
    cached.complete(msgs, grammar='root ::= "(a)"')
    assert inner.calls == 1 and inner.requests[0]["grammar"] == 'root ::= "(a)"'


@pytest.mark.lm
def test_real_llamacpp_server_and_in_process_follow_a_grammar(small_model_path, llama_server):
    from lookplangraph.lm import LlamaCppBackend

    grammar = 'root ::= "(" ("yes" | "no") ")"'
    msgs = [{"role": "user", "content": "Is the sky green? Answer in one word."}]
    local = LlamaCppBackend(small_model_path, n_ctx=1024).complete(msgs, grammar=grammar, max_tokens=8)
    assert local.text in ("(yes)", "(no)"), local.text
    if HAVE_OPENAI:
        served = make_backend(f"openai:qwen-0.5b@{llama_server}", structured="json_object", timeout=120,
                              max_retries=1).complete(msgs, grammar=grammar, max_tokens=8)
        assert served.text in ("(yes)", "(no)"), served.text


@needs_openai
def test_openai_retries_500_and_429_then_succeeds():
    script = [err(500, "boom"), err(429, "slow down"), err(503, "busy"), (200, completion(GOOD), 0)]
    with FakeServer(script) as srv:
        t0 = time.perf_counter()
        r = decide(backend(srv.url, max_retries=4, backoff=0.05), "S", "D", None)
        elapsed = time.perf_counter() - t0
    assert str(r.action) == "open(fridge-1)" and len(srv.requests) == 4
    assert elapsed >= 0.05 + 0.1 + 0.2 - 0.02  # exponential backoff: 0.05, 0.1, 0.2 s
    assert r.seconds >= 0.3


@needs_openai
def test_openai_gives_up_after_max_retries():
    with FakeServer([err(500, "always broken")]) as srv:
        with pytest.raises(LMError) as ei:
            decide(backend(srv.url, max_retries=2), "S", "D", None)
    assert len(srv.requests) == 3
    assert srv.url in str(ei.value) and "HTTP 500" in str(ei.value) and "3 attempts" in str(ei.value)


@needs_openai
def test_openai_timeout_is_retried():
    with FakeServer([(200, completion(GOOD), 1.5), (200, completion(GOOD), 0)]) as srv:
        r = decide(backend(srv.url, timeout=0.4, max_retries=2), "S", "D", None)
    assert r.action is not None and len(srv.requests) == 2


@needs_openai
def test_openai_unreachable_server_names_the_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(LMError) as ei:
        decide(backend(url, max_retries=1, timeout=2), "S", "D", None)
    assert url in str(ei.value) and "unreachable" in str(ei.value)


@needs_openai
def test_openai_wrong_model_lists_server_models():
    with FakeServer([err(404, "The model `m1` does not exist")], models=["qwen-a", "qwen-b"]) as srv:
        with pytest.raises(LMError) as ei:
            decide(backend(srv.url), "S", "D", None)
    msg = str(ei.value)
    assert "'m1' not found" in msg and "qwen-a" in msg and "qwen-b" in msg and srv.url in msg
    assert len(srv.requests) == 1  # a 404 is not retried


@needs_openai
def test_openai_bad_request_and_auth_are_clear():
    with FakeServer([err(400, "response_format json_schema is not supported")]) as srv:
        with pytest.raises(LMError, match="HTTP 400.*json_object"):
            decide(backend(srv.url), "S", "D", None)
    with FakeServer([err(401, "invalid key")]) as srv:
        with pytest.raises(LMError, match="OPENAI_API_KEY"):
            decide(backend(srv.url), "S", "D", None)


@needs_openai
def test_openai_json_schema_rejected_by_llama_cpp_server_is_not_retried():
    # what llama_cpp.server answers to response_format json_schema
    rejection = err(500, "1 validation error: ('body', 'response_format', 'type') Input should be 'text' or 'json_object'")
    with FakeServer([rejection]) as srv:
        with pytest.raises(LMError, match="structured='json_object'"):
            decide(backend(srv.url, max_retries=3), "S", "D", None)
    assert len(srv.requests) == 1


@needs_openai
def test_openai_auto_falls_back_to_json_object():
    with FakeServer([err(500, "json_schema unsupported"), (200, completion(GOOD), 0)]) as srv:
        b = backend(srv.url, structured="auto")
        assert decide(b, "S", "D", None).action is not None
        decide(b, "S", "D2", None)
    kinds = [body["response_format"]["type"] for _, body in srv.requests]
    assert kinds == ["json_schema", "json_object", "json_object"] and b.structured == "json_object"


@needs_openai
def test_openai_config_from_environment(monkeypatch):
    from lookplangraph.lm import OpenAIBackend
    with FakeServer([(200, completion(GOOD), 0)]) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        monkeypatch.setenv("LOOKPLANGRAPH_LM_MODEL", "m2")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        b = make_backend("openai:")
        assert isinstance(b, OpenAIBackend) and b.model == "m2" and b.name == f"openai:m2@{srv.url}"
        assert decide(b, "S", "D", None).action is not None
    assert srv.requests[0][1]["model"] == "m2"
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(LMError, match="OPENAI_API_KEY"):
        OpenAIBackend("gpt-4o")
    monkeypatch.delenv("LOOKPLANGRAPH_LM_MODEL")
    with pytest.raises(LMError, match="LOOKPLANGRAPH_LM_MODEL"):
        OpenAIBackend(None, base_url="http://127.0.0.1:1/v1")


# ------------------------------------------------------------------------------------------
# Real model (Qwen2.5-Coder-0.5B-Instruct): marked lm, skipped when not installed
# ------------------------------------------------------------------------------------------

REAL_STATIC = ("You control a household robot. Functions: go_to(room), pick_up(object), put_on(destination), "
               "put_inside(destination), open(node), close(node), done(). " + reply_format_instructions())
REAL_DYNAMIC = ("Scene: kitchen-1 has table-1 and fridge-1 (closed). apple-1 is on table-1. "
                "The robot is in kitchen-1 and holds nothing. Task: pick up the apple. Next action?")
REAL_NAMES = ["kitchen-1", "table-1", "fridge-1", "apple-1"]


def check_real_reply(r: LMReply):
    assert r.error is None, (r.text, r.error)
    assert isinstance(r.action, Action) and r.action.function_name in FUNCTIONS
    assert r.action.node in REAL_NAMES + [None] and r.action.destination in REAL_NAMES + [None]
    assert r.usage.prompt_tokens > 50 and r.usage.completion_tokens > 0 and r.seconds > 0


@pytest.mark.lm
def test_real_llamacpp_in_process(small_model_path):
    from lookplangraph.lm import LlamaCppBackend
    b = LlamaCppBackend(small_model_path, n_ctx=2048, max_tokens=48)
    r1 = decide(b, REAL_STATIC, REAL_DYNAMIC, REAL_NAMES, reason_max_length=80)
    check_real_reply(r1)
    assert r1.usage.cached_tokens == 0
    r2 = decide(b, REAL_STATIC, REAL_DYNAMIC.replace("holds nothing", "holds nothing yet"), REAL_NAMES,
                reason_max_length=80)
    check_real_reply(r2)
    assert r2.usage.cached_tokens >= len(REAL_STATIC) // 8  # the system prompt came from the KV cache


@pytest.mark.lm
def test_real_llamacpp_cannot_decode_an_excluded_action(small_model_path):
    from lookplangraph.lm import LlamaCppBackend
    from lookplangraph.agent.decoding import action_key

    b = LlamaCppBackend(small_model_path, n_ctx=2048, max_tokens=48)
    first = decide(b, REAL_STATIC, REAL_DYNAMIC, REAL_NAMES, reason_max_length=80)
    check_real_reply(first)
    excluded = [action_key(first.action)]
    second = decide(b, REAL_STATIC, REAL_DYNAMIC, REAL_NAMES, excluded, reason_max_length=80)  # the same prompt, greedy
    check_real_reply(second)
    assert action_key(second.action) not in excluded
    excluded.append(action_key(second.action))
    third = decide(b, REAL_STATIC, REAL_DYNAMIC, REAL_NAMES, excluded, reason_max_length=80)
    check_real_reply(third)
    assert action_key(third.action) not in excluded


@pytest.mark.lm
def test_real_llamacpp_server_through_openai_client(llama_server):
    if not HAVE_OPENAI:
        pytest.skip("the openai package is not installed")
    b = make_backend(f"openai:qwen-0.5b@{llama_server}", structured="json_object", max_tokens=48, timeout=120, max_retries=1)
    r = decide(b, REAL_STATIC, REAL_DYNAMIC, REAL_NAMES)
    check_real_reply(r)


def test_typed_schema_groups_functions_by_their_names():
    from lookplangraph.agent.decoding import flat_names, typed_action_schema

    vocab = {"go_to": {"node": ["kitchen-1"]}, "open": {"node": ["fridge-1"]}, "close": {"node": ["fridge-1"]},
             "rearrange": {"node": ["apple-1"], "destination": ["fridge-1", "table-1"]}, "done": {}}
    schema = typed_action_schema(vocab)
    variants = schema["anyOf"]
    fns = [v["properties"]["function_name"]["enum"] for v in variants]
    assert fns == [["go_to"], ["rearrange"], ["open", "close"], ["done"]]
    rearrange = variants[1]["properties"]
    assert rearrange["relation"]["enum"] == ["ontop", "inside"] and rearrange["destination"]["enum"] == ["fridge-1", "table-1"]
    assert variants[3]["properties"]["node"] == {"type": "null"}
    assert list(variants[0]["properties"]) == ["function_name", "node", "relation", "destination", "reason"]
    assert flat_names(vocab) == ["kitchen-1", "fridge-1", "apple-1", "table-1"]
    assert action_schema(vocab)["properties"]["node"]["anyOf"][0]["enum"] == flat_names(vocab)


def test_the_server_launcher_resolves_embedded_model_names(small_model_path):
    from lookplangraph.lm.serve import server_argv

    path = str(small_model_path)
    assert server_argv(["--model", "qwen2.5-coder-0.5b", "--port", "1"]) == ["--model", path, "--port", "1"]
    assert server_argv(["--model=qwen2.5-coder-0.5b"]) == [f"--model={path}"]
    assert server_argv(["--model", "/models/other.gguf"]) == ["--model", "/models/other.gguf"]  # a path stays
