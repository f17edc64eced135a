"""HealthMonitor's sealed zoo 10 (issue #35): new tasks (a contrastive InfoNCE encoder, a neural-ODE-like
Euler stepper learning a pendulum's flow map, an MLP-Mixer on digit patches), blind pairs, runs a repair could
save and healthy look-alikes, written blind by a helper who read none of the monitor's rules; proved with
plain torch and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
