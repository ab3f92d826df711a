"""The grader's side inside a submission's process: executes the notebook cell by cell and hands each
answer over to the grader, which scores it elsewhere (:mod:`zslib.teaching.grading`).

``python -m zslib.teaching.sandbox NOTEBOOK OUT_FD IN_FD`` is started by the grader, in a fresh process group,
with its own HOME, results and cache folders and resource limits. Before the first cell it replaces
``zslib.teaching.exercises`` by a module whose ``check`` records the answer and decides nothing, and whose
``REGISTRY`` holds only what a student may read (names, titles, hints, options); the modules that hold
the references (the exercise banks, the grader) are not importable. Each ``check`` call writes one JSON
line to ``OUT_FD`` at once, so a notebook that later hangs or dies keeps what it answered before:

* a number question: the numbers (``values``);
* a choice question: the word and the chapter's printed values it is decided from (the grader checks those
  values against its own run of the instructor notebook and decides from that run, never from these);
* a function: the grader sends the inputs (published and hidden) on ``IN_FD`` only now; the function runs
  on each under a time limit and its outputs (and the gradient of the case's argument) go back as numbers
  (an untouched ``...`` stub is reported as not attempted; a function that raises, ``NotImplementedError``
  included, as raising it).

A cell that raises is reported too (its index and the error's first line), and the next cells still run.

Only data crosses the pipe (JSON, never pickle), so nothing the submission writes can run in the
grader; and no reference value exists in this process, so nothing here (a frame, the registry, the
log) can be read to get one. Whatever the submission writes on the pipe itself can only be an answer,
scored like any other.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import math
import os
import random
import re
import sys
import types

import numpy as np
import torch

import zslib.teaching as teaching

_LIMIT = 4_000_000  # longest JSON line the grader reads; a larger answer is refused


def encode(value):
    """A JSON-able form of a tensor, number, sequence or mapping (tensors: dtype, shape, flat values)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        kind = "long" if not t.is_floating_point() else "double"
        flat = t.reshape(-1).tolist() if kind == "long" else t.double().reshape(-1).tolist()
        return {"tensor": kind, "shape": list(t.shape), "data": flat}
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and abs(value) < 2 ** 53:
        return value
    if isinstance(value, (int, float)):
        f = float(value)  # OverflowError for 10**400: the caller reports it
        return f if math.isfinite(f) else repr(f)
    if isinstance(value, dict):
        return {"mapping": [[str(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return {"sequence": [encode(v) for v in value]}
    if isinstance(value, np.ndarray):  # numpy scalars and arrays
        return encode(torch.as_tensor(value))
    if isinstance(value, np.generic):
        return encode(value.item())
    return {"unreadable": f"{type(value).__name__}: {value!r}"[:200]}


def decode(value):
    """The inverse of :func:`encode` for what the grader sends (tensors, numbers, sequences, mappings)."""
    if isinstance(value, dict):
        if "tensor" in value:
            dtype = torch.long if value["tensor"] == "long" else torch.float64
            return torch.tensor(value["data"], dtype=dtype).reshape(value["shape"])
        if "sequence" in value:
            return tuple(decode(v) for v in value["sequence"])
        if "mapping" in value:
            return {k: decode(v) for k, v in value["mapping"]}
        return value
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def run_function(fn, cases: list, seconds: float | None = None) -> list:
    """Call ``fn`` on each encoded case (``{"args", "kwargs", "grad"}``) and encode what it returned: the
    value, whether it carries a gradient and, for a case with ``grad``, the gradient of the weighted sum the
    grader also takes of the reference (weights from 0.5 to 1.5 over the output's elements)."""
    # here, not at the top: the kinds that _install loaded for the notebook (importing zslib.teaching.exercises
    # before that would load the exercise banks, with their references, into the submission's process)
    from zslib.teaching.exercises.kinds import TimeLimit, call_limited, is_stub

    results = []
    for case in cases:
        if results and results[-1].get("error", "").startswith("did not return"):
            results.append(results[-1])  # one endless call is enough: the other inputs are not tried
            continue
        args = list(decode({"sequence": case["args"]}))
        kwargs = decode({"mapping": case.get("kwargs", [])})
        grad = case.get("grad")
        if grad is not None:
            args[grad] = args[grad].clone().requires_grad_(True)
        try:
            got = call_limited(fn, tuple(args), kwargs, seconds)
        except TimeLimit:
            results.append({"error": "did not return within the time limit (an endless loop?)"})
            continue
        except Exception as err:  # noqa: BLE001  (the student's code)
            results.append({"error": f"raised {type(err).__name__}: {err}"[:500]})
            continue
        if got is None and is_stub(fn):
            results.append({"unanswered": True, "stub": True})  # the student version's `...`, untouched
            continue
        if got is None:
            results.append({"error": "returned None (did you forget `return`?)"})
            continue
        try:
            value = got if isinstance(got, torch.Tensor) else torch.as_tensor(got, dtype=torch.float64)
            out = {"value": encode(value.double() if value.is_floating_point() else value),
                   "requires_grad": bool(value.requires_grad)}
            if grad is not None and value.requires_grad:
                weights = torch.linspace(0.5, 1.5, max(value.numel(), 1), dtype=torch.float64).reshape(value.shape)
                (g,) = call_limited(torch.autograd.grad, ((value.double() * weights).sum(), args[grad]),
                                    {"allow_unused": True}, seconds)
                out["grad"] = encode(torch.zeros_like(args[grad]) if g is None else g)
        except TimeLimit:
            out = {"error": "its gradient did not finish within the time limit"}
        except Exception as err:  # noqa: BLE001  (10**400, a string, an object: a failed case, not a crash)
            out = {"error": f"returned {type(got).__name__}, which is not a number or tensor ({err})"[:500]}
        results.append(out)
    return results


class same_random_state:
    """Restores Python's, NumPy's and torch's global random state on exit: running the student's function on the
    grader's inputs leaves the notebook's next random numbers as they would have been (so the chapter's numbers
    match the instructor notebook's run, in which the reference solution ran instead)."""

    def __enter__(self):
        self._py, self._torch, self._np = random.getstate(), torch.random.get_rng_state(), np.random.get_state()
        return self

    def __exit__(self, *exc):
        random.setstate(self._py)
        torch.random.set_rng_state(self._torch)
        np.random.set_state(self._np)
        return False


class _Channel:
    def __init__(self, out_fd: int, in_fd: int):
        self._out = os.fdopen(out_fd, "w", encoding="utf-8", buffering=1)
        self._in = os.fdopen(in_fd, "r", encoding="utf-8")

    def send(self, message: dict) -> None:
        line = json.dumps(message)
        if len(line) > _LIMIT:
            line = json.dumps({"op": "answer", "name": message.get("name"), "kind": message.get("kind"),
                               "error": "the answer is too large to hand over"})
        self._out.write(line + "\n")
        self._out.flush()

    def ask(self, message: dict) -> dict:
        self.send(message)
        line = self._in.readline()
        return json.loads(line) if line else {}


def _public_module(channel: _Channel, public: dict, kinds) -> types.ModuleType:
    """The ``zslib.teaching.exercises`` a graded notebook sees: ``check`` hands the answer over."""
    mod = types.ModuleType("zslib.teaching.exercises", "Exercises during grading: answers are handed to the grader.")
    registry = {name: types.SimpleNamespace(name=name, **info) for name, info in public.items()}

    def check(name, answer, **context):
        if not isinstance(name, str) or name not in registry:
            msg = f"check({name!r}, ...): no exercise of that name is graded here."
            print("✘ " + msg)
            return kinds.Outcome(str(name), False, msg)
        ex = registry[name]
        message = {"op": "answer", "name": name, "kind": ex.kind}
        if answer is None or answer is Ellipsis:
            message["unanswered"] = True
        elif ex.kind == "function":
            if not callable(answer):
                message["error"] = f"expected a function, got {type(answer).__name__}"
            else:
                message["identity"] = f"{getattr(answer, '__module__', '')}.{getattr(answer, '__qualname__', '')}"
                cases = channel.ask({"op": "inputs", "name": name}).get("cases", [])
                with same_random_state():  # a check draws nothing from the notebook's random streams
                    message["results"] = run_function(answer, cases)
        else:
            try:
                message["answer"] = encode(answer)
            except (OverflowError, ValueError) as err:
                message["error"] = f"the answer is not a usable number ({err})"
            try:
                message["context"] = encode(dict(context))
            except (OverflowError, ValueError) as err:
                message["context_error"] = str(err)
        channel.send(message)
        text = f"{name}: your answer was handed to the grader."
        print("• " + text)
        return kinds.Outcome(name, False, text)

    def verdict(name, answer, **context):
        raise RuntimeError("verdict() is not available while a notebook is graded; call check(name, answer)")

    mod.check, mod.verdict, mod.REGISTRY, mod.Outcome = check, verdict, registry, kinds.Outcome
    mod.EXERCISES = list(registry.values())
    mod.exercises_of = lambda chapter: [e for e in mod.EXERCISES if e.name.split(".")[0] == chapter]
    mod.__all__ = ["REGISTRY", "check", "verdict", "exercises_of", "Outcome"]
    return mod


class _Refuse(importlib.abc.MetaPathFinder):
    """Refuses the modules that hold references (they are not needed to run a chapter). The grader's own module is
    replaced by :func:`_grading_stub`, so that what imports a name of it to run a chapter (the chapter card's
    :mod:`zslib.teaching.assignments`) still runs."""

    BLOCKED = ("zslib.teaching.exercises.bank", "zslib.teaching.grading")

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(self.BLOCKED):
            raise ImportError(f"{fullname} is not available while a notebook is graded")
        return None


def code_sources(nb: dict) -> list[str]:
    """The source of every code cell of a notebook (a parsed ``.ipynb``), in order: the cells the sandbox runs,
    numbered as the grader numbers them (cell ``k`` is ``code_sources(nb)[k - 1]``)."""
    out = []
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            src = cell.get("source", "")
            out.append("".join(map(str, src)) if isinstance(src, list) else str(src))
    return out


def _grading_stub() -> types.ModuleType:
    """``zslib.teaching.grading`` during grading: :func:`exercise_names` only (which reads a notebook and holds no
    reference); any other name raises, saying why."""
    mod = types.ModuleType("zslib.teaching.grading", "The grader is not available while a notebook is graded.")
    pattern = re.compile(r"""check\(\s*["']([\w.]+)["']""")

    def exercise_names(nb: dict) -> list[str]:
        return list(dict.fromkeys(n for src in code_sources(nb) for n in pattern.findall(src)))

    def missing(name):
        raise AttributeError(f"zslib.teaching.grading.{name} is not available while a notebook is graded")

    mod.exercise_names, mod.__getattr__ = exercise_names, missing
    return mod


def _install(channel: _Channel, public: dict) -> None:
    pkg_dir = os.path.join(os.path.dirname(teaching.__file__), "exercises")
    spec = importlib.util.spec_from_file_location("zslib.teaching.exercises.kinds", os.path.join(pkg_dir, "kinds.py"))
    kinds = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = kinds
    spec.loader.exec_module(kinds)
    mod = _public_module(channel, public, kinds)
    mod.__path__ = []  # a package with no importable submodules but the loaded kinds
    mod.kinds = kinds
    sys.modules["zslib.teaching.exercises"] = mod
    sys.modules["zslib.teaching.grading"] = _grading_stub()
    sys.meta_path.insert(0, _Refuse())


def _cells(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return code_sources(json.load(fh))


def main(argv=None) -> int:
    notebook, out_fd, in_fd = (argv or sys.argv[1:])[:3]
    channel = _Channel(int(out_fd), int(in_fd))
    hello = json.loads(channel._in.readline() or "{}")
    _install(channel, hello.get("public", {}))
    cells = _cells(notebook)
    from IPython.core.interactiveshell import InteractiveShell  # optional: the 'notebook' extra (a grader needs it)

    shell = InteractiveShell.instance()
    for index, source in enumerate(cells):
        channel.send({"op": "cell", "index": index, "of": len(cells)})
        print(f"----- cell {index + 1} of {len(cells)}", flush=True)
        result = shell.run_cell(source, store_history=False)
        sys.stdout.flush()
        error = result.error_before_exec or result.error_in_exec
        if error is not None:  # reported, and the next cells still run (answers after it keep their points)
            channel.send({"op": "error", "index": index, "error": f"{type(error).__name__}: {error}"[:300]})
    channel.send({"op": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
