"""Writes ``lr_find_before_policy.ckpt`` as commit 1c012ec saved it (issue #23), from a tree of that commit:
``git archive 1c012ec | tar -x -C /tmp/old && cd /tmp/old && PYTHONPATH=$PWD python THIS_FILE OUT.ckpt``.
"""

from __future__ import annotations

import sys

import torch

from lightning_recipes.testing import fast_trainer, random_classification_loader
from tests.tune.test_lr_find_recipe import FindNet, _recipe

if __name__ == "__main__":
    torch.manual_seed(0)
    model = FindNet(_recipe())
    trainer = fast_trainer(max_steps=3, max_epochs=None, default_root_dir="/tmp/old-lr-find-run")
    trainer.fit(model, random_classification_loader(num_samples=128))
    trainer.save_checkpoint(sys.argv[1])
    print("found_lr", model.found_lr, model._found_lr_choice)
