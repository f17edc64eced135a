"""HealthMonitor sealed zoo 2 (issue #35): blind pairs and healthy look-alikes."""
