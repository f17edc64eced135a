"""HealthMonitor's sealed zoo 11 (issue #35): new tasks, blind pairs, runs a repair could save and healthy
look-alikes, written blind by a helper who read none of the monitor's rules, each run different in task or bug
from the zoos before it; proved with plain torch and Lightning (``test_proofs.py``), to be scored once
(``score.py``)."""
