"""The VirtualHome Unity simulator as a backend of :mod:`sim_adapters.virtualhome`.

For users with VirtualHome's Unity executable (``virtualhome`` releases, v2.3): start it, then
``lookplangraph run --env virtualhome-unity ...``. It listens on ``http://127.0.0.1:8080``.

:class:`UnityClient` is a small client of the simulator's HTTP/JSON protocol (the one of
VirtualHome's ``simulation/unity_simulator/comm_unity.py``; the PyPI package ``virtualhome`` cannot
be imported on current Python/numpy, so it is not used): each command is one POST of
``{"id": str, "action": str, "intParams": [int], "stringParams": [str]}`` and the reply is JSON with
``success`` and, by command, ``message`` (text, or JSON text such as the environment graph),
``message_list`` (base64 images) or ``value`` (a count). Commands used: ``clear`` and
``environment`` (reset to a scene), ``expand_scene``, ``add_character``, ``render_script``,
``environment_graph``, ``camera_count``, ``character_cameras``, ``camera_image`` and
``observation`` (the objects a camera sees).

:class:`UnityBackend` resets the scene (TrimmedTestScene1 is scene 0), expands it with the task's
initial graph (without the character), adds the character where the graph has it, and runs each
step's lines with ``render_script`` (``<char0> [Walk] <cup> (2009)``; ids select the nodes, no
animation). Unlike the evolving graph, a step is not atomic: when its second line fails, the
character has already walked. ``image`` is the view of one of the character's cameras.

Tested against a local test double of the protocol (``tests/unity_double.py``).
Concepts: ``docs/guides/environments.md``.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request

from sim_adapters.virtualhome import ScriptResult, VirtualHomeError

DEFAULT_URL = "http://127.0.0.1:8080"
#: The camera of the character used for images, first found of these (else its first camera).
CAMERA_PREFERENCE = ("FIRST_PERSON", "PERSON_FRONT")


class UnityClient:
    """VirtualHome's Unity protocol (module doc). Errors are :class:`VirtualHomeError` naming the URL."""

    def __init__(self, url: str = DEFAULT_URL, timeout: float = 120.0):
        self.url = url.rstrip("/")
        self.timeout = timeout

    def command(self, action: str, int_params: list[int] | None = None, string_params: list[str] | None = None) -> dict:
        """POST one command; the reply's JSON object."""
        body: dict = {"id": str(time.time()), "action": action}
        if int_params is not None:
            body["intParams"] = [int(i) for i in int_params]
        if string_params is not None:
            body["stringParams"] = [str(s) for s in string_params]
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                data = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            raise VirtualHomeError(f"the VirtualHome simulator at {self.url} answered {action!r} with HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise VirtualHomeError(f"cannot reach the VirtualHome Unity simulator at {self.url} ({reason}); "
                                   "start the VirtualHome executable first (it listens on port 8080)") from None
        try:
            reply = json.loads(data)
        except ValueError:
            raise VirtualHomeError(f"the VirtualHome simulator at {self.url} answered {action!r} with no JSON: {data[:200]!r}") from None
        if not isinstance(reply, dict) or "success" not in reply:
            raise VirtualHomeError(f"the VirtualHome simulator at {self.url} answered {action!r} without 'success': {str(reply)[:200]}")
        return reply

    def _ok(self, action: str, reply: dict) -> dict:
        if not reply["success"]:
            raise VirtualHomeError(f"the VirtualHome simulator at {self.url} refused {action}: {reply.get('message')}")
        return reply

    # -- commands ------------------------------------------------------------------------------
    def reset(self, scene: int) -> None:
        """Clear the scene and load scene ``scene`` (0-6: TrimmedTestScene1-7)."""
        self._ok("clear", self.command("clear", [scene]))
        self._ok("environment", self.command("environment", [scene]))

    def expand_scene(self, graph: dict, *, randomize: bool = False, random_seed: int = -1,
                     transfer_transform: bool = True) -> None:
        """Set the scene's objects, states and relations to ``graph`` (no character in it)."""
        config = {"randomize": randomize, "random_seed": random_seed, "animate_character": False,
                  "ignore_obstacles": False, "transfer_transform": transfer_transform}
        self._ok("expand_scene", self.command("expand_scene", string_params=[json.dumps(config), json.dumps(graph)]))

    def add_character(self, resource: str = "Chars/Male1", position: list[float] | None = None, initial_room: str = "") -> None:
        """Add the character at ``position`` ([x, y, z]), else in ``initial_room``, else anywhere."""
        mode = "fix_position" if position is not None else "fix_room" if initial_room else "random"
        x, y, z = position if position is not None else (0, 0, 0)
        params = {"character_resource": resource, "mode": mode, "character_position": {"x": x, "y": y, "z": z},
                  "initial_room": initial_room}
        self._ok("add_character", self.command("add_character", string_params=[json.dumps(params)]))

    def environment_graph(self) -> dict:
        reply = self._ok("environment_graph", self.command("environment_graph"))
        try:
            return json.loads(reply["message"])
        except (KeyError, TypeError, ValueError):
            raise VirtualHomeError(f"the VirtualHome simulator at {self.url} sent an unreadable environment graph") from None

    def render_script(self, lines: list[str], *, skip_animation: bool = True, recording: bool = False,
                      camera_mode: list[str] | None = None, output_folder: str = "Output/") -> tuple[bool, str | None]:
        """Run script lines (``<char0> [Walk] <cup> (2009)``) with ids selecting nodes; (ok, message)."""
        params = {"randomize_execution": False, "random_seed": -1, "processing_time_limit": 10,
                  "skip_execution": False, "output_folder": output_folder, "file_name_prefix": "script",
                  "frame_rate": 5, "image_synthesis": ["normal"], "find_solution": False,
                  "save_pose_data": False, "save_scene_states": False, "camera_mode": camera_mode or ["AUTO"],
                  "recording": recording, "image_width": 640, "image_height": 480, "time_scale": 1.0,
                  "skip_animation": skip_animation}
        reply = self.command("render_script", string_params=[json.dumps(params), *lines])
        message = reply.get("message")
        if message is not None and not isinstance(message, str):
            message = json.dumps(message)
        return bool(reply["success"]), message

    def camera_count(self) -> int:
        return int(self._ok("camera_count", self.command("camera_count"))["value"])

    def character_cameras(self) -> list[str]:
        message = self._ok("character_cameras", self.command("character_cameras")).get("message")
        if isinstance(message, str):
            message = json.loads(message)
        return list(message or [])

    def camera_image(self, cameras: list[int], mode: str = "normal", width: int = 640, height: int = 480) -> list[bytes]:
        """Encoded images (PNG for ``normal``), one per camera index."""
        params = {"mode": mode, "image_width": width, "image_height": height}
        reply = self._ok("camera_image", self.command("camera_image", list(cameras), [json.dumps(params)]))
        return [base64.b64decode(s) for s in reply.get("message_list") or []]

    def visible_objects(self, camera: int) -> dict:
        """The objects camera ``camera`` sees: {id: class name}."""
        message = self._ok("observation", self.command("observation", [camera])).get("message")
        return json.loads(message) if isinstance(message, str) else message


