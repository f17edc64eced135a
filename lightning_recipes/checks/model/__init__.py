"""Model stage: the forward pass (every parameter gets a gradient, samples stay independent, causality,
padding, train/eval modes)."""
