"""Metrics, health and logs for the long-running `run` loop. Imports neither kubernetes, boto3 nor git,
so the loop can report on those edges failing."""
