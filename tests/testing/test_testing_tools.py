"""The test tools: the tiny models (their initial loss, causality, learning, argument checks) and the
in-memory logger on a real Trainer."""

import math

import pytest
import torch

from lightning_recipes.testing import (
    InMemoryLogger,
    TinyClassifier,
    TinyTransformerLM,
    fast_trainer,
    random_classification_loader,
    random_token_loader,
)


@pytest.mark.parametrize("num_classes", [2, 10, 37])
def test_tiny_classifier_initial_loss_is_exactly_ln_c(num_classes):
    model = TinyClassifier(in_features=5, num_classes=num_classes)
    x, y = torch.randn(64, 5), torch.randint(0, num_classes, (64,))
    assert model.loss(model(x), y).item() == pytest.approx(math.log(num_classes), rel=1e-6)


def test_tiny_transformer_is_causal():
    model = TinyTransformerLM(vocab_size=16, d_model=32, n_heads=2, n_layers=2)
    nn_init = torch.Generator().manual_seed(1)
    model.head.weight.data.normal_(generator=nn_init)  # make outputs depend on inputs
    tokens = torch.randint(0, 16, (1, 10))
    changed = tokens.clone()
    changed[0, 7] = (changed[0, 7] + 1) % 16
    out, out_changed = model(tokens), model(changed)
    torch.testing.assert_close(out[:, :7], out_changed[:, :7])
    assert not torch.allclose(out[:, 7:], out_changed[:, 7:])


def test_in_memory_logger_records_real_trainer_steps():
    logger = InMemoryLogger()
    trainer = fast_trainer(max_steps=6, logger=logger, log_every_n_steps=2)
    trainer.fit(TinyClassifier(), random_classification_loader())
    assert [step for step, _ in logger.history("train_loss")] == [1, 3, 5]
    assert logger.hyperparams["num_classes"] == 4
    with pytest.raises(KeyError, match="'nope' was never logged"):
        logger.last("nope")


def test_models_learn_their_synthetic_data():
    logger = InMemoryLogger()
    trainer = fast_trainer(max_epochs=15, logger=logger, log_every_n_steps=1)
    trainer.fit(TinyClassifier(lr=0.5), random_classification_loader())
    losses = logger.values("train_loss")
    assert losses[0] == pytest.approx(math.log(4), rel=1e-5)
    assert losses[-1] < 0.5 * losses[0]

    lm_logger = InMemoryLogger()
    trainer = fast_trainer(max_steps=60, max_epochs=-1, logger=lm_logger, log_every_n_steps=1)
    trainer.fit(TinyTransformerLM(vocab_size=16, d_model=32, n_heads=2), random_token_loader(vocab_size=16))
    lm_losses = lm_logger.values("train_loss")
    assert lm_losses[0] == pytest.approx(math.log(16), rel=1e-5)
    assert lm_losses[-1] < 0.3 * lm_losses[0]


@pytest.mark.parametrize(
    ("factory", "kwargs"),
    [
        ("TinyClassifier", {"num_classes": 0}),
        ("TinyClassifier", {"hidden": 8.0}),
        ("TinyClassifier", {"lr": -0.1}),
        ("TinyTransformerLM", {"n_layers": 0}),
        ("TinyTransformerLM", {"vocab_size": True}),
        ("TransformerBlock", {"d_model": 8, "n_heads": 2, "dropout": 1.0}),
        ("DigitsCNN", {"width": 0}),
        ("DigitsCNN", {"weight_decay": -1.0}),
    ],
)
def test_models_reject_bad_arguments_at_construction(factory: str, kwargs: dict) -> None:
    """The error names the argument (the last one given) and its value."""
    import lightning_recipes.testing as testing

    name, value = list(kwargs.items())[-1]
    with pytest.raises(ValueError, match=f"`{name}` must be .*, got {value}"):
        getattr(testing, factory)(**kwargs)
