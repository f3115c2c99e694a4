"""The deterministic simulation of the exactly-once core (docs/design/simulation.md)."""
