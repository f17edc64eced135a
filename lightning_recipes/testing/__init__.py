"""Tools for testing Lightning code fast on a CPU: tiny models, an in-memory logger, quick Trainers, syncs.

Public on purpose: our own test suite uses them, and so can anyone testing their own callbacks.

Example:
    >>> from lightning_recipes.testing import InMemoryLogger, TinyClassifier, fast_trainer
    >>> from lightning_recipes.testing import random_classification_loader
    >>> logger = InMemoryLogger()
    >>> trainer = fast_trainer(max_steps=3, logger=logger, log_every_n_steps=1)
    >>> trainer.fit(TinyClassifier(), random_classification_loader())
    >>> [step for step, _ in logger.history("train_loss")]
    [0, 1, 2]
"""

from lightning_recipes._collectives import destroy_process_group_at_exit
from lightning_recipes.testing.digits_cnn import DigitsCNN
from lightning_recipes.testing.logger import InMemoryLogger
from lightning_recipes.testing.models import (
    TinyClassifier,
    TinyTransformerLM,
    TransformerBlock,
    random_classification_loader,
    random_token_loader,
)
from lightning_recipes.testing.sync import HostSyncCounter
from lightning_recipes.testing.trainers import fast_trainer

__all__ = [
    "DigitsCNN",
    "HostSyncCounter",
    "InMemoryLogger",
    "TinyClassifier",
    "TinyTransformerLM",
    "TransformerBlock",
    "fast_trainer",
    "random_classification_loader",
    "random_token_loader",
]

destroy_process_group_at_exit()  # our own test workers (ddp_spawn) leave with no live gloo group
