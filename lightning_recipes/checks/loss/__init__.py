"""Loss stage: the loss and what learning it needs (its value at init, fitting a batch, using the inputs)."""
