"""The operator console over HTTP, without a browser: bad input gets a clear message and loses
nothing (a missing token, a double-submitted Done, a file that is not a photo, an oversized
upload, an upload torn off by a closed tab, a photo without a description when no VLM reads
photos), and a restarted server resumes the trial at the step it was at. The planner, the
describer and the parser are SCRIPTED (ScriptedBackend; tests/console_server.py)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
import uuid
from urllib.parse import urlparse

import pytest

from console_server import start_console

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200


def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def post(url, body: bytes, content_type: str):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": content_type}, method="POST")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def post_form(url, fields):
    return post(url, urllib.parse.urlencode(fields).encode(), "application/x-www-form-urlencoded")


def multipart(fields, files=()):
    boundary = uuid.uuid4().hex
    out = b""
    for k, v in fields.items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    for name, filename, data in files:
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                f"Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return out, f"multipart/form-data; boundary={boundary}"


def post_photo(url, request_id, data=None, description="", filename="p.png"):
    files = [("photo", filename, data)] if data is not None else []
    body, ctype = multipart({"request": request_id, "outcome": "seen", "description": description}, files)
    return post(url + "/observe", body, ctype)


@pytest.fixture
def console(tmp_path):
    c = start_console(tmp_path / "trial_http", max_upload_bytes=50_000)
    yield c
    c.stop()


def test_bad_uploads_are_refused_with_a_message_and_nothing_is_lost(console):
    url = console.url
    assert console.desk.pending.id == 1
    status, page = post_photo(url, 1, b"GIF? no: plain text")
    assert status == 415 and "not a photo" in page and "Nothing was recorded; the step still waits" in page
    status, page = post_photo(url, 1, PNG + b"\x00" * 60_000)
    assert status == 413 and "over the limit of 0.05 MB" in page
    status, page = post_photo(url, 1, PNG + b"\x00" * 400_000)  # refused from its Content-Length alone
    assert status == 413 and "over the limit" in page
    status, page = post_photo(url, 1, None, "")
    assert status == 400 and "Take a photo or type what you see" in page
    # a tab closed in the middle of an upload: the body stops short, the connection closes
    body, ctype = multipart({"request": 1, "outcome": "seen"}, [("photo", "p.png", PNG * 50)])
    host = urlparse(url)
    with socket.create_connection((host.hostname, host.port)) as s:
        s.sendall(f"POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                  + body[: len(body) // 2])
    status, page, _ = get(url + "/")
    assert status == 200 and 'name="request" value="1"' in page
    assert console.desk.pending.id == 1 and not console.trial.path("operator.jsonl").exists()
    assert not list((console.trial.dir / "photos").iterdir())
    # a good photo is taken
    status, page = post_photo(url, 1, PNG)
    assert status == 303
    assert json.loads(console.trial.path("operator.jsonl").read_text())["photo"] == "photos/001_cupboard_1.png"


def test_a_double_submitted_done_counts_once(console):
    url = console.url
    assert post_photo(url, 1, None, "a white cup")[0] == 303
    assert console.desk.pending.id == 2
    assert post_form(url + "/answer", {"request": 2, "outcome": "done"})[0] == 303
    status, page = post_form(url + "/answer", {"request": 2, "outcome": "done"})
    assert status == 409 and "Step 2 was already answered (Done); it counts once" in page
    assert [a["request"] for a in console.trial.answers()] == [1, 2]
    # a failure needs its reason
    status, page = post_form(url + "/answer", {"request": 3, "outcome": "failed", "reason": " "})
    assert status == 400 and "Say why the step failed" in page and console.desk.pending.id == 3
    # paused: answers wait until the trial is resumed
    assert post_form(url + "/pause", {})[0] == 303
    status, page = post_form(url + "/answer", {"request": 3, "outcome": "done"})
    assert status == 409 and "paused" in page
    assert "Resume" in get(url + "/")[1]
    assert post_form(url + "/unpause", {})[0] == 303
    assert post_form(url + "/answer", {"request": 3, "outcome": "done"})[0] == 303
    events = [json.loads(x)["event"] for x in console.trial.path("events.jsonl").read_text().splitlines()]
    assert events == ["session", "pause", "unpause"]


def test_without_a_vlm_the_operator_must_type_a_description(tmp_path):
    c = start_console(tmp_path / "trial_novlm", vlm=False)
    try:
        status, page = post_photo(c.url, 1, PNG)
        assert status == 400 and "no VLM" in page and c.desk.pending.id == 1
        assert post_photo(c.url, 1, PNG, "a white cup inside")[0] == 303
        [a] = c.trial.answers()
        assert a["description"] == "a white cup inside" and a["photo"] == "photos/001_cupboard_1.png"
    finally:
        c.stop()


def test_exposed_on_a_network_every_request_needs_the_token(tmp_path):
    c = start_console(tmp_path / "trial_token", token="s3cret-token")
    try:
        status, page, _ = get(c.url + "/")
        assert status == 403 and "needs the token" in page
        assert get(c.url + "/?token=wrong")[0] == 403
        assert post_form(c.url + "/answer", {"request": 1, "outcome": "done"})[0] == 403
        status, page, headers = get(c.url + "/?token=s3cret-token")
        assert status == 200 and "Look at cupboard-1" in page
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=strict" in headers["set-cookie"]
        assert get(c.url + "/status.json", {"Cookie": cookie})[0] == 200
        assert not c.trial.path("operator.jsonl").exists()
    finally:
        c.stop()


def test_a_restarted_server_resumes_the_trial_at_its_step(tmp_path):
    from console_server import COFFEE_PLAN

    c = start_console(tmp_path / "trial_restart")
    assert post_photo(c.url, 1, PNG)[0] == 303
    assert post_form(c.url + "/answer", {"request": 2, "outcome": "done"})[0] == 303
    c.stop()  # the server goes down while step 3 waits
    c2 = start_console(tmp_path / "trial_restart", resume=True, plan=COFFEE_PLAN[2:])
    try:
        assert c2.desk.pending.id == 3 and str(c2.desk.pending.step) == "pick_up(cup-2)"
        status, page, _ = get(c2.url + "/")
        assert "Pick up cup-2" in page and "cup-2" in page and "The VLM saw" in page
        assert [a["request"] for a in c2.trial.answers()] == [1, 2]
    finally:
        c2.stop()


def test_the_operator_can_say_a_node_cannot_be_looked_at(console):
    body, ctype = multipart({"request": 1, "outcome": "failed", "reason": ""})
    status, page = post(console.url + "/observe", body, ctype)
    assert status == 400 and "Say why you cannot look" in page
    body, ctype = multipart({"request": 1, "outcome": "failed", "reason": "the cupboard is locked"})
    assert post(console.url + "/observe", body, ctype)[0] == 303
    [a] = console.trial.answers()
    assert not a["ok"] and a["reason"] == "the cupboard is locked"
    status, page, _ = get(console.url + "/")
    assert "the operator reports: the cupboard is locked" in page


def test_with_explain_the_console_shows_the_asked_reason_beside_the_step_to_approve(tmp_path):
    """An action-only answer, then the explain call's SCRIPTED reason (ScriptedBackend, not a
    language model): the page of the step to approve says why."""
    from lookplangraph.planners.config import PlannerConfig

    def reply(fn, node, **reason):
        return json.dumps({"function_name": fn, "node": node, "relation": None, "destination": None, **reason})

    plan = [reply("discover_objects", "cupboard-1"),
            reply("discover_objects", "cupboard-1", reason="the clean cups are kept in the cupboard")]
    c = start_console(tmp_path / "trial_explain", plan=plan, planner=PlannerConfig(explain=True))
    try:
        status, page, _ = get(c.url + "/")
        assert status == 200 and "Look at cupboard-1" in page
        assert "Why: the clean cups are kept in the cupboard" in page
    finally:
        c.stop()
