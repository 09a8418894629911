"""Mitogen's linear strategy on this repository's plugin path (ansible.cfg strategy_plugins).

Mitogen is a pinned package of .venv (pyproject.toml); its own plugin directory lies inside
site-packages, which Ansible does not search. Chosen with ANSIBLE_STRATEGY=mitogen_linear: the
virtual cluster's runs use it (one Python interpreter kept per host instead of one per task,
measured 4.6x faster on TCG VMs); other runs keep Ansible's linear strategy.
"""

from __future__ import annotations

import ansible_mitogen.loaders
import ansible_mitogen.strategy

_Linear = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Linear):
    """Ansible's linear strategy, run over Mitogen connections."""
