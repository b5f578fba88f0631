"""Pydantic's validation errors as the benchmark words them: one line per problem, naming the field and its fix.

The wording comes from each model's JSON Schema (the one `replaybench schema` prints), so a field added to a model
is checked and explained without a table to keep up to date.
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

COUNTS = {2: "two", 3: "three"}


def problems(error: ValidationError, model: type[BaseModel], data, where: str = "", phrases: dict | None = None
             ) -> list[str]:
    """`error`'s problems, missing fields first, then unknown ones, then wrong values (one line per field).
    Fields are named by their dotted path under `where`; `phrases` words what a field (dotted path) must be where
    its schema cannot say it (a pattern)."""
    schema = model.model_json_schema()
    missing, unknown, wrong = [], [], {}
    for e in error.errors():
        loc = tuple(map(str, e["loc"]))
        field, field_schema = _field(schema, loc)
        parent = _dotted(where, *loc[:-1])
        at = f"{parent}: " if parent else ""
        if e["type"] == "missing" and field == loc:
            missing.append(f"{at}missing field `{loc[-1]}`")
        elif e["type"] == "extra_forbidden" and field == loc[:-1]:
            known = ", ".join(_resolve(schema, field_schema)["properties"])
            unknown.append(f"{at}unknown field `{loc[-1]}` (known: {known})")
        elif e["type"] == "value_error":  # a rule of the model's own validators: its message names the fix
            rule = str(e["ctx"]["error"])
            wrong.setdefault(field, f"{where}: {rule}" if where else rule)
        elif field not in wrong:
            name = _dotted(where, *field) or "the file"
            must = (phrases or {}).get(".".join(field)) or describe(schema, field_schema)
            wrong[field] = (f"{name} must be {must}, not {_value(data, field)!r}" if must
                            else f"{name}: {e['msg']}")  # pydantic's own words, where the schema has none
    return missing + unknown + list(wrong.values())


def describe(root: dict, schema: dict) -> str | None:
    """What a value of `schema` is, in words ("a list of whole numbers"); None where the schema says more than its
    type (a pattern)."""
    schema = _resolve(root, schema)
    if "enum" in schema:
        return "one of " + ", ".join(map(str, schema["enum"]))
    if "anyOf" in schema:
        kinds = [describe(root, s) for s in schema["anyOf"]]
        return None if None in kinds else " or ".join(kinds)
    if "pattern" in schema:
        return None
    kind, positive = schema.get("type"), schema.get("exclusiveMinimum") == 0
    if kind == "array" and "prefixItems" in schema:
        items = [describe(root, s) for s in schema["prefixItems"]]
        same = len(set(items)) == 1 and items[0]
        return f"{COUNTS.get(len(items), len(items))} {_plural(items[0])}" if same else None
    if kind == "array":
        item = describe(root, schema.get("items", {}))
        return item and f"a list of {_plural(item)}"
    if kind == "object" and "enum" in schema.get("propertyNames", {}):
        keys, value = ", ".join(schema["propertyNames"]["enum"]), describe(root, schema["additionalProperties"])
        return value and f"a mapping of some of {keys} to {_plural(value)}"
    return {"integer": "a positive integer" if positive else "a whole number",
            "number": "a positive number" if positive else "a number",
            "boolean": "true or false", "string": "a string", "object": "a mapping"}.get(kind)


def _plural(kind: str) -> str:
    if not kind.startswith("a "):  # "true or false", "one of ...", "two numbers"
        return kind
    head, sep, rest = kind[2:].partition(" of ")
    return f"{head}s{sep}{rest}"


def _field(root: dict, loc: tuple[str, ...]) -> tuple[tuple[str, ...], dict]:
    """The deepest model field along `loc` (an error's location may go on into a list or a union), and its schema."""
    schema, depth = root, 0
    while depth < len(loc) and loc[depth] in _resolve(root, schema).get("properties", {}):
        schema = _resolve(root, schema)["properties"][loc[depth]]
        depth += 1
    return loc[:depth], schema


def _resolve(root: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    return root["$defs"][ref.rsplit("/", 1)[1]] if ref else schema


def _value(data, loc: tuple[str, ...]):
    for part in loc:
        data = data[part]
    return data


def _dotted(*parts: str) -> str:
    return ".".join(p for p in parts if p)
