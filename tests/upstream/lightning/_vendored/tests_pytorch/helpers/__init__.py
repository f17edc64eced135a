# Vendored verbatim (conformance test helper, not product code) from
#   https://github.com/Lightning-AI/pytorch-lightning  path: tests/tests_pytorch/helpers/__init__.py
#   tag 2.6.0, commit 854037098554a5fbf6ab7c66ae9617987e82911f. Licensed under the Apache License, Version 2.0 (notice below).
# Unmodified: only this header was added. Why and how it is used: tests/upstream/lightning/README.md.
from lightning.pytorch.demos.boring_classes import (  # noqa: F401
    BoringDataModule,
    BoringModel,
    ManualOptimBoringModel,
    RandomDataset,
)
from tests_pytorch.helpers.datasets import TrialMNIST  # noqa: F401
