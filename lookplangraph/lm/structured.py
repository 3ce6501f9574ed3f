"""Structured replies: the schema a caller asks for and the client-side check of what came back.

:meth:`lookplangraph.lm.LMBackend.complete` takes ``schema`` as either a pydantic model
class or a JSON-schema dict. The backend sends the JSON schema to the server (or compiles it to a
grammar in process), and then checks the reply here, whatever the server claims to enforce:
servers in ``none`` or ``json_object`` mode, or a server that ignores the request, can answer
anything. :func:`check` never raises: it gives ``(parsed, None)`` or ``(None, error)``.

The dict validator covers the JSON-schema keywords the project's schemas use (``type``,
``enum``, ``const``, ``anyOf``/``oneOf``/``allOf``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``minItems``/``maxItems``, ``minLength``/``maxLength``,
``pattern``, ``minimum``/``maximum``, local ``$ref`` to ``#/$defs/...``); annotations such as
``title`` and ``description`` are ignored. A schema keyword it does not know is ignored too, so
keep schemas within that set when the check matters.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError


_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def is_model(schema: Any) -> bool:
    return isinstance(schema, type) and issubclass(schema, BaseModel)


def json_schema(schema: Any) -> dict[str, Any] | None:
    """The JSON schema to send: a model's ``model_json_schema()``, a dict as it is, None for None."""
    if schema is None:
        return None
    if is_model(schema):
        return schema.model_json_schema()
    if isinstance(schema, dict):
        return schema
    raise TypeError(f"schema must be a pydantic model class or a JSON-schema dict, not {type(schema).__name__}")


def check(value: Any, schema: Any) -> tuple[Any, str | None]:
    """Validate a decoded JSON ``value``: ``(model instance or value, None)`` when it conforms,
    ``(None, error)`` otherwise; the error names the first failing path."""
    if is_model(schema):
        try:
            return schema.model_validate(value), None
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(p) for p in first.get("loc", ())) or "reply"
            return None, f"{where}: {first.get('msg', str(exc))}"
    errors: list[str] = []
    _validate(value, schema, "$", schema, errors)
    if errors:
        return None, errors[0]
    return value, None


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def resolve_ref(ref: str, root: dict[str, Any]) -> dict[str, Any] | None:
    """The schema a local ``$ref`` (``#/$defs/Name``) names in ``root``; None when it names none."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


def _validate(value: Any, schema: Any, path: str, root: dict[str, Any], errors: list[str]) -> None:
    if schema is True or schema is None or schema == {}:
        return
    if schema is False:
        errors.append(f"{path}: not allowed")
        return
    if "$ref" in schema:
        target = resolve_ref(schema["$ref"], root)
        if target is None:
            errors.append(f"{path}: cannot resolve {schema['$ref']}")
            return
        _validate(value, target, path, root, errors)
        if errors:
            return
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema.get("oneOf")
        option_errors: list[str] = []
        passed = 0
        for option in options:
            sub: list[str] = []
            _validate(value, option, path, root, sub)
            if sub:
                option_errors.append(sub[0])
            else:
                passed += 1
        if passed == 0:
            # the most specific message: the one that got deepest into the value
            errors.append(max(option_errors, key=lambda e: len(e.split(":", 1)[0])) if option_errors
                          else f"{path}: matches no option")
            return
        if "oneOf" in schema and passed > 1:
            errors.append(f"{path}: matches {passed} options of oneOf")
            return
    for sub_schema in schema.get("allOf", ()):
        _validate(value, sub_schema, path, root, errors)
        if errors:
            return
    t = schema.get("type")
    if t is not None:
        types = t if isinstance(t, list) else [t]
        if not any(_TYPES.get(name, lambda v: True)(value) for name in types):
            errors.append(f"{path}: expected {' or '.join(types)}, got {_short(value)}")
            return
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: expected {_short(schema['const'])}, got {_short(value)}")
        return
    if "enum" in schema and value not in schema["enum"]:
        allowed = schema["enum"]
        shown = ", ".join(_short(v) for v in allowed[:8]) + (", ..." if len(allowed) > 8 else "")
        errors.append(f"{path}: {_short(value)} is not one of [{shown}]")
        return
    if isinstance(value, str):
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
        elif "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        elif "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match {schema['pattern']!r}")
    elif _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: below {schema['minimum']}")
        elif "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: above {schema['maximum']}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
            return
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
            return
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list):  # positional schemas, then ``items`` (if any) for the rest
            for i, (item, sub_schema) in enumerate(zip(value, prefix)):
                _validate(item, sub_schema, f"{path}[{i}]", root, errors)
                if errors:
                    return
            if items is False and len(value) > len(prefix):
                errors.append(f"{path}: more than {len(prefix)} items")
                return
            value = value[len(prefix):]
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _validate(item, items, f"{path}[{i}]", root, errors)
                if errors:
                    return
    elif isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{path}: missing {key!r}")
                return
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                _validate(item, props[key], f"{path}.{key}", root, errors)
            elif extra is False:
                errors.append(f"{path}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                _validate(item, extra, f"{path}.{key}", root, errors)
            if errors:
                return
