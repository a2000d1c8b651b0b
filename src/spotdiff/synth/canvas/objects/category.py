"""A nameable object category of the procedural library, and the decorator that declares one.

Each family module (:mod:`.food`, :mod:`.household`, ...) declares its categories with
:func:`category`; :data:`spotdiff.synth.canvas.objects.library.CATEGORIES` puts them in the library's fixed
order (:data:`spotdiff.synth.canvas.objects.library.ORDER`), on which sampling with a seed depends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spotdiff.synth.canvas.objects.paint import RGB, Pen
from spotdiff.synth.language import pluralize


@dataclass(frozen=True)
class Category:
    """A nameable object category of the procedural library."""

    name: str
    draw: Callable[[Pen, RGB, float], None]
    colours: tuple[str, ...] = ()  # empty: one fixed look, the colour is not part of its name
    textures: tuple[str, ...] = ("plain",)
    plural: str = ""

    @property
    def plural_name(self) -> str:
        return self.plural or pluralize(self.name)


#: Every declared category, by name, in declaration order (see the module docstring).
DECLARED: dict[str, Category] = {}


def category(name: str, colours: Sequence[str] = (), textures: Sequence[str] = ("plain",), plural: str = ""):
    """Declare the drawing function of a category (its colours, textures and irregular plural).

    Args:
        name: the category's name.
        colours: the colours it is drawn in.
        textures: the textures it is drawn with.
        plural: its irregular plural; empty: regular.
    """

    def deco(fn: Callable[[Pen, RGB, float], None]):
        DECLARED[name] = Category(name, fn, tuple(colours), tuple(textures), plural)
        return fn

    return deco
