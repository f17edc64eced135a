"""HealthMonitor's sealed zoo 26: stereo-disparity, source-separation, bracket-language, tomography and
variable-star runs, blind pairs, runs a repair could save and healthy look-alikes, written blind by a helper
who read none of the monitor's rules; proved with plain torch and Lightning (``test_proofs.py``), to be scored
once (``score.py``)."""
