"""The operator console of human-in-the-loop trials (:mod:`lookplangraph.apps.console.app`)."""
