"""HealthMonitor's sealed zoo 2 (issue #35): blind pairs (one visible symptom, different causes) and healthy
look-alikes, written blind by a helper who read none of the monitor's rules, each run different in task or
bug from zoo 1; proved with plain torch and Lightning (``test_proofs.py``), scored once (``score.py``), and
used to mend the monitor since, so no longer blind."""
