"""The preflight's checks, in the order they run, each with the first paragraph of its docstring.

Generated from ``lightning_recipes.checks.preflight.CHECKS``; ``tests/test_cli_help.py`` fails when it
differs and prints the text to paste here. ``lightning-recipes preflight --help`` lists the checks from it
without importing torch.
"""

__all__ = ["CHECK_SUMMARIES"]

CHECK_SUMMARIES: tuple[tuple[str, str], ...] = (
    (
        "loader",
        "The training (and validation) loader yields batches, and serves every class at least about as "
        "often as the dataset holds it.",
    ),
    (
        "data",
        "Look at the first num_batches training batches (and validation batches) before training does.",
    ),
    (
        "split_overlap",
        "Look for validation samples that are also in the training data: a validation set drawn from the "
        "training set, augmented copies of training samples, a split done after duplication.",
    ),
    (
        "loss",
        "Check the loss itself on one or two batches, without training: what every correct loss satisfies.",
    ),
    (
        "init_loss",
        "Compare the loss at initialisation with what an untrained model should score: ln C for C "
        "classes, ln 2 per output for binary cross-entropy, the label prior's entropy for a prior-"
        "initialised bias.",
    ),
    (
        "schedule",
        "Step copies of the configured LR schedulers over the planned run, as Lightning would, and check "
        "the LR curve of every optimizer param group.",
    ),
    (
        "grad_flow",
        "After a backward pass, every trainable parameter must have a finite, non-zero gradient.",
    ),
    (
        "batch_independence",
        "Verify that output i depends on input i only (no reshape, reduction or attention mixes the "
        "batch) and not on the slot it sits in (permuting the batch permutes the outputs).",
    ),
    (
        "padding",
        "Verify that extra padding, marked as padding, changes neither the loss nor the outputs at real "
        "positions.",
    ),
    (
        "eval_mode",
        "In eval(), the same input must give the same output, and a forward pass must change no state.",
    ),
    (
        "causality",
        "Verify that an autoregressive model's output at position t does not depend on inputs after t.",
    ),
    (
        "target_leakage",
        "Verify that the target is not recoverable from the inputs without learning (target leakage).",
    ),
    (
        "optimization",
        "Fit a copy with a real Trainer on one batch and check each optimizer.step() against the backward"
        " passes before it, under automatic and manual optimisation.",
    ),
    (
        "validation_path",
        "After a trial fit has fitted one batch through training_step, validation_step on the same batch "
        "(in eval mode, in Lightning's own validation loop) must see the fit too.",
    ),
    (
        "overfit_batch",
        "Train a copy of the model on one fixed small batch and require the loss to fall to a target.",
    ),
    (
        "input_independence",
        "Train on real inputs and on zeroed inputs; the real-input model must score better on held-out data.",
    ),
)
