"""HealthMonitor's sealed zoo 8 (issue #35): new tasks (attention-based multiple-instance learning on bags of
digits, a mixture density network on an inverse problem), new optimizers and schedules, blind pairs, runs a
repair could save and healthy look-alikes, written blind by a helper who read none of the monitor's rules;
proved with plain torch and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
