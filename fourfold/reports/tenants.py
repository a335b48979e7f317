"""``--mix`` tenants in a report: each tenant's records also make a group of their own (pure).

A record's ``tenant`` (the alias of the ``--mix`` entry it went out as) puts it in its group
``level:scenario`` as before and also in ``level:scenario#tenant``: the records table keeps that
group's ITL and tokens per second under the key ``(level, scenario#tenant, variant)``
(:func:`tenant_scenario`), and :func:`fourfold.reports.load.group_samples` builds its sample from the
tenant's rows (:func:`tenant_groups`). So `fourfold compare` gives every tenant the rows, statistics
and verdicts of any group; a run without a mix has no such group.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["TENANT_MARK", "is_tenant_group", "tenant_groups", "tenant_scenario"]

TENANT_MARK = "#"


def tenant_scenario(scenario: str, variant: str, tenant: str) -> str:
    """A tenant's own group's scenario: ``steady#a``; an A/B arm's ``session@A`` gives ``session#a@A``,
    so the arm's suffix still ends it."""
    suffix = f"@{variant}" if variant and scenario.endswith(f"@{variant}") else ""
    return f"{scenario[:len(scenario) - len(suffix)]}{TENANT_MARK}{tenant}{suffix}"


def tenant_groups(frame: pd.DataFrame, names: pd.Series) -> list[tuple[str, pd.DataFrame]]:
    """Each tenant's rows of each group (``names``: the rows' ``level:scenario``), named
    ``level:scenario#tenant``, sorted; none in a run without a mix."""
    tenants = frame["tenant"].astype(str).to_numpy(dtype=object)
    if not (mixed := tenants != "").any():
        return []
    full = pd.Series(names.to_numpy(dtype=object)[mixed] + TENANT_MARK + tenants[mixed], dtype=object)
    sub = frame[mixed].reset_index(drop=True)
    return [(str(name), rows) for name, rows in sub.groupby(full, sort=True)]


def is_tenant_group(name: str) -> bool:
    """Whether a group name is a tenant's own (``l2:steady#a``)."""
    return TENANT_MARK in name
