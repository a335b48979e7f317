"""Errors that carry their exit code and print themselves (the click pattern).

    FourfoldError (1)
      ├── UsageError (2)       wrong arguments or input the user can fix
      └── GateFailed (3)       an SLO or quality floor was missed
"""

from __future__ import annotations

import sys
from typing import ClassVar


class FourfoldError(Exception):
    exit_code: ClassVar[int] = 1

    def show(self) -> None:
        print(f"fourfold: error: {self}", file=sys.stderr)


class UsageError(FourfoldError):
    exit_code = 2


class GateFailed(FourfoldError):
    exit_code = 3
