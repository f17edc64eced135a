"""HealthMonitor's sealed zoo 27: protein secondary-structure, tracking data-association, reaction-yield,
grasp-success and heat-equation runs, blind pairs, runs a repair could save and healthy look-alikes, written
blind by a helper who read none of the monitor's rules; proved with plain torch and Lightning
(``test_proofs.py``), to be scored once (``score.py``)."""
