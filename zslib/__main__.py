"""Command line: ``python -m zslib train ...`` and ``python -m zslib evaluate ...``.

Examples::

    python -m zslib train --loss triplet --iterations 300           # quick profile, SynthParts
    python -m zslib train --profile full --dataset cub200 --loss binomial --seed 1
    python -m zslib train --loss triplet --loss-param margin=0.1 --schedule step:2000:0.1
    python -m zslib evaluate --result results/baseline-triplet-synthparts-s0-<hash>.json
    python -m zslib evaluate --checkpoint results/checkpoints/<run>.pt --split train
    python -m zslib train --method cml --method-param lambda1=0.02 --method-param lambda2=0.01
    python -m zslib methods                                          # the methods and their parameters
    python -m zslib assignments --out pack                           # student/instructor notebooks, rubric
    python -m zslib assignments --out pack --format otter            # also otter-grader master notebooks
    python -m zslib grade pack/student/cml.ipynb --rubric pack/rubric.json
    python -m zslib grade-all submissions/ --rubric pack/rubric.json --out grades   # gradebook.csv, feedback/
    python -m zslib finetune --dataset flowers102                    # the fine-tuning campaign on one GPU
    python -m zslib finetune --smoke                                 # all of it, two steps, on the CPU
    python -m zslib verify --sample 3                                # train 3 recorded runs again, compare

Defaults come from the profile (``--profile``, else ``$ZS_PROFILE``, else quick). A bad argument or a
known failure (missing data, a damaged file) is reported in one line with exit status 2; ``--debug``
shows the full traceback instead.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import random
import sys
import tempfile
import time
import typing
from pathlib import Path

# Plain Python (no torch): a bad argument is answered at once. Each command imports what it runs (the runner, the
# campaign, the grader, hence torch) inside its own function, after its arguments are checked (tests/test_cli.py):
# those imports, marked "lazy", stay there.
from zslib.engine.catalog import check_train_arguments, load as _catalog
from zslib.engine.config import PROFILE_FIELDS, Config
from zslib.engine.out_of_memory import advising
from zslib.engine.profile import PROFILES, get_profile
from zslib.engine.registry import describe_methods


def _value(text: str):
    """A literal (number, bool, list...) when it parses as one, else the string itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {"true": True, "false": False, "none": None}.get(text.lower(), text)


class UsageError(Exception):
    """A bad command-line argument: reported in one line, exit status 2."""


