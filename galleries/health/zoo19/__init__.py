"""HealthMonitor's sealed zoo 19 (issue #35): digit-pair arithmetic, a mixture density network, graph
regression with message passing, a physics-informed ODE fit and multi-unit tabular runs, blind pairs, runs a
repair could save and healthy look-alikes, written blind by a helper who read none of the monitor's rules;
proved with plain torch and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
