"""The three kinds of exercise check: a function against its zslib reference, a number within a stated
tolerance, and a choice among offered words.

What an exercise asks of a student is a second, separate label, :attr:`_Base.asks` (one of :data:`ASKS`):

* ``"implementation"``: write the function the chapter teaches (a :class:`FunctionExercise`);
* ``"derivation"``: a number worked out from the chapter's equations (a :class:`NumberExercise`);
* ``"reasoning"``: a word that follows from the method's definitions, whatever a run printed
  (:class:`ReasoningExercise`);
* ``"prediction"``: a prediction about a noisy result, decided by the 95% interval the page shows, with three
  answers: above, below, or no clear effect (:class:`PredictionExercise`);
* ``"experiment"``: a small experiment of the student's own, written as a function and checked against the
  reference experiment on generated inputs (:class:`ExperimentExercise`).

No exercise is answered by reading one printed number: a choice decided by a run's numbers is a prediction, and
a prediction is decided by the interval of a paired difference, never by the sign of a noisy mean.

Every check answers with an :class:`Outcome`: passed or not, and a message in plain words. A failed
function check names the generated input that failed and shows expected against got on it, then gives the
exercise's hint; a failed number or choice check says in which direction the answer is off (never the
value itself) and gives the hint. None of them prints the solution.
"""
from __future__ import annotations

import dis
import inspect
import math
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

__all__ = ["Outcome", "Case", "FunctionExercise", "NumberExercise", "ChoiceExercise", "PredictionExercise",
           "ReasoningExercise", "ExperimentExercise", "ASKS", "interval_word", "NOT_ANSWERED", "call_limited",
           "TimeLimit", "CALL_SECONDS", "WALL_FACTOR", "is_stub", "NOT_ATTEMPTED"]

#: What an exercise can ask of a student (:attr:`_Base.asks`); see the module docstring.
ASKS = ("implementation", "derivation", "reasoning", "prediction", "experiment")

NOT_ANSWERED = "not answered yet: replace the `...` by your answer and run the cell again"
#: what the grader says of an exercise whose answer is still the student version's ``...``
NOT_ATTEMPTED = "not attempted: the `...` of the student version is still there"
CALL_SECONDS = 10.0  # how long a student's function may compute on one generated input (they take milliseconds)
#: A function that waits instead of computing (a sleep, an ``input()``) is stopped after this many times
#: :data:`CALL_SECONDS` of the clock on the wall: the limit itself counts processor time, which a busy machine does
#: not stretch, so that a check never fails because other programs share the processor.
WALL_FACTOR = 30
# what reading a number out of a student's answer or the chapter's printed values can raise
_BAD_NUMBER = (TypeError, ValueError, OverflowError, ArithmeticError, KeyError, IndexError, AttributeError)


class TimeLimit(BaseException):
    """Raised inside a student's function that ran past :data:`CALL_SECONDS` (a BaseException, so that an
    ``except Exception`` in the student's code does not swallow it)."""


