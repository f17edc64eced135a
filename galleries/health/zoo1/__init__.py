"""HealthMonitor sealed zoo (issue #35)."""