class UnityBackend:
    """A :class:`sim_adapters.virtualhome.VirtualHomeBackend` in the Unity simulator (module doc)."""

    name = "virtualhome-unity"

    def __init__(self, url: str = DEFAULT_URL, *, scene: int = 0, character: str = "Chars/Male1",
                 client: UnityClient | None = None):
        self.client = client if client is not None else UnityClient(url)
        self.url = self.client.url
        self.scene = scene
        self.character = character
        self.camera: int | None = None
        self._dict: dict | None = None

    def reset(self, graph: dict) -> None:
        c = self.client
        chars = {n["id"] for n in graph["nodes"] if n.get("category") == "Characters"}
        scene = {"nodes": [n for n in graph["nodes"] if n["id"] not in chars],
                 "edges": [e for e in graph["edges"] if e["from_id"] not in chars and e["to_id"] not in chars]}
        c.reset(self.scene)
        c.expand_scene(scene)
        static = c.camera_count()
        c.add_character(self.character, **self._placement(graph, chars))
        names = c.character_cameras()
        pick = next((n for n in CAMERA_PREFERENCE if n in names), None)
        self.camera = static + (names.index(pick) if pick else 0)
        self._dict = None

    def _placement(self, graph: dict, chars: set[int]) -> dict:
        """Where to add the character: its own position if the graph has one, else on the floor at
        the centre of its room (from the simulator's bounding boxes), else in the room by name."""
        nodes = {n["id"]: n for n in graph["nodes"]}
        char = nodes.get(min(chars)) if chars else None
        box = (char or {}).get("bounding_box") or {}
        if box.get("center"):
            return {"position": list(box["center"])}
        rooms = [e["to_id"] for e in graph["edges"] if e["from_id"] in chars and e["relation_type"] == "INSIDE"
                 and nodes.get(e["to_id"], {}).get("category") == "Rooms"]
        if not rooms:
            return {}
        scene = {n["id"]: n for n in self.client.environment_graph()["nodes"]}
        room_box = (scene.get(rooms[0]) or {}).get("bounding_box") or {}
        if room_box.get("center") and room_box.get("size"):
            x, y, z = room_box["center"]
            return {"position": [x, y - room_box["size"][1] / 2, z]}
        name = nodes[rooms[0]]["class_name"].replace("_", "")
        return {"initial_room": name} if name in ("kitchen", "bedroom", "livingroom", "bathroom") else {}

    def execute(self, lines: list[str]) -> ScriptResult:
        self._dict = None
        ok, message = self.client.render_script([f"<char0> {line}" for line in lines])
        return ScriptResult(True) if ok else ScriptResult(False, message or f"the simulator refused {'; '.join(lines)}")

    def graph(self) -> dict:
        if self._dict is None:
            self._dict = self.client.environment_graph()
        return self._dict

    def image(self, node_id: int) -> bytes | None:
        if self.camera is None:
            return None
        images = self.client.camera_image([self.camera])
        return images[0] if images else None
