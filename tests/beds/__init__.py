"""Test beds: environments that misbehave on purpose, for testing the suite under faults."""
