"""The fine-tuning campaign: every method and its baseline, the whole network trained end to end on one GPU.

* :mod:`zslib.campaign.plan` -- what runs: each dataset's recipe (the papers' splits and backbones) and each
  method's base loss and candidate settings;
* :mod:`zslib.campaign.run` -- :func:`run_campaign`, the stages (floor, validation, test, table) behind
  ``python -m zslib finetune``;
* :mod:`zslib.campaign.records` -- :func:`finetuned_runs`, :func:`regime`: how chapters find fine-tuned runs.
"""
from __future__ import annotations

from zslib.campaign.records import REGIMES, finetuned_runs, hardware, regime, regime_label

__all__ = ["REGIMES", "finetuned_runs", "hardware", "regime", "regime_label"]
