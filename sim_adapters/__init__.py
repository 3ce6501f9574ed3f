"""Environments the planner acts in, all behind the protocol of :mod:`sim_adapters.base`."""
