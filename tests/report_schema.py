"""A validator for the subset of JSON Schema that docs/report.schema.json uses: type (one or a
list), enum, required, properties, additionalProperties (false or a schema), items, minimum,
pattern and local $ref. Anything else in the schema is an error here, so the schema cannot
grow a keyword this checker would silently ignore (description, title, $id, $schema, $defs
are annotations)."""

from __future__ import annotations

import re
from typing import Any, Dict, List

CHECKED = {"type", "enum", "required", "properties", "additionalProperties", "items", "minimum", "pattern", "$ref"}
ANNOTATIONS = {"description", "title", "$id", "$schema", "$defs"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def errors(value: Any, schema: Dict[str, Any], root: Dict[str, Any], where: str = "$") -> List[str]:
    unknown = set(schema) - CHECKED - ANNOTATIONS
    if unknown:
        raise ValueError(f"{where}: schema keyword(s) this validator does not check: {sorted(unknown)}")
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return errors(value, target, root, where)
    found: List[str] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, n) for n in names):
            return [f"{where}: {value!r:.80} is not {' or '.join(names)}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} not one of {schema['enum']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        found.append(f"{where}: {value} < {schema['minimum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        found.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{where}: {key} is required")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                found += errors(item, props[key], root, f"{where}.{key}")
            elif extra is False:
                found.append(f"{where}: {key} is not allowed")
            elif isinstance(extra, dict):
                found += errors(item, extra, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += errors(item, schema["items"], root, f"{where}[{i}]")
    return found


def validate(value: Any, schema: Dict[str, Any]) -> List[str]:
    return errors(value, schema, schema)
