"""How a converter's validation is put together from data (docs/tftrt-behaviour.md#op-rules).

Structured converters (TF-TRT's `OpConverterBase`, `convert/ops/*.cc`) check the dtype attribute,
then the input roles (messages end in `, at <node>`), then their own `Validate()`. Legacy
function converters (`convert_nodes.cc`) mostly check roles first, then dtypes (printed in enum
order). A rule is a function `Ctx -> None` that raises `Reject`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.conversion.operands import Ctx, check_dtype_attr, check_roles

Check = Callable[[Ctx], None]
Roles = tuple[tuple[str, str], ...]

FLOAT_HALF = ("float", "half")
FLOAT_HALF_INT32 = ("float", "half", "int32")


@dataclass(frozen=True)
class Rule:
    """One converter's validation: dtype list, input roles and the op's own checks."""

    dtypes: tuple[str, ...] | None = FLOAT_HALF  # None: the converter checks no dtype attr
    roles: Roles | None = None  # None: roles are checked by `check` (variadic inputs)
    check: Check | None = None
    structured: bool = True
    dtype_attr: str = "T"

    def __call__(self, ctx: Ctx) -> None:
        if self.structured:
            self._dtypes(ctx)
            self._roles(ctx)
        else:
            self._roles(ctx)
            self._dtypes(ctx)
        if self.check is not None:
            self.check(ctx)

    def _dtypes(self, ctx: Ctx) -> None:
        if self.dtypes is not None:
            check_dtype_attr(ctx.node, self.dtypes, self.dtype_attr, legacy=not self.structured)

    def _roles(self, ctx: Ctx) -> None:
        if self.roles is not None:
            check_roles(ctx, self.roles, self.structured)


def structured(check: Check | None = None, *, dtypes: tuple[str, ...] | None = FLOAT_HALF,
               roles: Roles | None = None, dtype_attr: str = "T") -> Rule:
    return Rule(dtypes, roles, check, True, dtype_attr)


def legacy(check: Check | None = None, *, dtypes: tuple[str, ...] | None = FLOAT_HALF,
           roles: Roles | None = None, dtype_attr: str = "T") -> Rule:
    return Rule(dtypes, roles, check, False, dtype_attr)


def accept(ctx: Ctx) -> None:
    """Converters that validate nothing beyond the input conversion (Identity and friends)."""