def _key_values(items, option):
    out = {}
    for item in items or ():
        if "=" not in item:
            raise UsageError(f"{option} expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = _value(value.strip())
    return out


def _schedule(text):
    """'constant', 'cosine' or 'step:EVERY[:GAMMA]'."""
    if text is None:
        return None
    parts = text.split(":")
    if parts[0] == "step":
        if len(parts) not in (2, 3):
            raise UsageError("--schedule step needs the decay interval, e.g. step:2000 or step:2000:0.1")
        try:
            every, gamma = int(parts[1]), float(parts[2]) if len(parts) == 3 else 0.1
        except ValueError:
            raise UsageError(f"--schedule {text!r}: EVERY must be a whole number of iterations and GAMMA a number, "
                             "e.g. step:2000:0.1") from None
        if every < 1 or not 0.0 < gamma <= 1.0:
            raise UsageError(f"--schedule {text!r}: EVERY must be >= 1 and GAMMA in (0, 1]")
        return {"name": "step", "every": every, "gamma": gamma}
    if parts[0] in ("constant", "cosine") and len(parts) == 1:
        return None if parts[0] == "constant" else {"name": "cosine"}
    raise UsageError(f"unknown --schedule {text!r}; use constant, cosine or step:EVERY[:GAMMA]")


#: The choices of ``--progress`` (``train`` and ``finetune``): a widget in notebooks where one renders, plain text
#: lines, or nothing (:func:`zslib.engine.progress.progress_bar`).
PROGRESS = ("auto", "text", "none")


def _progress_option(parser, default: str, what: str) -> None:
    parser.add_argument("--progress", choices=PROGRESS, default=default,
                        help=f"auto: a widget where one can render, else as $ZS_PROGRESS says; {what}")


def _progress(value: str):
    """The ``progress`` argument of :func:`zslib.engine.runner.run` for a ``--progress`` value."""
    return False if value == "none" else value


#: Fields whose option takes a text that is not the field's value: the parser of that text.
_PARSE = {"schedule": _schedule}


def _field_kind(annotation):
    """``bool``, ``int``, ``float``, ``str``, ``dict`` (KEY=VALUE, repeatable), ``list`` (comma-separated names) or
    ``None`` (a literal) for a Config field's type."""
    args = set(typing.get_args(annotation)) - {type(None)} or {annotation}
    if len(args) == 1:
        (kind,) = args
        kind = typing.get_origin(kind) or kind
        if kind in (bool, int, float, str, dict):
            return kind
        if kind in (list, tuple):
            return list
    return None


def _flag(field) -> str:
    """The option of a Config field: ``--weight-decay``; a dict field's one entry: ``--method-param``."""
    name = field.name[:-1] if field.name.endswith("_params") else field.name
    return "--" + name.replace("_", "-")


def config_options(parser: argparse.ArgumentParser, config_cls=None) -> None:
    """One option per field of ``config_cls`` (default :class:`zslib.engine.config.Config`), its type, choices and
    help read from the field (its ``metadata["help"]``, else its name): a field added to the config is an option
    of ``train`` with no other change. A dict field takes ``KEY=VALUE`` entries (repeatable), a list field
    comma-separated names, a true/false field ``--x`` / ``--no-x``. Every option defaults to ``None``: left out,
    the field keeps the profile's value or its own default."""
    config_cls = config_cls or Config
    hints = typing.get_type_hints(config_cls)
    group = parser.add_argument_group(f"the run's configuration ({config_cls.__module__}.{config_cls.__name__})")
    for field in dataclasses.fields(config_cls):
        kind = _field_kind(hints[field.name])
        text = field.metadata.get("help") or f"{config_cls.__name__}.{field.name}"
        if field.name in PROFILE_FIELDS and "default" not in text:
            text += " (default: the profile's)"
        elif field.default not in (dataclasses.MISSING, None) and "default" not in text:
            text += f" (default {field.default!r})"
        options = {"dest": field.name, "default": None, "help": text.replace("%", "%%")}
        if field.name in _PARSE or kind is None:
            options["metavar"] = "TEXT"
        elif kind is bool:
            options["action"] = argparse.BooleanOptionalAction
        elif kind is dict:
            options.update(action="append", metavar="KEY=VALUE")
        elif kind is list:
            options["metavar"] = "NAME[,NAME...]"
        elif kind in (int, float):
            options["type"] = kind
        if "choices" in field.metadata:
            options["choices"] = list(field.metadata["choices"])
        group.add_argument(_flag(field), **options)


def config_overrides(args, config_cls=None) -> dict:
    """The fields of ``config_cls`` given on the command line (parsed by :func:`config_options`), as values of the
    fields: ``KEY=VALUE`` entries as a dict, comma-separated names as a list, a text through :data:`_PARSE`."""
    config_cls = config_cls or Config
    hints = typing.get_type_hints(config_cls)
    out = {}
    for field in dataclasses.fields(config_cls):
        value = getattr(args, field.name, None)
        if value is None:
            continue
        kind = _field_kind(hints[field.name])
        if field.name in _PARSE:
            value = _PARSE[field.name](value)
        elif kind is dict:
            value = _key_values(value, _flag(field))
        elif kind is list:
            value = [name.strip() for name in value.split(",") if name.strip()]
        elif kind is None:
            value = _value(value)
        out[field.name] = value
    return out


def _parser(config_cls=None) -> argparse.ArgumentParser:
    """The command line: one sub-command per ``_<command>_options`` function below (``train``'s options are the
    fields of ``config_cls``, default :class:`zslib.engine.config.Config`)."""
    p = argparse.ArgumentParser(prog="python -m zslib", description="Train and evaluate zero-shot metric-learning runs.",
                                epilog="Run `python -m zslib COMMAND --help` for the options of a command.")
    p.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _train_options(sub, config_cls)
    _evaluate_options(sub)
    sub.add_parser("methods", help="list the methods with their papers, equations and parameters",
                   description="List every registered method (zslib.engine.registry.METHODS) with its paper, the "
                               "equations it implements, its parameters with their defaults, and its folder.")
    _finetune_options(sub)
    _record_options(sub)
    _verify_options(sub)
    _assignments_options(sub)
    _grade_options(sub)
    return p


def _train_options(sub, config_cls) -> None:
    """``train``: the run's configuration (one option per field of ``config_cls``) and how it runs."""
    t = sub.add_parser("train", help="train one run (or load its stored result) and print its metrics",
                       description="Train a model on the seen classes and evaluate the unseen ones. The options "
                                   "of the run's configuration are the fields of zslib.engine.config.Config; every "
                                   "one left out takes its value from the profile or the field's default.")
    config_options(t, config_cls)
    t.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: $ZS_DEVICE, else CUDA when present)")
    t.add_argument("--results-dir", help="where results go (default: $ZS_RESULTS or results/)")
    t.add_argument("--force", action="store_true", help="train again even if the result exists")
    _progress_option(t, "text", "text: a line every tenth of the run (default)")
    t.add_argument("--json", action="store_true", help="print the result as JSON")
    t.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback of an error")


def _evaluate_options(sub) -> None:
    """``evaluate``: a checkpoint or a result file's run, on a split."""
    e = sub.add_parser("evaluate", help="evaluate a trained model (a checkpoint, or the run of a result file)",
                       description="Evaluate a trained model on the unseen classes (--split test) or the seen ones "
                                   "(--split train): the model of a training checkpoint, or the checkpoint of a "
                                   "result file written by `train`. Prints Recall@K, NMI and the other metrics.")
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="training checkpoint (.pt) written by `train`")
    src.add_argument("--result", help="result file (.json) written by `train`; its checkpoint is evaluated")
    e.add_argument("--split", choices=["test", "train"], default="test",
                   help="test = unseen classes (default), train = seen classes")
    e.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: $ZS_DEVICE, else CUDA when present)")
    e.add_argument("--json", action="store_true", help="print the metrics as JSON")
    e.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback of an error")


