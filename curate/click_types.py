"""Command-line value checks shared by several commands."""
from __future__ import annotations

import math

import click


def finite(ctx, param, value):
    """click callback: refuse 'nan' and 'inf', which float() accepts and no comparison catches
    (a --max-cost of nan would never stop a run)."""
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number")
    return value
