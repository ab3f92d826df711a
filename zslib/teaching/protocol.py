"""What crosses the pipe from a graded notebook to the grader, and the schema every message must fit before the
grader uses it (:mod:`zslib.teaching.sandbox` writes the messages, :mod:`zslib.teaching.grading` reads them).

The submission's process can write anything on its end of the pipe, so each line is checked here, in the grader's
process, against what the sandbox itself sends:

* ``{"op": "cell", "index": i, "of": n}`` before code cell ``i`` (from 0) of ``n`` runs;
* ``{"op": "error", "index": i, "error": "Type: message"}`` after a cell raised;
* ``{"op": "inputs", "name": exercise}``: a function check asks for its inputs;
* ``{"op": "answer", "name": exercise, "kind": kind, ...}`` with, for a function, ``"results"`` (one entry per
  input the grader sent: ``{"value": tensor, "requires_grad": bool[, "grad": tensor]}``, ``{"error": text}`` or
  ``{"unanswered": true[, "stub": true]}``) and ``"identity"``; for a number or a choice, ``"answer"`` and
  ``"context"`` (encoded values, :func:`zslib.teaching.sandbox.encode`); or ``"unanswered"`` or ``"error"``;
* ``{"op": "done"}`` after the last cell.

An encoded value is ``null``, a boolean, a number, a string (``"inf"``, ``"-inf"`` and ``"nan"`` stand for those
floats), ``{"tensor": "long" | "double", "shape": [...], "data": [...]}`` whose data has as many numbers as the
shape says, ``{"sequence": [...]}``, ``{"mapping": [[key, value], ...]}`` or ``{"unreadable": text}``, nested at
most :data:`MAX_DEPTH` deep. :func:`check_message` returns the message or raises :class:`BadMessage` with the
reason; an answer that does not fit costs its exercise the points (the grader says why), nothing else.
"""
from __future__ import annotations

__all__ = ["BadMessage", "check_message", "check_value", "MAX_DEPTH", "OPS"]

MAX_DEPTH = 16  # nesting of an encoded value
OPS = ("cell", "error", "inputs", "answer", "done")
_TEXT = 2000  # longest text kept from a message (an error line, an identity)