def _finetune_options(sub) -> None:
    """``finetune``: the fine-tuning campaign (:mod:`zslib.campaign`)."""
    f = sub.add_parser("finetune", help="fine-tune the whole network for every method and its baseline, compare",
                       formatter_class=_FinetuneHelp, description=_FINETUNE_HELP)
    f.add_argument("--dataset", default="flowers102", choices=_FINETUNE_DATASETS,
                   help="the dataset, with the papers' zero-shot split and backbones (default flowers102)")
    f.add_argument("--smoke", action="store_true",
                   help="every configuration for two steps on tiny images on the CPU (fabricated Flowers-102 "
                        "unless --data-root is given); results go to <results>/smoke-campaign/")
    f.add_argument("--methods", help=f"comma-separated subset of {','.join(_FINETUNE_METHODS)} (default: all "
                   f"{len(_FINETUNE_METHODS)}); one method runs with its same-loss baseline, 'off' and the tuning "
                   "stage. Estimated time of one method on a free Colab T4 (500 images/s, NVIDIA's published V100 "
                   "rate scaled by the T4's memory bandwidth; not measured on a T4): {t4_minutes}")
    f.add_argument("--validation-seeds", help="comma-separated seeds of the validation stage (default: the recipe's)")
    f.add_argument("--test-seeds", help="comma-separated seeds of the test stage (default: the recipe's)")
    f.add_argument("--data-root", help="folder holding the dataset's folder (default: $ZS_DATA or data/)")
    f.add_argument("--device", help="cuda, cuda:1, cpu ... (default: $ZS_DEVICE, else CUDA when present)")
    f.add_argument("--results-dir", help="where runs and the campaign's table go (default: $ZS_RESULTS or results/)")
    f.add_argument("--batch-classes", type=int, metavar="P",
                   help="classes per batch of every run (default: the recipe's, halved where the GPU's memory is too "
                        "small); a different experiment from the recipe's, with other config hashes")
    f.add_argument("--plan", action="store_true",
                   help="print the runs, the seeds, and the estimated time with the throughput it assumes; train "
                        "nothing")
    _progress_option(f, "none", "text: a progress bar per run; none: one line per run (default)")


def _record_options(sub) -> None:
    """``record``: copy finished runs into ``results/recorded/`` and rewrite its manifest."""
    r = sub.add_parser("record", help="copy finished runs of a profile into results/recorded/ (to commit them)",
                       description="Copy the result files of finished runs of one profile from the results folder "
                                   "into its recorded/ sub-folder, which is committed to the repository: the "
                                   "chapters then show these runs in builds that do not train them (e.g. the real "
                                   "profile's runs in a quick build), and the analysis records of those runs "
                                   "(results/analyses/, zslib.analysis.records) into recorded/analyses/. Checkpoints are "
                                   "not copied. Then it rewrites recorded/SHA256SUMS, the SHA-256 of every recorded "
                                   "file (zslib.engine.store.MANIFEST), which the store checks and git diffs show.")
    r.add_argument("--profile", choices=[p for p in sorted(PROFILES) if p != "quick"],
                   help="the profile whose runs are copied (required unless --manifest)")
    r.add_argument("--manifest", action="store_true",
                   help="only rewrite recorded/SHA256SUMS from the files under recorded/ (after adding or changing "
                        "recorded files by other means)")
    r.add_argument("--weights", nargs="+", metavar="RUN.json",
                   help="instead: keep the trained weights of these recorded runs (train each again in a scratch "
                        "folder with its provenance's thread count, require its recorded metrics, save the trained "
                        "parameters in float16 to recorded/weights/; zslib.engine.kept_weights), then rewrite SHA256SUMS")
    r.add_argument("--scratch", help="with --weights: the folder to train in (a run finished there is reused; "
                                     "default: a temporary folder)")
    r.add_argument("--tolerance", type=float,
                   help="with --weights: the largest difference allowed on a recorded retrieval metric (a fraction; "
                        "default 0.01 trained again, 0.005 from the float16 weights), e.g. 0.03 for a run scored on a "
                        "small sample")
    r.add_argument("--results-dir", help="where results are (default: $ZS_RESULTS or results/)")
    r.add_argument("--dry-run", action="store_true", help="only list what would be copied")
    r.add_argument("--replace", action="store_true",
                   help="also rewrite recorded runs of which the folder holds a newer run of the same config (its "
                        "provenance keeps the replaced run's date, commit and metric changes)")


def _verify_options(sub) -> None:
    """``verify``: train recorded runs again and compare every metric."""
    v = sub.add_parser("verify", help="train recorded runs again and fail on a number that does not reproduce",
                       description="Train recorded runs again from their configs (every file's data hashed again, "
                                   "with the thread count of its provenance) in a scratch folder, and compare every "
                                   "metric with the record: to the last bit on the CPU model the run's provenance "
                                   "names, within --tolerance elsewhere (zslib.analysis.reproduce.verify_run). The "
                                   "store's digests catch accidents and edits by hand; this catches a number forged "
                                   "together with its digest. Exit status 1 when a run does not reproduce.")
    v.add_argument("runs", nargs="*", metavar="RUN.json", help="recorded run files (default: every recorded run)")
    v.add_argument("--sample", type=int, metavar="N", help="only N recorded runs drawn at random (see --seed)")
    v.add_argument("--seed", type=int, default=0, help="the seed of --sample's draw (default 0)")
    v.add_argument("--results-dir", help="the folder whose recorded/ runs are verified (default: $ZS_RESULTS or "
                                         "results/)")
    v.add_argument("--scratch", help="the folder to train in (default: a temporary folder)")
    v.add_argument("--tolerance", type=float, default=0.01,
                   help="the largest difference allowed on another machine (a fraction; clustering metrics: from the "
                        "range of five k-means seeds; default 0.01)")
    v.add_argument("--device", default="cpu", help="cpu (default), cuda ...")


