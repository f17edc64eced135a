"""HealthMonitor's sealed zoo 23 (issue #35): board evaluation, chord recognition, continuous-time dynamics,
two-view sensor fusion and maze runs, blind pairs, runs a repair could save and healthy look-alikes, written
blind by a helper who read none of the monitor's rules; proved with plain torch and Lightning
(``test_proofs.py``), to be scored once (``score.py``)."""
