"""HealthMonitor sealed zoo 4 (issues #35/#36): new tasks, blind pairs, repairable runs, look-alikes."""
