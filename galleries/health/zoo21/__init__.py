"""HealthMonitor's sealed zoo 21 (issue #35): span question answering, fitted Q-learning, next-basket,
colourisation, selective-classification and bracket-recognition runs, blind pairs, runs a repair could save
and healthy look-alikes, written blind by a helper who read none of the monitor's rules; proved with plain
torch and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
