"""Model stage: the forward pass (gradients, independent samples, causality, padding, train/eval modes)."""
