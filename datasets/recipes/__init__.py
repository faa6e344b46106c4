"""Recipes that run real workloads on this machine and record them with `procsift record`, labelled by construction."""

from procsift.datasets.recipes._run import WINDOW_S, Recipe
from procsift.datasets.recipes.batch import RECIPES as _BATCH
from procsift.datasets.recipes.terminal import RECIPES as _TERMINAL
from procsift.datasets.recipes.web import RECIPES as _WEB

RECIPES: tuple[Recipe, ...] = tuple(_WEB + _BATCH + _TERMINAL)
"""Every recipe, in recording order."""

__all__ = ["RECIPES", "Recipe", "WINDOW_S"]