def _assignments_options(sub) -> None:
    """``assignments``: the assignment pack."""
    a = sub.add_parser("assignments", help="write the assignment pack (student and instructor notebooks, rubric)",
                       description="Generate the assignment pack from the book's chapters: student notebooks "
                                   "without solutions, instructor notebooks with them, rubric.json and a README "
                                   "for the teacher (see zslib.teaching.assignments).")
    a.add_argument("--out", required=True, help="folder to write the pack into (created if missing)")
    a.add_argument("--chapter", action="append", help="only this chapter (a notebook stem; repeatable)")
    a.add_argument("--book", metavar="DIR", help="folder of the chapters (default: book/ of the checkout zslib runs "
                                                 "from, else the chapters installed with zslib)")
    a.add_argument("--format", choices=["book", "otter", "nbgrader"], default="book",
                   help="book: the pack only (default); otter: also OUT/otter/<chapter>/<chapter>.ipynb, otter-grader "
                        "master notebooks; nbgrader: also OUT/nbgrader/source/<chapter>/<chapter>.ipynb "
                        "(see zslib.teaching.export)")


def _sandbox_options(parser, what, required=False):
    """The options of `grade` and `grade-all`: the rubric, the limits and the isolation of a submission."""
    parser.add_argument("--rubric", help=what, required=required)
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds for a whole notebook, then it is stopped and keeps the points it has (default 1800)")
    parser.add_argument("--memory", type=int, default=8192, help="address-space limit in MB (default 8192)")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--user", default="auto",
                     help="run submissions as this user, one at a time, killing every process of the user after "
                          "each (default when run as root: a uid of its own per submission, see --uids)")
    who.add_argument("--same-user", action="store_true",
                     help="run submissions as the grader's own user (only for trusted code; see the teacher's README)")
    parser.add_argument("--isolation", choices=["auto", "namespaces", "process"], default="auto",
                        help="namespaces: each submission in a jail of Linux namespaces (no network, its own "
                             "processes, nothing writable but its folder; needs root and util-linux); process: "
                             "its own process group and folders only; auto (default): namespaces where they work")
    parser.add_argument("--uids", default=None, metavar="FIRST-LAST",
                        help="as root, run each submission as a uid of this range that no account or process "
                             "uses (default 1990000000-1990000063)")
    parser.add_argument("--instructor", metavar="PATH",
                        help="the instructor notebook (or folder of them) whose run decides the questions that "
                             "depend on the chapter's numbers (default: the pack's instructor/ beside --rubric)")


def _grade_options(sub) -> None:
    """``grade`` (one notebook) and ``grade-all`` (a folder of submissions)."""
    g = sub.add_parser("grade", help="grade one submitted notebook in a separate, limited process",
                       description="Execute the notebook in its own process and folders (zslib.teaching.grading) "
                                   "and score the answers its checks hand over against references and hidden "
                                   "inputs it never sees.")
    g.add_argument("notebook", help="the submitted .ipynb")
    _sandbox_options(g, "the pack's rubric.json (default: the exercises the notebook records)")
    g.add_argument("--json", action="store_true", help="print the score as JSON")
    g.add_argument("--key", action="store_true",
                   help="NOTEBOOK is the instructor's version: grade it against its own run (exit status 1 unless it "
                        "earns every point)")

    ga = sub.add_parser("grade-all", help="grade a folder of submissions into a gradebook CSV and feedback files",
                        description="Grade every notebook in SUBMISSIONS (FOLDER/alice.ipynb or FOLDER/alice/*.ipynb) "
                                    "with the pack's rubric; write OUT/gradebook.csv, OUT/canvas.csv (for Canvas's "
                                    "Gradebook import), OUT/feedback/<student>.md and OUT/grading.json.")
    ga.add_argument("submissions", help="the folder of submitted notebooks")
    _sandbox_options(ga, "the pack's rubric.json", required=True)
    ga.add_argument("--out", required=True, help="folder for gradebook.csv, canvas.csv and feedback/")
    ga.add_argument("-j", "--jobs", type=int, default=1,
                    help="notebooks graded at once (default 1; lowered to the CPUs and to what the memory holds at "
                         "--memory each)")
    ga.add_argument("--roster", metavar="CSV",
                    help="the course's Canvas Gradebook export: canvas.csv then carries each student's Canvas "
                         "identity (matched by login, SIS id, id or name)")


_FINETUNE_DATASETS = ["flowers102", "cub200", "cars196", "sop", "inshop"]
#: Every paper's method in the campaign, in the book's order (read from the registries' catalog, which lists
#: :data:`zslib.engine.registry.PAPERS` without importing them).
_FINETUNE_METHODS = tuple(p["method"] for p in _catalog()["papers"] if p["finetune"])
#: Minutes of the Flowers-102 campaign at the throughputs of zslib.campaign.run.ASSUMED_RATES (2,500 and
#: 500 training images per second, evaluations included); tests/test_campaign.py checks them against estimate_minutes().
#: "t4 cml" is ``--methods cml`` alone on the T4.
_FINETUNE_ESTIMATE = {"gpu": 32, "t4": 158, "t4 cml": 55}


