"""TEST DOUBLE of the VirtualHome Unity simulator's HTTP protocol -- not the simulator.

A local HTTP server on 127.0.0.1 that checks the shape of every request against VirtualHome's
``comm_unity.py`` protocol (``{"id": str, "action": str, "intParams": [int], "stringParams": [str]}``
and, per command, what the strings hold) and answers in the shapes that protocol reads: fixed
replies for ``clear``/``environment``/``expand_scene``/``add_character``/``camera_count``/
``character_cameras``/``camera_image`` (a 2x2 PNG), and, for ``render_script``,
``environment_graph`` and ``observation``, replies computed by VirtualHome's *evolving graph*
(``virtualhome-eval``) on the graph it was expanded with. Rooms get made-up bounding boxes so
that a character added by position lands in a room. Nothing here renders or simulates physics.

``requests`` lists every request received; ``violations`` every shape error (answered with HTTP 400).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sim_adapters.virtualhome import EvolvingGraphBackend


def tiny_png() -> bytes:
    """A valid 2x2 grey PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + b"\x80" * 2 for _ in range(2))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


STATIC_CAMERAS = 5
CHARACTER_CAMERAS = ["PERSON_TOP", "PERSON_FRONT", "PERSON_LEFT", "PERSON_RIGHT", "PERSON_FROM_BACK", "FIRST_PERSON"]
_LINE = re.compile(r"^<char0> \[\w+\](?: <[^<>]+> \(\d+\))*$")
_RENDER_KEYS = {"randomize_execution", "random_seed", "processing_time_limit", "skip_execution", "output_folder",
                "file_name_prefix", "frame_rate", "image_synthesis", "find_solution", "save_pose_data",
                "save_scene_states", "camera_mode", "recording", "image_width", "image_height", "time_scale",
                "skip_animation"}


class FakeUnity:
    """The test double (module doc). ``character``: the character node that ``add_character``
    puts in the scene; the position it is given picks the room."""

    def __init__(self, character: dict):
        self.character = character
        self.requests: list[dict] = []
        self.violations: list[str] = []
        self.backend = EvolvingGraphBackend()
        self.scene: dict | None = None
        self.has_character = False
        self.image = tiny_png()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeUnity":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the protocol --------------------------------------------------------------------------
    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    request = json.loads(body)
                    fake.requests.append(request)
                    status, reply = 200, fake.answer(request)
                except (ValueError, KeyError, TypeError, AssertionError) as exc:
                    fake.violations.append(f"{body[:200]!r}: {exc}")
                    status, reply = 400, {"message": f"bad request: {exc}"}
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def answer(self, r: dict) -> dict:
        assert isinstance(r.get("id"), str), "id must be a string"
        action = r["action"]
        assert isinstance(action, str), "action must be a string"
        ints, strings = r.get("intParams", []), r.get("stringParams", [])
        assert isinstance(ints, list) and all(isinstance(i, int) for i in ints), "intParams must be a list of ints"
        assert isinstance(strings, list) and all(isinstance(s, str) for s in strings), "stringParams must be strings"
        ok = {"id": r["id"], "success": True, "message": "Success"}
        if action in ("clear", "environment"):
            assert len(ints) <= 1, f"{action} takes at most a scene index"
            self.scene, self.has_character = None, False
            return ok
        if action == "expand_scene":
            assert len(strings) == 2, "expand_scene takes a config and a graph"
            config, graph = json.loads(strings[0]), json.loads(strings[1])
            assert {"randomize", "random_seed", "animate_character", "ignore_obstacles", "transfer_transform"} <= set(config)
            assert not any(n["category"] == "Characters" for n in graph["nodes"]), "expand the scene without the character"
            self.scene = graph
            return ok | {"message": "{}"}
        if action == "add_character":
            assert self.scene is not None, "add_character before expand_scene"
            params = json.loads(strings[0])
            assert {"character_resource", "mode", "character_position", "initial_room"} <= set(params)
            assert params["mode"] == "fix_position", "the character goes where the task has it"
            room = self._room_at(params["character_position"])
            char = dict(self.character)
            self.scene = {"nodes": self.scene["nodes"] + [char],
                          "edges": self.scene["edges"] + [{"from_id": char["id"], "relation_type": "INSIDE", "to_id": room}]}
            self.backend.reset(self.scene)
            self.has_character = True
            return ok
        if action == "camera_count":
            return ok | {"value": STATIC_CAMERAS + (len(CHARACTER_CAMERAS) if self.has_character else 0)}
        if action == "character_cameras":
            return ok | {"message": CHARACTER_CAMERAS}
        if action == "render_script":
            assert self.has_character, "render_script before add_character"
            params = json.loads(strings[0])
            assert _RENDER_KEYS <= set(params), f"render_script params miss {_RENDER_KEYS - set(params)}"
            lines = strings[1:]
            assert lines and all(_LINE.match(line) for line in lines), f"script lines: {lines}"
            result = self.backend.execute([line.removeprefix("<char0> ") for line in lines])
            return ok if result.ok else ok | {"success": False, "message": json.dumps({"0": {"message": result.message}})}
        if action == "environment_graph":
            assert self.scene is not None
            graph = self.backend.graph() if self.has_character else self.scene
            return ok | {"message": json.dumps(self._with_room_boxes(graph))}
        if action == "camera_image":
            params = json.loads(strings[0])
            assert {"mode", "image_width", "image_height"} <= set(params) and ints, "camera_image shape"
            assert all(STATIC_CAMERAS <= i < STATIC_CAMERAS + len(CHARACTER_CAMERAS) for i in ints), "not a character camera"
            return ok | {"message_list": [base64.b64encode(self.image).decode() for _ in ints]}
        if action == "observation":
            assert len(ints) == 1
            graph = self.backend.graph()
            return ok | {"message": json.dumps({str(n["id"]): n["class_name"] for n in graph["nodes"][:10]})}
        raise ValueError(f"unknown action {action!r}")

    def _rooms(self) -> list[int]:
        return sorted(n["id"] for n in self.scene["nodes"] if n["category"] == "Rooms")

    def _with_room_boxes(self, graph: dict) -> dict:
        boxes = {r: {"center": [100.0 * k, 1.5, 0.0], "size": [10.0, 3.0, 10.0]} for k, r in enumerate(self._rooms())}
        return {"nodes": [n | {"bounding_box": boxes[n["id"]]} if n["id"] in boxes else n for n in graph["nodes"]],
                "edges": graph["edges"]}

    def _room_at(self, position: dict) -> int:
        for k, r in enumerate(self._rooms()):
            if abs(position["x"] - 100.0 * k) < 5 and abs(position["z"]) < 5:
                return r
        raise AssertionError(f"position {position} is in no room")
