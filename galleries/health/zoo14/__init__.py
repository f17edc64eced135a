"""HealthMonitor's sealed zoo 14 (issue #35): wine, iris and linnerud tables, a GRU forecaster of sine
mixtures, a convolutional denoiser of digits and a character-level LSTM language model, with blind pairs, runs
a repair could save and healthy look-alikes, written blind by a helper who read none of the monitor's rules;
proved with plain torch and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
