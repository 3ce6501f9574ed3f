"""A sandbox for LM-written Python: a host-side AST policy for readable errors, and a separate,
locked-down process per snippet as the boundary (:mod:`.runner`, :mod:`.child`, :mod:`.policy`)."""

from lookplangraph.sandbox.policy import PolicyError, check_code, enforce_policy
from lookplangraph.sandbox.runner import (Sandbox, SandboxLimits, SandboxResult,
                                          SandboxUnavailable)

__all__ = ["Sandbox", "SandboxLimits", "SandboxResult", "SandboxUnavailable", "PolicyError",
           "check_code", "enforce_policy"]
