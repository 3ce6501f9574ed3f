"""LMBackend.complete(): images as content parts, client-side schema validation, the reply cache,
and decide() as a thin use of complete(). No language model runs here: replies come from
ScriptedBackend (fixed texts, not an LM) or from a fake OpenAI-style HTTP server on 127.0.0.1
(a test double that answers recorded text)."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import pytest
from pydantic import BaseModel

from lookplangraph.agent.decide import decide
from lookplangraph.lm import structured
from lookplangraph.lm import (
    Completion, ImageError, LMError, ScriptedBackend, Usage, image_mime, image_part, read_json, with_images,
)
from lookplangraph.lm.cache import CachedBackend
from tests.test_backends import HAVE_OPENAI, FakeServer, backend, completion

needs_openai = pytest.mark.skipif(not HAVE_OPENAI, reason="the openai package is not installed")


def tiny_png() -> bytes:
    """A valid 1x1 PNG, built by hand (no imaging library needed)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
            + chunk(b"IEND", b""))


@pytest.fixture
def png(tmp_path):
    path = tmp_path / "shelf.png"
    path.write_bytes(tiny_png())
    return path


# ------------------------------------------------------------------------------------------
# images
# ------------------------------------------------------------------------------------------

def test_image_part_is_a_data_url_with_the_right_mime(png, tmp_path):
    part = image_part(png)
    assert part["type"] == "image_url"
    url = part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == tiny_png()
    jpeg = tmp_path / "photo.bin"  # the name does not matter, the bytes do
    jpeg.write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 20)
    assert image_part(jpeg)["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert image_mime(b"RIFF\x10\0\0\0WEBPVP8 ") == "image/webp"
    assert image_mime(b"GIF89a....") == "image/gif"
    assert image_mime(b"RIFF\x10\0\0\0WAVEfmt ") is None


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no such file"),
    (lambda p: p.write_bytes(b""), "empty"),
    (lambda p: p.write_text("just text, not a picture"), "not a PNG, JPEG, GIF or WebP"),
    (lambda p: p.write_bytes(tiny_png() + b"\0" * 200), "over the limit of 100 bytes"),
])
def test_bad_images_are_clear_errors(tmp_path, make, message):
    path = tmp_path / "img.png"
    make(path)
    with pytest.raises(ImageError, match=message):
        image_part(path, max_bytes=100)
    assert issubclass(ImageError, LMError)


def test_images_go_to_the_last_user_message(png):
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "look"}]
    sent = with_images(messages, [png, png])
    assert messages[1]["content"] == "look"  # the caller's messages are not changed
    content = sent[1]["content"]
    assert content[0] == {"type": "text", "text": "look"} and [p["type"] for p in content[1:]] == ["image_url"] * 2
    assert with_images([{"role": "system", "content": "S"}], [png])[-1]["role"] == "user"
    assert with_images(messages, None) == messages


# ------------------------------------------------------------------------------------------
# structured replies
# ------------------------------------------------------------------------------------------

class Pair(BaseModel):
    name: str
    count: int