def _finetune_t4_minutes() -> dict[str, int]:
    """Minutes on a free Colab T4 of ``--methods M`` (M, its baseline, "off" and the tuning stage), estimated at the
    T4 rate of zslib.campaign.run.ASSUMED_RATES (computed when ``finetune --help`` is shown)."""
    from zslib.campaign.run import ASSUMED_RATES, estimate_minutes  # lazy: imports torch (see the top)

    t4 = list(ASSUMED_RATES.values())[1]
    return {m: round(estimate_minutes("flowers102", t4, (m,))) for m in _FINETUNE_METHODS}


class _FinetuneHelp(argparse.RawDescriptionHelpFormatter):
    """``finetune``'s help: the per-method T4 estimates are computed only when the help is printed."""

    def _get_help_string(self, action):
        text = super()._get_help_string(action)
        if "{t4_minutes}" in text:
            text = text.replace("{t4_minutes}", ", ".join(f"{m} about {t} min"
                                                          for m, t in _finetune_t4_minutes().items()))
        return text


_FINETUNE_HELP = f"""\
Fine-tune the whole ImageNet-pretrained network end to end (images through the pre-resized image cache) for
every paper's method ({", ".join(_FINETUNE_METHODS)}), the baseline of each method's loss and the untrained floor,
over several seeds, and print the comparison table. BatchNorm keeps its ImageNet statistics unless the tuning stage
chooses batch statistics. Stages:

  1 floor       evaluate the untrained network's pooled feature on the unseen classes (per backbone)
  2 tuning      the fine-tuning recipe on validation classes: the untrained network, the head alone on the frozen
                network ('off'), backbone rates around 1e-5, head first (LP-FT), batch-statistics BatchNorm, each
                evaluated every few dozen steps so that the length is chosen too (Flowers-102)
  3 validation  train each method's candidate settings and 'off' (its same-loss baseline) with that recipe on the
                seen classes minus class-disjoint validation classes; choose by the book's rule (zslib.engine.choice)
  4 test        train the chosen setting, its baseline and the head alone on all seen classes; evaluate every
                unseen image ('off' chosen: the method still runs at its best setting, labelled an ablation)
  5 table       unseen R@1 per method vs its same-loss baseline and vs the untrained floor, paired by seed
                with 95% intervals; written to <results>/campaign/<dataset>.md and .json

Time on a GPU, Flowers-102 with EfficientNet-Lite0: one run alone trains about 2,560 images/s on an NVIDIA H200
with 16 CPU cores (measured; the loader is the limit), so the whole campaign takes about
{_FINETUNE_ESTIMATE['gpu']} min on one recent GPU (estimated at 2,500 images/s, evaluations included) and about
{_FINETUNE_ESTIMATE['t4']} min on a free Colab T4 (estimated at 500 images/s: NVIDIA's published EfficientNet-B0
training rate on a V100 scaled by the T4's memory bandwidth, with the images cropped on the GPU, which CUDA does by
default; the T4 was not measured). One method (--methods cml) fits one Colab session: about
{_FINETUNE_ESTIMATE['t4 cml']} min on a T4. A dataset whose pixels fit neither the GPU nor the VM's memory is fed by
the loader (estimated at 103 images/s on two cores): the papers' large datasets take hours (see --plan). Started
again after a disconnect, the command loads the finished runs and resumes the interrupted one from its checkpoint.
Each result records the GPU, precision, data path, images/s and data wait.
"""


def _seed_list(text, option):
    if text is None:
        return None
    try:
        seeds = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{option} expects comma-separated whole numbers, e.g. 0,1,2; got {text!r}") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise UsageError(f"{option} needs distinct seeds >= 0, got {text!r}")
    return seeds


def _finetune(args) -> int:
    methods = _FINETUNE_METHODS
    if args.methods:
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        unknown = sorted(set(methods) - set(_FINETUNE_METHODS))
        if unknown or not methods:
            raise UsageError(f"--methods: unknown method(s) {unknown}; choose from {','.join(_FINETUNE_METHODS)}")
    vseeds = _seed_list(args.validation_seeds, "--validation-seeds")
    tseeds = _seed_list(args.test_seeds, "--test-seeds")
    if args.batch_classes is not None and args.batch_classes < 2:
        raise UsageError(f"--batch-classes needs at least 2 classes per batch, got {args.batch_classes}")
    for seeds, option in ((vseeds, "--validation-seeds"), (tseeds, "--test-seeds")):
        if seeds is not None and len(seeds) < 2:
            raise UsageError(f"{option} needs at least two seeds: the comparisons are paired by seed")
    _quick_device_check(args.device)
    if args.smoke and args.device and not args.device.startswith("cpu"):
        raise UsageError("--smoke runs on the CPU; leave out --device")
    from zslib.campaign.run import plan_lines, run_campaign  # lazy, after the checks above: imports torch

    if args.plan:
        for line in plan_lines(args.dataset, smoke=args.smoke, methods=methods, validation_seeds=vseeds,
                               test_seeds=tseeds):
            print(line)
        return 0
    data_root = None
    if args.data_root:
        data_root = str(Path(args.data_root).expanduser())
    elif args.smoke:
        if args.dataset != "flowers102":
            raise UsageError("--smoke fabricates only Flowers-102; for another dataset give --data-root with its "
                             "folder in the official layout")
        from zslib.campaign.fabricate import fabricate_flowers  # lazy, as the campaign above
        from zslib.engine.store import results_dir

        data_root = str(fabricate_flowers(results_dir(args.results_dir) / "smoke-campaign" / "data"))
    device = None if args.smoke else _check_device(args.device)
    from zslib.engine.data.root import using_data_root  # after the checks above: they answer before torch loads

    overrides = {} if args.batch_classes is None else {"batch_classes": args.batch_classes}
    with using_data_root(data_root), advising(_finetune_advice(methods)):  # ZS_DATA: only for this campaign
        run_campaign(args.dataset, smoke=args.smoke, methods=methods, results_dir=args.results_dir, device=device,
                     validation_seeds=vseeds, test_seeds=tseeds, progress=_progress(args.progress),
                     out=lambda line: print(line, flush=True), overrides=overrides)
    return 0


