"""HealthMonitor's first sealed zoo (issue #35): 13 users' training problems and 8 healthy runs that look
unusual, written blind by a helper who read none of the monitor's rules, proved with plain torch and Lightning
(``test_proofs.py``), scored once (``score.py``); it has been used since to fix four attributions, so it is no
longer blind."""
