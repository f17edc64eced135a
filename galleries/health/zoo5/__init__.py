"""HealthMonitor's sealed zoo 5 (issues #35/#36): new tasks, blind pairs, runs a repair could save and healthy
look-alikes, written blind by a helper who read none of the monitor's rules, each run different in task or bug
from the zoos before it; proved with plain torch and Lightning (``test_proofs.py``), scored once
(``score.py``), and used to mend the monitor since, so no longer blind."""
