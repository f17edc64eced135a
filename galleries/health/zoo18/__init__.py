"""HealthMonitor's sealed zoo 18 (issue #35): heteroscedastic regression, link prediction, multiple-instance
learning, a character GRU and a patch transformer; blind pairs, runs a repair could save and healthy
look-alikes, written blind by a helper who read none of the monitor's rules; proved with plain torch and
Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