def _finetune_advice(methods):
    """What an allocation failure in ``finetune`` tells the reader to change: its own options."""
    def advice(p: int, k: int) -> str:
        one = " or one method at a time (--methods)" if len(methods) > 1 else ""
        return (f"run the same command with --batch-classes {max(2, p // 2)} (P = {p}; a different experiment from the "
                f"recipe's){one}; the finished runs are kept")
    return advice


def _print_metrics(title, metrics):
    print(title)
    for key, value in metrics.items():
        print(f"  {key:>8s}  {value:.4f}")


def _quick_device_check(name):
    """Refuse a CUDA device on a machine with no NVIDIA driver before anything slow is imported."""
    if name is None:
        return
    text = str(name).strip().lower()
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and not index.isdigit()):
        raise UsageError(f"--device {name!r} is not a device; use cpu, cuda or cuda:N")
    if kind == "cuda" and not Path("/dev/nvidiactl").exists() and not Path("/proc/driver/nvidia").exists():
        raise UsageError(f"--device {name!r}: this machine has no NVIDIA GPU driver, so CUDA is not available; "
                         "use --device cpu")


def _check_device(name):
    if name is None:
        return None
    import torch  # lazy: the command line answers a bad argument before torch loads (tests/test_cli.py)

    try:
        dev = torch.device(name)
    except RuntimeError:
        raise UsageError(f"--device {name!r} is not a device; use cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"--device {name!r}: CUDA is not available on this machine; use --device cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return dev


def _train(args, config_cls=None) -> int:
    overrides = config_overrides(args, config_cls)
    profile_name = overrides.pop("profile", None)
    if args.backbone is not None and args.backbone_params is None:
        # the profile's backbone_params (e.g. smallcnn's widths) belong to its backbone
        profile = PROFILES[profile_name] if profile_name else get_profile()
        if args.backbone.replace("-", "_").lower() != str(profile.backbone).lower():
            overrides["backbone_params"] = {}
    try:
        check_train_arguments({**_plain_defaults(config_cls), **overrides, "profile": profile_name})
    except ValueError as err:
        raise UsageError(str(err)) from None
    _quick_device_check(args.device)
    from zslib.experiment import run  # lazy, after the checks above: imports torch

    try:
        config = (config_cls or Config).from_profile(profile_name, **overrides)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
    _check_device(args.device)
    if config.feature_stages:  # the real profile: build (once) or find the feature cache, and say so
        from zslib.engine.data.features import describe  # lazy: imports torch (see the top)
        from zslib.engine.runner import build_data

        print(describe(build_data(config)["train"].info), flush=True)
    if not args.json:  # the run's header, before the lines its training prints
        print(f"run {config.name}  (profile {config.profile}, {config.iterations} iterations, seed {config.seed})",
              flush=True)
    started = time.perf_counter()
    result = run(config, results_dir=args.results_dir, force=args.force, device=args.device,
                 progress=_progress(args.progress))
    wall = time.perf_counter() - started
    if args.json:
        print(json.dumps({"result": str(result.path), "status": result.status, **(
            {"diverged_reason": result.diverged} if result.diverged else {}), "metrics": result.metrics,
            "provenance": result.provenance}, indent=1))
        return 0
    stored = result.provenance.get("wall_seconds")
    if stored is not None and wall < 0.5 * stored:
        print(f"loaded the stored result (it took {stored:.1f} s to compute; --force trains again)")
    else:
        print(f"wall time {wall:.1f} s (training {result.provenance.get('train_seconds', float('nan')):.1f} s)")
    if result.diverged:
        print(f"DIVERGED: {result.diverged}; stored as diverged (lower --lr); its metrics are not a result:")
    for split in ("seen", "val", "unseen"):
        if result.metrics.get(split):
            _print_metrics(f"{split}:", result.metrics[split])
    print(f"result: {result.path}{'  (status: diverged)' if result.diverged else ''}")
    return 0


def _plain_defaults(config_cls=None) -> dict:
    """The fields of ``config_cls`` with a default of their own that is a plain value (``loss``, ``method``, ``seed``
    ...): what the quick check of :func:`zslib.engine.catalog.check_train_arguments` sees where an option is left
    out."""
    return {f.name: f.default for f in dataclasses.fields(config_cls or Config)
            if f.default is not dataclasses.MISSING and isinstance(f.default, (str, int, float))}


def _evaluate(args) -> int:
    from zslib.experiment import evaluate_checkpoint, load_result  # lazy: imports torch (see the top)

    _check_device(args.device)
    config = None
    if args.result:
        result = load_result(args.result)
        checkpoint = result.checkpoint
        if checkpoint is None or not checkpoint.exists():
            raise SystemExit(f"the checkpoint of {args.result} ({checkpoint}) is missing; its stored metrics are:\n"
                             + json.dumps(result.metrics, indent=1))
        config = result.config
    else:
        checkpoint = args.checkpoint
    metrics = evaluate_checkpoint(checkpoint, split=args.split, device=args.device, config=config)
    if args.json:
        print(json.dumps(metrics, indent=1))
    else:
        _print_metrics(f"{args.split} split ({'unseen' if args.split == 'test' else 'seen'} classes), {checkpoint}:",
                       metrics)
    return 0


def _record(args) -> int:
    from zslib.analysis.records import record_analyses  # lazy: these import torch (see the top)
    from zslib.engine.store import load_result, record_runs, write_manifest

    if args.manifest:
        print(f"wrote {write_manifest(args.results_dir)}")
        return 0
    if args.weights:
        return _record_weights(args.weights, args.scratch, args.tolerance)
    if not args.profile:
        raise UsageError("record needs --profile (the profile whose runs are copied), or --manifest")

    copied = record_runs(args.profile, args.results_dir, dry_run=args.dry_run, replace=args.replace)
    verb = "would copy" if args.dry_run else "copied"
    print(f"{verb} {len(copied)} run(s) of the {args.profile} profile to the recorded runs")
    for path in copied:
        print(f"  {path}")
        if args.replace and not args.dry_run:
            changes = load_result(path).provenance.get("replaced", {}).get("metric_changes", {})
            if changes:
                name, gap = max(changes.items(), key=lambda kv: abs(kv[1]) if kv[1] == kv[1] else float("inf"))
                print(f"    replaced a run recorded earlier; largest change: {name} {gap:+.4f}")
    if args.profile == "full":  # the fine-tuning campaign's tables and choices (python -m zslib finetune)
        from zslib.campaign.run import record_campaigns  # lazy: the campaign imports torch

        for path in record_campaigns(args.results_dir, dry_run=args.dry_run):
            print(f"{verb} the campaign file {path}")
    analyses = record_analyses(args.profile, args.results_dir, dry_run=args.dry_run)
    if analyses:
        print(f"{verb} {len(analyses)} analysis record(s) of the {args.profile} profile (zslib.analysis.records)")
        for path in analyses:
            print(f"  {path}")
    if not args.dry_run:
        print(f"wrote {write_manifest(args.results_dir)}")
    return 0


def _record_weights(files, scratch, tolerance) -> int:
    from zslib.engine.kept_weights import record_weights  # lazy: these import torch (see the top)
    from zslib.engine.store import load_result, write_manifest

    paths = [Path(f) for f in files]
    outside = [str(p) for p in paths if p.parent.name != "recorded"]
    if outside:
        raise UsageError(f"--weights keeps the weights of recorded runs (files in a recorded/ folder), not "
                         f"{outside[0]}")
    for path in paths:
        wide = {} if tolerance is None else {"tolerance": tolerance, "retrain_tolerance": tolerance}
        made = record_weights(load_result(path), scratch=scratch, **wide)
        worst, again = (max(made[k].items(), key=lambda kv: abs(kv[1])) for k in ("gaps", "retrain_gaps"))
        print(f"kept {made['path']} ({made['bytes'] / 2**20:.2f} MiB; trained again in {made['train_seconds']} s "
              f"with {made['threads']} thread(s); largest difference from the record: trained again {again[0]} "
              f"{again[1]:+.4f}, float16 weights {worst[0]} {worst[1]:+.4f})")
    for folder in sorted({p.parent.parent for p in paths}):
        print(f"wrote {write_manifest(folder)}")
    return 0


def _verify(args) -> int:
    from zslib.analysis.reproduce import verify_run  # lazy: these import torch (see the top)
    from zslib.engine.store import load_result, recorded_runs

    if args.tolerance < 0 or (args.sample is not None and args.sample < 1):
        raise UsageError("--tolerance must be >= 0 and --sample >= 1")
    missing = [f for f in args.runs if not Path(f).is_file()]
    if missing:
        raise UsageError(f"no such run file: {missing[0]}")
    runs = [load_result(f) for f in args.runs] if args.runs else recorded_runs(args.results_dir)
    if args.sample is not None and args.sample < len(runs):
        runs = sorted(random.Random(args.seed).sample(runs, args.sample), key=lambda r: r.path.name)
    if not runs:
        raise UsageError("no recorded run to verify (results/recorded/ is empty)")
    print(f"verifying {len(runs)} run(s), each trained again from its config", flush=True)
    failed = skipped = 0
    with tempfile.TemporaryDirectory(prefix="zslib-verify-") as tmp:
        for result in runs:
            if str(result.provenance.get("device", "")).startswith("cuda") and not str(args.device).startswith("cuda"):
                print(f"{result.path.name}: skipped, recorded on {result.provenance['device']} (--device cuda on a "
                      "GPU machine verifies it)", flush=True)
                skipped += 1
                continue
            scratch = Path(args.scratch) if args.scratch else Path(tmp) / result.path.stem
            verdict = verify_run(result, scratch, args.tolerance, args.device)
            failed += not verdict["ok"]
            print(verdict["message"], flush=True)
    print(f"{len(runs) - failed - skipped} reproduced, {failed} did not, {skipped} skipped")
    return 1 if failed else 0


def _assignments(args) -> int:
    from zslib.teaching.assignments import build_pack  # lazy: the teaching tools stay out of the command line's start

    out = build_pack(args.out, chapters=args.chapter, book_dir=args.book)
    print(f"assignment pack written to {out} (student/, instructor/, rubric.json, README.md)")
    if args.format != "book":
        from zslib.teaching import export  # lazy: as build_pack above

        written = getattr(export, f"to_{args.format}")(out, out / args.format)
        then = ("otter assign <chapter>.ipynb dist/ in each folder" if args.format == "otter" else
                "copy source/ into your course folder, then nbgrader generate_assignment <chapter>")
        print(f"{len(written)} {args.format} notebook(s) written to {out / args.format} ({then}; see README.md)")
    return 0


def _sandbox(args):
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.memory < 512:
        raise UsageError("--memory must be at least 512 (MB); torch alone needs a few GB of address space")
    from zslib.teaching.uidpool import DEFAULT_UIDS, parse_uids  # lazy: only the grading commands read it

    try:
        uids = parse_uids(args.uids) if args.uids else DEFAULT_UIDS
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.instructor and not Path(args.instructor).exists():
        raise UsageError(f"no such instructor notebook or folder: {args.instructor}")
    return {"timeout": args.timeout, "memory_mb": args.memory, "user": None if args.same_user else args.user,
            "isolation": args.isolation, "uids": uids, "instructor": args.instructor}


def _check_notebook(path) -> None:
    """A submission that is not a Jupyter notebook, or is a link or no regular file, is one line, not a traceback."""
    from zslib.teaching.grading import RefusedSubmission, read_submission  # lazy: as build_pack above

    try:
        nb = json.loads(read_submission(path).decode("utf-8"))
    except RefusedSubmission as err:
        raise UsageError(str(err)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UsageError(f"{path} is not a Jupyter notebook (not valid JSON: {err}); submit the .ipynb file that "
                         "Jupyter saved") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise UsageError(f"{path} is not a Jupyter notebook (it has no 'cells' list); submit the .ipynb file that "
                         "Jupyter saved, or open and save it again in Jupyter")


def _grade(args) -> int:
    if not (Path(args.notebook).exists() or Path(args.notebook).is_symlink()):
        raise UsageError(f"no such notebook: {args.notebook}")
    if args.rubric and not Path(args.rubric).is_file():
        raise UsageError(f"no such rubric: {args.rubric}")
    _check_notebook(Path(args.notebook))
    # lazy: the teaching tools stay out of the command line's start
    from zslib.teaching.grading import RefusedUser, grade_submission, probe_user, resolve_isolation, resolve_user

    options = _sandbox(args)
    try:
        probe_user(resolve_user(options["user"]), options["uids"])
        options["isolation"] = resolve_isolation(options["isolation"], resolve_user(options["user"]), options["uids"])
    except RefusedUser as err:
        raise UsageError(str(err)) from None
    graded = grade_submission(args.notebook, args.rubric, as_key=args.key, **options)
    if args.json:
        print(json.dumps({"notebook": graded.notebook, "status": graded.status, "points": graded.points,
                          "total": graded.total, "errors": graded.errors, "exercises": graded.exercises}, indent=1))
    else:
        print(graded.report())
    if args.key and graded.points != graded.total:
        print(f"the key earns {graded.points:g} of {graded.total:g} points: its solutions or its run need a look",
              file=sys.stderr)
        return 1
    return 0


def _grade_all(args) -> int:
    if not Path(args.submissions).is_dir():
        raise UsageError(f"no such folder of submissions: {args.submissions}")
    if not args.rubric or not Path(args.rubric).is_file():
        raise UsageError(f"--rubric must name the pack's rubric.json (got {args.rubric})")
    from zslib.teaching.grading import RefusedUser, grade_all  # lazy: as build_pack above

    if args.jobs < 1:
        raise UsageError("-j/--jobs must be at least 1")
    if args.roster and not Path(args.roster).is_file():
        raise UsageError(f"no such roster: {args.roster} (export the course's Gradebook from Canvas)")
    try:
        grades = grade_all(args.submissions, args.rubric, args.out, jobs=args.jobs, roster=args.roster,
                           **_sandbox(args))
    except (RefusedUser, FileNotFoundError, ValueError) as err:  # ValueError: a bad rubric entry, a refused key
        raise UsageError(str(err)) from None
    used = json.loads((Path(args.out) / "grading.json").read_text()).get("isolation", "process")
    how = "in the namespace jail" if used == "namespaces" else "isolated by process only"
    print(f"graded {len(grades)} notebook(s) ({how}): "
          f"{Path(args.out) / 'gradebook.csv'}, {Path(args.out) / 'canvas.csv'}, {Path(args.out) / 'feedback'}/")
    return 0


def _methods(args) -> int:
    print(describe_methods())
    return 0


def main(argv=None, config_cls=None) -> int:
    """Run ``python -m zslib`` with ``argv``; ``config_cls``: the configuration class whose fields ``train`` offers
    (default :class:`zslib.engine.config.Config`)."""
    args = _parser(config_cls).parse_args(argv)
    command = {"train": lambda a: _train(a, config_cls), "evaluate": _evaluate, "methods": _methods, "record": _record,
               "assignments": _assignments, "grade": _grade, "grade-all": _grade_all,
               "finetune": _finetune, "verify": _verify}[args.command]
    if args.debug:
        return command(args)
    try:
        return command(args)
    except UsageError as err:
        print(f"python -m zslib {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; a training run resumes from its last checkpoint when started again", file=sys.stderr)
        return 130
    except (ValueError, TypeError, KeyError, OSError, RuntimeError, FloatingPointError) as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"python -m zslib {args.command}: error: {message}\n(run again with --debug for the traceback)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
