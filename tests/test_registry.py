"""The name -> object registry (:mod:`spotdiff.registry`): lazy discovery of a family's modules,
double registration, unknown names, and third-party entry points (objects, self-registering
modules, plugins that fail to load)."""

from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path

import pytest

from spotdiff.errors import ConfigError
from spotdiff.registry import Registry, name_class

_serial = itertools.count()


@pytest.fixture
def family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fresh package ``fam<N>`` on sys.path whose modules register into ``fam<N>.REG`` (modules
    ``a`` and ``b``; ``_private`` is never imported), and an entry point group ``fam<N>.plugins``."""
    name = f"regfam{next(_serial)}"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        f"from spotdiff.registry import Registry\nREG = Registry('widget', {name!r}, {name + '.plugins'!r})\n",
        encoding="utf-8",
    )
    for mod, widget in (("a", "alpha"), ("b", "beta"), ("_private", "hidden")):
        (pkg / f"{mod}.py").write_text(
            f"from {name} import REG\n\n@REG.register({widget!r})\nclass W:\n    pass\n", encoding="utf-8"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, tmp_path
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".") or m.startswith("plug_" + name)]:
        del sys.modules[module]


def _entry_points(root: Path, name: str, lines: str, modules: dict[str, str]) -> None:
    for mod, source in modules.items():
        (root / f"{mod}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    dist = root / f"plug_{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: plug-{name}\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[{name}.plugins]\n{lines}\n", encoding="utf-8")


def test_modules_are_discovered_on_first_use(family) -> None:
    name, _ = family
    reg = __import__(name).REG
    assert f"{name}.a" not in sys.modules  # nothing imported before the first lookup
    assert reg.names() == ["alpha", "beta"] and f"{name}._private" not in sys.modules
    assert reg.get("alpha").__module__ == f"{name}.a"
    assert [k for k, _ in reg.items()] == ["alpha", "beta"]
    assert "beta" in reg and "hidden" not in reg


def test_unknown_name_lists_the_known_ones(family) -> None:
    reg = __import__(family[0]).REG
    with pytest.raises(ConfigError, match=r"^unknown widget 'gamma'; known: alpha, beta$"):
        reg.get("gamma")


def test_a_name_registers_one_object(family) -> None:
    reg: Registry[object] = __import__(family[0]).REG

    class One:
        pass

    class Other:
        pass

    assert reg.register("one")(One) is One
    reg.register("one")(One)  # the same object again (a module imported twice) is fine
    with pytest.raises(ValueError, match="widget 'one' is registered twice"):
        reg.register("one")(Other)
    assert reg.get("one") is One and reg.names() == ["alpha", "beta", "one"]
    with pytest.raises(ValueError, match="widget 'alpha' is registered twice"):
        reg.register("alpha")(Other)  # nor can a discovered name be taken


def test_entry_points_register_objects_and_modules(family) -> None:
    name, root = family
    _entry_points(
        root,
        name,
        f"gamma = plug_{name}_obj:Gamma\ndelta = plug_{name}_mod\nalpha = plug_{name}_obj:Gamma",
        {
            f"plug_{name}_obj": "class Gamma:\n    pass\n",
            f"plug_{name}_mod": f"from {name} import REG\n\n@REG.register('delta-self')\nclass D:\n    pass\n",
        },
    )
    reg = __import__(name).REG
    assert reg.names() == ["alpha", "beta", "delta-self", "gamma"]  # a module registers itself by its decorator
    assert reg.get("gamma").__name__ == "Gamma"
    assert reg.get("alpha").__module__ == f"{name}.a"  # an entry point does not replace a built-in name


def test_a_plugin_that_fails_to_load_is_named(family) -> None:
    name, root = family
    _entry_points(root, name, f"broken = plug_{name}_bad:Thing", {f"plug_{name}_bad": "raise RuntimeError('boom')\n"})
    reg = __import__(name).REG
    with pytest.raises(ConfigError, match=rf"cannot load widget plugin 'broken' \(plug_{name}_bad:Thing, entry "
                       rf"point group {name}.plugins\): RuntimeError: boom"):  # fmt: skip
        reg.names()


def test_name_class_writes_the_registry_name_once() -> None:
    """A family named by its registry: the decorator's name is the class's ``name``, for every member."""
    from spotdiff.benchmarks.base import BENCHMARKS
    from spotdiff.protocols import PROTOCOLS
    from spotdiff.synth import ENGINES

    family: Registry[type] = Registry("widget", "spotdiff.protocols", on_register=name_class)

    @family.register("left-of")
    class Widget:
        pass

    assert Widget.name == "left-of"  # type: ignore[attr-defined]
    for registry in (BENCHMARKS, PROTOCOLS, ENGINES):
        assert [cls.name for _, cls in registry.items()] == registry.names()
