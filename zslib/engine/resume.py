"""The store's reuse and resume policy: where a run's result and checkpoint live, and whether a call reuses the
stored result, resumes a checkpoint or starts from step 0.

:func:`locate` decides once per call of :func:`zslib.engine.runner.run`:

* a result stored under the config's hash (in the results folder, else among the recorded runs) is **reused**,
  unless ``force``, or unless it was made from other data than the data on disk now (its provenance's data
  identity, :mod:`zslib.engine.data.identity`): then the run is trained again;
* a run trained again is written into the results folder, never over a recorded run;
* its checkpoint (``<results>/checkpoints/<result stem>.pt``) is **resumed** when it belongs to this config, this
  code and this data; :func:`prepare_checkpoint` deletes it (with one warning) otherwise, and refuses another
  run's checkpoint under this run's name.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from zslib.engine.config import Config, config_hash
from zslib.engine.store import (Result, ResultFileError, code_fingerprint, file_slug, hash_in_name, load_result,
                                result_path, stale_code_warning)

__all__ = ["Slot", "locate", "reuse", "prepare_checkpoint", "checkpoint_config"]


@dataclass(frozen=True)
class Slot:
    """Where one run's result and checkpoint are: ``path`` (its result file), ``checkpoint``, ``directory`` (the
    results folder it writes into), ``stored`` (a stored result is to be reused) and ``force`` (a checkpoint found
    is not resumed)."""

    path: Path
    checkpoint: Path
    directory: Path
    stored: bool
    force: bool


def locate(config: Config, directory: Path, force: bool, identity: str | None) -> Slot:
    """The :class:`Slot` of ``config`` in the results folder ``directory`` (see the module docstring); ``identity``
    is the identity of the data the run reads now."""
    path = result_path(config, directory)
    stored = path.exists() and not force
    if stored and _made_from_other_data(path, identity):  # trained again, into this folder, from step 0
        stored, force = False, True
    if not stored and path.parent != directory:  # a run trained again never writes over a recorded run
        path = directory / f"{file_slug(config.name)}-{config_hash(config)}.json"
    return Slot(path, directory / "checkpoints" / f"{path.stem}.pt", directory, stored, force)


def reuse(slot: Slot) -> Result:
    """The stored result of ``slot``, with a warning when zslib's code changed since it was made (recorded runs
    are checked by tests/test_recorded.py instead)."""
    result = load_result(slot.path)
    stale = stale_code_warning([result]) if slot.path.parent == slot.directory else None
    if stale:
        warnings.warn(stale, stacklevel=4)
    return result


def prepare_checkpoint(slot: Slot, config: Config, identity: str | None) -> None:
    """Before training: delete the checkpoint of a forced run; refuse another run's checkpoint under this run's
    name; delete (with one warning) a checkpoint written by other zslib code, whose half-trained state would
    otherwise be finished by this code and stored under this code's fingerprint, or trained on other data than
    ``identity``. A checkpoint that passes is resumed by the trainer."""
    from zslib.engine.data.identity import identity_mismatch
    from zslib.engine.train import load_checkpoint

    ckpt = slot.checkpoint
    if not ckpt.exists():
        return
    if slot.force:
        ckpt.unlink()
        return
    state = load_checkpoint(ckpt, map_location="cpu")
    checkpoint_config(ckpt, state, config)
    other = identity_mismatch(f"the checkpoint {ckpt}", (state.get("meta") or {}).get("data_identity"), identity)
    if other:
        ckpt.unlink()
        warnings.warn(f"{other}: not resumed, the run starts over from step 0", stacklevel=4)
        return
    written_by = (state.get("meta") or {}).get("code_fingerprint")
    if written_by != code_fingerprint():
        ckpt.unlink()
        warnings.warn(f"the checkpoint {ckpt} was written by other zslib code (code fingerprint {written_by}, this "
                      f"code {code_fingerprint()}): not resumed, the run starts over from step 0", stacklevel=4)


def checkpoint_config(path, state: dict, config: Config | None = None) -> Config:
    """The config a training checkpoint (``state``, read from ``path``) was written for, checked as the result
    store checks its files: its config must hash to the hash in the checkpoint's name and, when ``config`` is
    given, be that config (same :func:`~zslib.engine.config.config_hash`); else :class:`ResultFileError` in one
    line saying which run the checkpoint belongs to."""
    meta = state.get("meta") or {}
    if "config" not in meta:
        if config is None:
            raise ValueError(f"{path} does not record its config (it was not written by zslib.engine.runner.run); "
                             "pass config=")
        raise ResultFileError(f"{path} does not record its config, so it cannot be checked to belong to run "
                              f"{config.name} ({config_hash(config)}); train the run again (--force)")
    try:
        own = Config.from_dict(meta["config"])
    except (TypeError, ValueError) as e:
        raise ResultFileError(f"{path}: its config is not valid for this zslib ({e}); train the run again") from None
    h = config_hash(own)
    named = hash_in_name(Path(path).with_suffix(".json"))
    if named is not None and named != h:
        raise ResultFileError(f"{path}: the checkpoint holds run {own.name} ({h}), not the run its name says "
                              f"({named}); delete it (the run is trained again)")
    if config is not None and config_hash(config) != h:
        raise ResultFileError(f"{path} is the checkpoint of run {own.name} ({h}), not of {config.name} "
                              f"({config_hash(config)}); delete it, or train the run again (--force)")
    return own


def _made_from_other_data(path: Path, data: str | None) -> bool:
    """Whether the stored result at ``path`` was made from other data than ``data`` (then one warning says so and
    the run is trained again). A result recorded before data identities were kept, or a run whose data is not on
    disk here, is reused as it is."""
    from zslib.engine.data.identity import identity_mismatch

    other = identity_mismatch(f"the stored result {path}", load_result(path).provenance.get("data_identity"), data)
    if other:
        warnings.warn(f"{other}: not reused, the run is trained again", stacklevel=5)
    return other is not None
