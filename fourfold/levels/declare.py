"""One declaration per option: a settings field says its flag, help, group, argparse shape and rule.

    read_timeout_s: float = option(60.0, "--read-timeout", "timing", rule=POSITIVE,
                                   help="Seconds without content ... before a stream counts as timed out")

From the fields of a frozen settings dataclass declared this way come Locust's command-line options
(:func:`add_options`: the command line, ``LOCUST_*`` variables, ``locust.conf`` and, unless
``web_ui=False``, the web UI's start form, which Locust builds from the parser), the settings read
from Locust's parsed options (:func:`read_options`), and the range checks that name the flag
(:func:`check_rules`). A field without a declaration is no option (it is set by code). Pure: no
Locust import; ``parser`` is whatever Locust hands ``init_command_line_parser`` listeners.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from fourfold.errors import OptionError

__all__ = ["AT_LEAST_0", "AT_LEAST_1", "GROUPS", "POSITIVE", "SHARE", "Opt", "add_options", "check_number",
           "check_rules", "declared", "option", "read_options", "within"]

POSITIVE, AT_LEAST_0, AT_LEAST_1, SHARE = "> 0", ">= 0", ">= 1", "within [0, 1]"
_RULES: dict[str, Callable[[float], bool]] = {
    POSITIVE: lambda v: v > 0, AT_LEAST_0: lambda v: v >= 0, AT_LEAST_1: lambda v: v >= 1,
    SHARE: lambda v: 0 <= v <= 1,
}


def within(low: float, high: float) -> str:
    """A range rule, ``within [low, high]``: for numbers whose extremes would make a loop spin or a
    timer overflow (a sub-microsecond gap, a sleep of 1e300 s), so that they are one line at start-up
    instead of a hang during the run."""
    name = f"within [{low:g}, {high:g}]"
    _RULES.setdefault(name, lambda v: low <= v <= high)
    return name


# the settings groups, by concern, in the order `--help` shows them
GROUPS: dict[str, str] = {
    "target": "fourfold: the target (wire format, model, credentials, transport)",
    "workload": "fourfold: what is sent (dataset, synthetic prompts, sampling, lengths)",
    "timing": "fourfold: timing (warm-up, stalls, time-outs)",
    "run": "fourfold: the run directory",
    "telemetry": "fourfold: server telemetry",
    "cost": "fourfold: prices (cost per token)",
    "mirror": "fourfold: mirrored requests (gray release)",
    "simulator": "fourfold: the embedded simulator (no --host)",
    "rag": "fourfold L3: the RAG endpoint and the embedded RAG service",
    "gate": "fourfold: SLO gate",
    "scoring": "fourfold: live quality scoring",
    "gateway": "fourfold L2: ladder, closed and open loop, sweep",
    "session": "fourfold L4: session flow and sticky A/B",
    "embed": "fourfold: embeddings and rerank (locustfiles/embeddings.py)",
}
_UNSET: Any = object()


@dataclasses.dataclass(frozen=True)
class Opt:
    """How one settings field is an option. ``raw_default`` is the parser's default when it differs
    from the field's (``--no-stream`` False for ``stream`` True); ``read`` turns the parsed value into
    the field's (``parse_headers``, ``operator.not_``); ``rule`` is a range every number keeps."""

    flag: str
    group: str
    help: str
    type: Callable[[str], Any] | None = None
    action: str | None = None
    choices: Sequence[str] | None = None
    dest: str | None = None
    raw_default: Any = _UNSET
    read: Callable[[Any], Any] | None = None
    rule: str | None = None
    env_var: str | None = None
    secret: bool = False
    web_ui: bool = True

    @property
    def parsed_name(self) -> str:
        """The attribute of Locust's parsed options that holds the value."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")


def option(default: Any, flag: str, group: str, *, help: str, **how: Any) -> Any:
    """A dataclass field with its option declaration (see the module docstring)."""
    if group not in GROUPS:
        raise ValueError(f"{flag}: unknown settings group {group!r}; one of {', '.join(GROUPS)}")
    if how.get("rule") is not None and how["rule"] not in _RULES:
        raise ValueError(f"{flag}: unknown rule {how['rule']!r}")
    declaration = Opt(flag, group, help, **how)
    if isinstance(default, (list, dict, set)):
        raise TypeError(f"{flag}: a settings default must be immutable (a tuple), got {default!r}")
    return dataclasses.field(default=default, repr=not declaration.secret, metadata={"option": declaration})


def declared(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Opt]]:
    """(field, declaration) of every field of ``cls`` that is an option, in declaration order."""
    for item in dataclasses.fields(cls):
        declaration = item.metadata.get("option")
        if declaration is not None:
            yield item, declaration


def add_options(parser: Any, cls: type, *, groups: Collection[str] | None = None,
                web_ui: bool = True) -> None:
    """Add the options of ``cls`` (those of ``groups`` only, when given) to ``parser``;
    ``web_ui=False`` keeps them all out of the start form (a level shows its own later)."""
    for item, opt in declared(cls):
        if groups is not None and opt.group not in groups:
            continue
        kwargs: dict[str, Any] = {"help": opt.help,
                                  "default": item.default if opt.raw_default is _UNSET else opt.raw_default}
        for name in ("type", "action", "choices", "dest", "env_var"):
            if getattr(opt, name) is not None:
                kwargs[name] = getattr(opt, name)
        if isinstance(kwargs["default"], tuple):     # argparse appends to a list default
            kwargs["default"] = list(kwargs["default"])
        if opt.secret:
            kwargs["is_secret"] = True
        if not (opt.web_ui and web_ui):
            kwargs["include_in_web_ui"] = False
        parser.add_argument(opt.flag, **kwargs)


def read_options(cls: type, options: Any) -> dict[str, Any]:
    """The fields of ``cls`` from Locust's parsed ``options`` (None, or a missing attribute: the
    parser's default), each through its declaration's ``read``; keyword arguments for ``cls``."""
    values: dict[str, Any] = {}
    for item, opt in declared(cls):
        raw_default = item.default if opt.raw_default is _UNSET else opt.raw_default
        raw = getattr(options, opt.parsed_name, None) if options is not None else None
        raw = raw_default if raw is None else raw
        values[item.name] = opt.read(raw) if opt.read is not None else raw
    return values


def check_number(flag: str, value: Any, rule: str) -> None:
    """:class:`OptionError` (a ValueError) unless ``value`` is a finite number that keeps ``rule``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not (ok and _RULES[rule](value)):
        raise OptionError(f"{flag} must be a number {rule}, got {value!r}")


def check_rules(settings: Any) -> None:
    """Every declared number of ``settings`` within its rule; OptionError naming the flag."""
    for item, opt in declared(type(settings)):
        value = getattr(settings, item.name)
        if opt.rule is not None and value is not None:
            check_number(opt.flag, value, opt.rule)
