"""HealthMonitor's sealed zoo 12 (issue #35): new tasks on images and audio-like signals (a 1-D CNN tone
classifier, a small U-Net denoiser, a deep residual 1-D CNN), blind pairs, runs a repair could save and
healthy look-alikes, written blind by a helper who read none of the monitor's rules; proved with plain torch
and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