def call_limited(fn, args: tuple, kwargs: dict, seconds: float | None = None):
    """``fn(*args, **kwargs)``, stopped with :class:`TimeLimit` once it has used ``seconds`` (default
    :data:`CALL_SECONDS`) of processor time, or :data:`WALL_FACTOR` times as long on the wall clock. In the main
    thread timer signals interrupt the call (re-sent every half second, in case the function catches the first);
    elsewhere the call runs in a daemon thread, watched through its own processor clock, that is abandoned when it
    overruns (it cannot be stopped from outside, but the check returns)."""
    seconds = CALL_SECONDS if seconds is None else seconds
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def on_limit(signum, frame):
            raise TimeLimit()

        previous = {sig: signal.signal(sig, on_limit) for sig in (signal.SIGPROF, signal.SIGALRM)}
        signal.setitimer(signal.ITIMER_PROF, seconds, 0.5)
        signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR, 0.5)
        try:
            return fn(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.setitimer(signal.ITIMER_REAL, 0)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    box = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as err:  # handed to the caller below
            box["error"] = err

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    started = time.monotonic()
    clock = time.pthread_getcpuclockid(worker.ident) if hasattr(time, "pthread_getcpuclockid") else None
    while worker.is_alive():
        worker.join(0.05)
        try:
            used = time.clock_gettime(clock) if clock is not None else 0.0
        except OSError:  # the thread ended between the two calls: its clock is gone
            used = 0.0
        if worker.is_alive() and (used > seconds or time.monotonic() - started > seconds * WALL_FACTOR):
            raise TimeLimit()
    if "error" in box:
        raise box["error"]
    return box["value"]


@dataclass(frozen=True)
class Outcome:
    """What a check found: ``passed`` and a message for the student."""

    name: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return self.message

    def _ipython_display_(self) -> None:
        """Shown as nothing in a notebook: :func:`zslib.teaching.exercises.check` has printed the message already."""


@dataclass(frozen=True)
class Case:
    """One generated input of a function check: a short description and the positional arguments.

    ``grad`` is the index of the argument whose gradient is compared (``None``: no gradient check).
    """

    description: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    grad: int | None = 0


def _unanswered(answer) -> bool:
    return answer is None or answer is Ellipsis


_STUB_LINE = re.compile(r"^\s*\.\.\.\s*(#.*)?$", re.MULTILINE)


def is_stub(fn) -> bool:
    """Whether ``fn`` is an untouched student stub: a body of nothing but ``...`` (and a docstring), or a source
    that still holds the stub's ``...`` line (a stub that keeps a few given lines above it)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP", "CACHE")]
    if ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)]):
        return True
    try:
        return bool(_STUB_LINE.search(inspect.getsource(fn)))
    except (OSError, TypeError):
        return False


def _short(value) -> str:
    if isinstance(value, torch.Tensor):
        value = value.detach()
        if value.numel() == 1:
            return f"{value.item():.6g}"
        flat = value.flatten()[:6].tolist()
        more = ", ..." if value.numel() > 6 else ""
        return f"tensor of shape {tuple(value.shape)} starting [{', '.join(f'{v:.4g}' for v in flat)}{more}]"
    if isinstance(value, float):
        return f"{value:.6g}"
    return repr(value)


def _as_tensor(value) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.as_tensor(value, dtype=torch.float64)
    except Exception:  # noqa: BLE001  (anything a student returns: 10**400, a string, an object)
        return None


def _fresh(args: tuple, grad: int | None) -> tuple:
    """Copies of the case's arguments (a student's function must not change the next call's input)."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            a = a.detach().clone()
            if i == grad:
                a.requires_grad_(True)
        out.append(a)
    return tuple(out)


@dataclass
class _Base:
    name: str
    title: str
    hint: str
    points: int = 1
    asks: str = ""  # one of ASKS: what the exercise asks of a student

    def _decided(self, fn, context: dict):
        """``fn`` of the chapter's values, or an :class:`Outcome` saying which value could not be read."""
        try:
            return fn(**{k: context[k] for k in getattr(self, "context", ())})
        except _BAD_NUMBER as err:
            shown = ", ".join(f"{k}={context[k]!r}"[:80] for k in getattr(self, "context", ()))
            return Outcome(self.name, False, f"{self.header()}: the chapter's values could not be read as numbers "
                                             f"({shown}: {type(err).__name__}: {err}); pass the numbers the chapter "
                                             "printed, unchanged.")

    def _require_context(self, context: dict) -> None:
        """The chapter must pass every value the exercise is decided from (``self.context``)."""
        missing = [k for k in getattr(self, "context", ()) if k not in context]
        if missing:
            raise TypeError(f"check({self.name!r}, ...) needs the chapter's {', '.join(missing)}=... as keyword "
                            "argument(s)")

    def header(self) -> str:
        return f"{self.name} ({self.title})"


@dataclass
class FunctionExercise(_Base):
    """The student's function against ``reference`` on ``cases()``: the value and, for a case with
    ``grad`` set, the gradient with respect to that argument (both in float64)."""

    reference: Callable = None
    cases: Callable[[], Sequence[Case]] = None
    rtol: float = 1e-5
    atol: float = 1e-8
    forbidden: tuple = ()  # zslib functions the student must not simply call
    asks: str = "implementation"

    def run(self, answer, **context) -> Outcome:
        if _unanswered(answer):
            return Outcome(self.name, False, f"{self.header()}: {NOT_ANSWERED}.")
        if not callable(answer):
            return Outcome(self.name, False, f"{self.header()}: expected a function, got {type(answer).__name__}.")
        if answer is self.reference or answer in self.forbidden:
            return Outcome(self.name, False, f"{self.header()}: that is the zslib reference itself; "
                                             "write the computation yourself.")
        cases = list(self.cases())
        stub = is_stub(answer)
        for number, case in enumerate(cases, 1):
            where = f"input {number} of {len(cases)} ({case.description})"
            got_args = _fresh(case.args, case.grad)  # the answer runs first: no reference value in any frame
            try:
                got = call_limited(answer, got_args, case.kwargs)
            except TimeLimit:
                return Outcome(self.name, False, f"{self.header()} failed on {where}: your function did not return "
                                                 f"within {CALL_SECONDS:g} s of computing (an endless loop?).\nHint: {self.hint}")
            except NotImplementedError:
                return Outcome(self.name, False, f"{self.header()}: {NOT_ANSWERED}.")
            except Exception as err:  # the student's code: any error is reported, not raised
                return Outcome(self.name, False, f"{self.header()} failed on {where}: your function raised "
                                                 f"{type(err).__name__}: {err}\nHint: {self.hint}")
            if got is None and stub:
                return Outcome(self.name, False, f"{self.header()}: {NOT_ANSWERED}.")
            if got is None:
                return Outcome(self.name, False, f"{self.header()}: your function returned None on {where}; "
                                                 "it should return the value (did you forget `return`?).")
            ref_args = _fresh(case.args, case.grad)
            expected = self.reference(*ref_args, **case.kwargs)
            try:
                message = self._compare(expected, got, ref_args, got_args, case, where)
            except Exception as err:  # noqa: BLE001  (an odd result must fail the check, not raise)
                message = (f"{self.header()} failed on {where}: your result could not be compared with the "
                           f"reference ({type(err).__name__}: {err}).\nHint: {self.hint}")
            if message:
                return Outcome(self.name, False, message)
        grad_note = " and gradients" if any(c.grad is not None for c in cases) else ""
        return Outcome(self.name, True, f"{self.header()}: passed: values{grad_note} match the zslib "
                                        f"reference on all {len(cases)} inputs.")

    def _compare(self, expected, got, ref_args, got_args, case, where) -> str | None:
        """``None`` when ``got`` matches ``expected`` on one case (value, shape and gradient), else the message."""
        exp_t, got_t = _as_tensor(expected), _as_tensor(got)
        if got_t is None:
            return (f"{self.header()} failed on {where}: expected a number or tensor, got "
                    f"{type(got).__name__}.\nHint: {self.hint}")
        if got_t.shape != exp_t.shape and not (got_t.numel() == exp_t.numel() == 1):
            return (f"{self.header()} failed on {where}: expected shape {tuple(exp_t.shape)}, got "
                    f"{tuple(got_t.shape)}.\nHint: {self.hint}")
        e64, g64 = exp_t.detach().double().reshape(exp_t.shape), got_t.detach().double().reshape(exp_t.shape)
        if not torch.allclose(g64, e64, rtol=self.rtol, atol=self.atol, equal_nan=True):
            return f"{self.header()} failed on {where}: expected {_short(e64)}, got {_short(g64)}.\nHint: {self.hint}"
        if case.grad is not None:
            return self._gradient(ref_args[case.grad], got_args[case.grad], expected, got_t, where)
        return None

    def _gradient(self, ref_in, got_in, expected, got, where) -> str | None:
        weights = torch.linspace(0.5, 1.5, max(expected.numel(), 1), dtype=torch.float64).reshape(expected.shape)
        (g_ref,) = torch.autograd.grad((expected.double() * weights).sum(), ref_in, allow_unused=True)
        if not got.requires_grad:
            return (f"{self.header()} failed on {where}: the value is right but it carries no gradient "
                    "(the computation left PyTorch, e.g. through .item(), .numpy() or a Python float); keep it "
                    "in torch operations so that training can differentiate it.")
        (g_got,) = torch.autograd.grad((got.double() * weights).sum(), got_in, allow_unused=True)
        g_ref = torch.zeros_like(ref_in) if g_ref is None else g_ref
        g_got = torch.zeros_like(got_in) if g_got is None else g_got
        if not torch.allclose(g_got, g_ref, rtol=1e-4, atol=1e-7):
            return (f"{self.header()} failed on {where}: the value matches but the gradient does not: expected "
                    f"{_short(g_ref)}, got {_short(g_got)}.\nHint: {self.hint}")
        return None


@dataclass
class NumberExercise(_Base):
    """A number (or a tuple of numbers) within ``tol`` of ``expected(**context)``; ``relative`` makes the
    tolerance relative to the true value."""

    expected: Callable[..., Any] = None
    tol: float = 1e-3
    relative: bool = False
    context: tuple = ()  # names of the context values the chapter passes (e.g. its printed table)
    asks: str = "derivation"

    def run(self, answer, **context) -> Outcome:
        if _unanswered(answer):
            return Outcome(self.name, False, f"{self.header()}: {NOT_ANSWERED}.")
        self._require_context(context)
        truth = self._decided(self.expected, context)
        if isinstance(truth, Outcome):
            return truth
        truths = truth if isinstance(truth, tuple) else (truth,)
        answers = answer if isinstance(answer, (tuple, list)) else (answer,)
        if len(answers) != len(truths):
            return Outcome(self.name, False, f"{self.header()}: expected {len(truths)} number(s), "
                                             f"got {len(answers)}.")
        for i, (a, t) in enumerate(zip(answers, truths)):
            which = f"number {i + 1} " if len(truths) > 1 else ""
            try:
                a = float(a)
            except OverflowError:
                what = which or "the answer "
                return Outcome(self.name, False, f"{self.header()}: {what}is too large to be a float (over 1.8e308): "
                                                 "expected a number near the answer.")
            except _BAD_NUMBER:
                return Outcome(self.name, False, f"{self.header()}: expected a number, got {a!r}"[:300] + ".")
            tol = self.tol * abs(t) if self.relative else self.tol
            if not math.isfinite(a) or abs(a - t) > tol:
                direction = "not finite" if not math.isfinite(a) else ("too high" if a > t else "too low")
                told = f"{self.tol:.0%} relative" if self.relative else f"{self.tol:g}"
                return Outcome(self.name, False, f"{self.header()}: {which}{a:.6g} is {direction} (the check "
                                                 f"accepts a tolerance of {told}).\nHint: {self.hint}")
        return Outcome(self.name, True, f"{self.header()}: passed (within the tolerance {self.tol:g}"
                                        f"{' relative' if self.relative else ''}).")


@dataclass
class ChoiceExercise(_Base):
    """One of ``options``; the right one is ``decide(**context)``, computed from the numbers the chapter
    printed (so the answer follows the run, whatever it turned out to be)."""

    options: tuple = ()
    decide: Callable[..., str] = None
    context: tuple = ()

    def run(self, answer, **context) -> Outcome:
        if _unanswered(answer):
            return Outcome(self.name, False, f"{self.header()}: {NOT_ANSWERED}.")
        self._require_context(context)
        text = str(answer).strip().lower()
        # no fixed options: the keys of the chapter's table (e.g. the losses it compared)
        options = self.options or tuple(str(k) for k in context.get("table", {}))
        if text not in (o.lower() for o in options):  # answers are read without regard to case
            return Outcome(self.name, False, f"{self.header()}: answer one of {', '.join(map(repr, options))}; "
                                             f"got {answer!r}.")
        truth = self._decided(self.decide, context)
        if isinstance(truth, Outcome):
            return truth
        text = next(o for o in options if o.lower() == text)  # as the option is written
        if text.lower() != str(truth).lower():
            return Outcome(self.name, False, f"{self.header()}: {text!r} is not what {self.decided_by}.\n"
                                             f"Hint: {self.hint}")
        return Outcome(self.name, True, f"{self.header()}: passed: {text!r} is what {self.decided_by}.")

    #: what decides the right answer, in the check's message
    decided_by = "this run's numbers show"


def interval_word(interval, against: float = 0.0, words: Sequence[str] = ("up", "down", "no clear effect")) -> str:
    """``words[0]`` when the whole 95% interval ``(mean, low, high)`` lies above ``against``, ``words[1]`` when it
    lies below, ``words[2]`` when it contains it. The mean plays no part: a noisy mean above ``against`` whose
    interval reaches below it is no clear effect. An interval of one seed (NaN bounds) decides nothing
    (``ValueError``)."""
    interval = getattr(interval, "diff", interval)  # a stats.Paired: its difference
    low, high = float(tuple(interval)[1]), float(tuple(interval)[2])
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"the interval [{low}, {high}] has no finite bounds (one seed?): it decides nothing")
    if low > high:
        raise ValueError(f"an interval's low end {low} lies above its high end {high}")
    against = float(against)
    return words[0] if low > against else words[1] if high < against else words[2]