SCHEMA = {"type": "object", "properties": {
    "items": {"type": "array", "maxItems": 2, "items": {
        "type": "object", "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": ["a", "b"]},
                                          "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["name", "kind"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False}


@pytest.mark.parametrize("value, error", [
    ({"items": [{"name": "x", "kind": "a", "note": None}]}, None),
    ({"items": [{"name": "x", "kind": "c"}]}, "$.items[0].kind: 'c' is not one of ['a', 'b']"),
    ({"items": [{"name": "x"}]}, "$.items[0]: missing 'kind'"),
    ({"items": [{"name": "x", "kind": "a", "extra": 1}]}, "$.items[0]: unexpected key 'extra'"),
    ({"items": [{"name": 3, "kind": "a"}]}, "$.items[0].name: expected string, got 3"),
    ({"items": [{"name": "x", "kind": "a"}] * 3}, "$.items: more than 2 items"),
    ({"items": [{"name": "x", "kind": "a", "note": 5}]}, "$.items[0].note: expected string, got 5"),
    ([], "$: expected object, got []"),
])
def test_dict_schema_validation(value, error):
    parsed, err = structured.check(value, SCHEMA)
    assert err == error
    assert (parsed is None) == (error is not None)


def test_scripted_complete_validates_whatever_comes_back():
    lm = ScriptedBackend(['```json\n{"name": "apple", "count": 2,}\n```', '{"name": "apple", "count": "many"}',
                          "I cannot see any image.", ""], name="scripted:t")
    ok = lm.complete([{"role": "user", "content": "how many?"}], schema=Pair)
    assert ok.parsed == Pair(name="apple", count=2) and ok.error is None
    bad = lm.complete([{"role": "user", "content": "how many?"}], schema=Pair)
    assert bad.parsed is None and bad.error.startswith("count:")
    prose = lm.complete([{"role": "user", "content": "how many?"}], schema=SCHEMA)
    assert prose.parsed is None and prose.error == "the reply holds no JSON"
    empty = lm.complete([{"role": "user", "content": "how many?"}], schema=SCHEMA)
    assert empty.parsed is None and empty.error == "the reply is empty"
    free = lm.complete([{"role": "user", "content": "hi"}])
    assert free.text == "" and free.parsed is None and free.error is None
    assert lm.requests[0]["schema"] == Pair.model_json_schema()


def test_read_json_keeps_complete_entries_of_a_cut_reply():
    cut = '{"objects": [{"name": "a-1", "relation": "ontop"}, {"name": "b-'
    assert read_json(cut) == {"objects": [{"name": "a-1", "relation": "ontop"}]}
    assert read_json("no json here") is None


# ------------------------------------------------------------------------------------------
# reply cache
# ------------------------------------------------------------------------------------------

def test_cache_records_and_replays_completions(tmp_path, png):
    path = tmp_path / "cache.jsonl"
    inner = ScriptedBackend(['{"name": "cup", "count": 1}', "second"], name="scripted:c")
    cached = CachedBackend(inner, path)
    msgs = [{"role": "user", "content": "what is there?"}]
    first = cached.complete(msgs, images=[png], schema=Pair)
    again = cached.complete(msgs, images=[png], schema=Pair)
    other = cached.complete(msgs, images=[png], schema=Pair, max_tokens=10)  # another request
    assert inner.calls == 2 and cached.hits == 1
    assert again.parsed == first.parsed == Pair(name="cup", count=1) and other.text == "second"
    png.write_bytes(tiny_png() + b"\0")  # other image bytes: another request
    with pytest.raises(LMError, match="replay"):
        CachedBackend(None, path, name="scripted:c").complete(msgs, images=[png], schema=Pair)
    png.write_bytes(tiny_png())
    replay = CachedBackend(None, path, name="scripted:c")
    assert replay.complete(msgs, images=[png], schema=Pair, max_tokens=10).error == "the reply holds no JSON"
    assert all(json.loads(line)["kind"] == "complete" for line in path.read_text().splitlines())


# ------------------------------------------------------------------------------------------
# OpenAI-compatible server (test double on 127.0.0.1)
# ------------------------------------------------------------------------------------------

@needs_openai
def test_openai_complete_sends_images_schema_and_stop(png):
    reply = '{"items": [{"name": "mug", "kind": "a", "note": null}]}'
    with FakeServer([(200, completion(reply), 0), (200, completion('{"items": [{"name": 1}]}'), 0)]) as srv:
        b = backend(srv.url, structured="json_object")
        c = b.complete([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], images=[png],
                       schema=SCHEMA, stop=["\n\n"], max_tokens=77)
        bad = b.complete([{"role": "user", "content": "U"}], schema=SCHEMA)
    assert isinstance(c, Completion) and c.parsed == json.loads(reply) and c.error is None
    assert c.usage == Usage(prompt_tokens=100, completion_tokens=20, cached_tokens=64)
    body = srv.requests[0][1]
    assert body["stop"] == ["\n\n"] and body["max_tokens"] == 77
    assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    user = body["messages"][1]["content"]
    assert user[0] == {"type": "text", "text": "U"}
    assert user[1]["image_url"]["url"] == image_part(png)["image_url"]["url"]
    assert bad.parsed is None and bad.error.startswith("$.items[0]")  # the server's word is not trusted


@needs_openai
def test_openai_decide_requests_are_unchanged_by_complete():
    """decide() sends what it always sent: no stop, its own max_tokens, schema name next_action."""
    with FakeServer([(200, completion('{"function_name": "done", "node": null, "relation": null, '
                                      '"destination": null, "reason": "r"}'), 0)]) as srv:
        b = backend(srv.url)
        r = decide(b, "S", "D", ["a-1"])
    body = srv.requests[0][1]
    assert str(r.action) == "done()" and "stop" not in body and body["max_tokens"] == 200
    assert body["response_format"]["json_schema"]["name"] == "next_action"
    assert body["messages"] == [{"role": "system", "content": "S"}, {"role": "user", "content": "D"}]


# ------------------------------------------------------------------------------------------
# llama.cpp in process: images need a projector (no model is loaded here)
# ------------------------------------------------------------------------------------------

def test_llamacpp_without_projector_refuses_images(png):
    from lookplangraph.lm import LlamaCppBackend

    lm = LlamaCppBackend.__new__(LlamaCppBackend)  # no model loaded: the check comes first
    lm.name, lm.vision = "llamacpp:qwen2.5-coder-1.5b", None
    with pytest.raises(ImageError, match="mmproj=PATH, chat_handler=one of qwen2.5-vl"):
        lm.complete([{"role": "user", "content": "what is on the shelf?"}], images=[png])


def test_llamacpp_vision_handler_errors(tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed")
    from lookplangraph.lm.llamacpp import _vision_handler

    with pytest.raises(LMError, match="need both mmproj"):
        _vision_handler(llama_cpp, None, "qwen2.5-vl", False)
    with pytest.raises(LMError, match="unknown chat_handler 'gpt'"):
        _vision_handler(llama_cpp, tmp_path / "p.gguf", "gpt", False)
    with pytest.raises(LMError, match="no projector file"):
        _vision_handler(llama_cpp, tmp_path / "missing.gguf", "qwen2.5-vl", False)