class BadMessage(ValueError):
    """A line from the graded notebook that does not fit the protocol; the text says what is wrong."""


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def check_value(value, where: str = "the answer", depth: int = 0) -> None:
    """Raise :class:`BadMessage` unless ``value`` is an encoded value (see the module docstring)."""
    if depth > MAX_DEPTH:
        raise BadMessage(f"{where} is nested more than {MAX_DEPTH} deep")
    if value is None or isinstance(value, (bool, str)) or _number(value):
        return
    if not isinstance(value, dict):
        raise BadMessage(f"{where} is a JSON {type(value).__name__}, not an encoded value")
    if set(value) == {"tensor", "shape", "data"}:
        shape, data = value["shape"], value["data"]
        if value["tensor"] not in ("long", "double"):
            raise BadMessage(f"{where}: a tensor's kind must be 'long' or 'double', got {value['tensor']!r}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape) or len(shape) > 8:
            raise BadMessage(f"{where}: a tensor's shape must be a list of at most 8 sizes >= 0")
        if not isinstance(data, list) or len(data) != _count(shape):
            raise BadMessage(f"{where}: a tensor of shape {shape} needs {_count(shape)} numbers, got "
                             f"{len(data) if isinstance(data, list) else type(data).__name__}")
        if not all(_number(x) or x in ("inf", "-inf", "nan") for x in data):
            raise BadMessage(f"{where}: a tensor's data must be numbers")
        if value["tensor"] == "long" and not all(isinstance(x, int) and not isinstance(x, bool) for x in data):
            raise BadMessage(f"{where}: a long tensor's data must be whole numbers")
        return
    if set(value) == {"sequence"} and isinstance(value["sequence"], list):
        for i, v in enumerate(value["sequence"]):
            check_value(v, f"{where}[{i}]", depth + 1)
        return
    if set(value) == {"mapping"} and isinstance(value["mapping"], list):
        for pair in value["mapping"]:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise BadMessage(f"{where}: a mapping is a list of [name, value] pairs")
            check_value(pair[1], f"{where}[{pair[0]!r}]", depth + 1)
        return
    if set(value) == {"unreadable"} and isinstance(value["unreadable"], str):
        return
    raise BadMessage(f"{where} is an object with keys {sorted(value)[:5]}, not an encoded value")


def _text(msg: dict, key: str, required: bool = False) -> None:
    if key in msg and not isinstance(msg[key], str):
        raise BadMessage(f"'{key}' must be text, got {type(msg[key]).__name__}")
    if required and key not in msg:
        raise BadMessage(f"'{key}' is missing")
    if key in msg:
        msg[key] = msg[key][:_TEXT]


def _result(entry, i: int) -> None:
    """One input's entry of a function answer's ``results``."""
    if not isinstance(entry, dict):
        raise BadMessage(f"results[{i}] is a JSON {type(entry).__name__}, not an object")
    if "unanswered" in entry:
        if entry["unanswered"] is not True or set(entry) - {"unanswered", "stub"}:
            raise BadMessage(f"results[{i}]: an unanswered input is {{'unanswered': true}}")
        return
    if "error" in entry:
        if set(entry) != {"error"}:
            raise BadMessage(f"results[{i}]: an error entry holds only 'error'")
        _text(entry, "error")
        return
    if not {"value", "requires_grad"} <= set(entry) <= {"value", "requires_grad", "grad"}:
        raise BadMessage(f"results[{i}] needs 'value' and 'requires_grad' (and may hold 'grad'), got {sorted(entry)}")
    if not isinstance(entry["requires_grad"], bool):
        raise BadMessage(f"results[{i}]: 'requires_grad' must be true or false")
    for key in ("value", "grad"):
        if key in entry:
            if not (isinstance(entry[key], dict) and "tensor" in entry[key]):
                raise BadMessage(f"results[{i}]: '{key}' must be an encoded tensor")
            check_value(entry[key], f"results[{i}].{key}")


def _answer(msg: dict, kind: str, inputs: int | None) -> None:
    if msg.get("kind") != kind:
        raise BadMessage(f"'kind' must be {kind!r} for this exercise, got {msg.get('kind')!r}")
    if "unanswered" in msg and msg["unanswered"] is not True:
        raise BadMessage("'unanswered' must be true when present")
    for key in ("error", "context_error", "identity"):
        _text(msg, key)
    if msg.get("unanswered") or "error" in msg:
        return
    if kind == "function":
        results = msg.get("results")
        if not isinstance(results, list):
            raise BadMessage(f"a function's 'results' must be a list, got {type(results).__name__}")
        if inputs is not None and len(results) != inputs:
            raise BadMessage(f"a function's 'results' must have one entry per input sent ({inputs}), got {len(results)}")
        for i, entry in enumerate(results):
            _result(entry, i)
        return
    if "answer" not in msg:
        raise BadMessage("'answer' is missing")
    check_value(msg["answer"], "'answer'")
    context = msg.get("context", {"mapping": []})
    if not (isinstance(context, dict) and set(context) == {"mapping"}):
        raise BadMessage("'context' must be an encoded mapping of the chapter's values")
    check_value(context, "'context'")


def check_message(msg, kinds: dict, inputs: dict | None = None) -> dict:
    """``msg`` (a parsed JSON line) when it fits the protocol for the graded exercises ``kinds`` (name -> kind);
    ``inputs``: name -> how many inputs the grader sent that function check. Raises :class:`BadMessage`."""
    if not isinstance(msg, dict):
        raise BadMessage(f"a message is a JSON object, got {type(msg).__name__}")
    op = msg.get("op")
    if op not in OPS:
        raise BadMessage(f"unknown 'op' {op!r}")
    if op in ("cell", "error"):
        if not (isinstance(msg.get("index"), int) and not isinstance(msg.get("index"), bool) and msg["index"] >= 0):
            raise BadMessage(f"'{op}' needs a cell 'index' >= 0")
        _text(msg, "error", required=op == "error")
        return msg
    if op == "done":
        return msg
    name = msg.get("name")
    if not isinstance(name, str) or name not in kinds:
        raise BadMessage(f"{name!r} is not an exercise graded here")
    if op == "answer":
        _answer(msg, kinds[name], (inputs or {}).get(name))
    return msg