@dataclass
class PredictionExercise(ChoiceExercise):
    """A prediction about a noisy result, decided by the 95% interval the page shows (the chapter passes it as
    ``interval=(mean, low, high)``, e.g. of :func:`zslib.engine.stats.paired`): ``options[0]`` when the interval
    lies above the reference, ``options[1]`` below it, ``options[2]`` when it contains it. The reference is 0 (a
    paired difference) or, with ``against``, the chapter's value of that name (for instance the paper's figure,
    with the options "larger", "smaller", "within")."""

    options: tuple = ("up", "down", "no clear effect")
    context: tuple = ("interval",)
    against: str | None = None
    asks: str = "prediction"

    def __post_init__(self):
        if len(self.options) != 3:
            raise ValueError(f"{self.name}: a prediction offers three answers (above, below, neither)")
        if self.against is not None and self.against not in self.context:
            self.context = (*self.context, self.against)
        if self.decide is None:
            self.decide = self._from_interval

    decided_by = "the interval shows"

    def _from_interval(self, **values) -> str:
        against = 0.0 if self.against is None else values[self.against]
        return interval_word(values["interval"], against, self.options)


@dataclass
class ReasoningExercise(ChoiceExercise):
    """A word that follows from the method's definitions (the sign of a gradient, what a rule does on a tie, what
    a protocol leaks), the same whatever a run printed: ``answer`` is one of ``options``; nothing is read from
    the chapter."""

    answer: str = ""
    asks: str = "reasoning"
    decided_by = "the definitions give"

    def __post_init__(self):
        if self.answer not in self.options:
            raise ValueError(f"{self.name}: the answer {self.answer!r} is not among the options {self.options}")
        if self.context:
            raise ValueError(f"{self.name}: a reasoning exercise reads nothing from the chapter")
        if self.decide is None:
            self.decide = lambda: self.answer


@dataclass
class ExperimentExercise(FunctionExercise):
    """A small experiment of the student's own (a few optimizer steps on a toy, a walk run step by step),
    written as a function of the toy's data and settings and checked, like an implementation, against the
    reference experiment on generated toys; what it shows is the chapter's to discuss."""

    asks: str = "experiment"
