"""HealthMonitor's sealed zoo 6 (issue #35): new tasks (a GRU sequence-to-sequence model, a temporal
convolutional forecaster, a RealNVP normalising flow), new optimizers and bugs, blind pairs, runs a repair
could save and healthy look-alikes, written blind by a helper who read none of the monitor's rules; proved
with plain torch and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
