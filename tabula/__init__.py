"""Tabula: an AlphaGo Zero-style Go engine that speaks GTP.

Installed, the distribution's packages sit under this one name: ``tabula.engine``, ``tabula.gtp``, ``tabula.tools``
and the shipped networks in ``tabula.weights`` (setup.cfg maps them from the repository's top-level folders). In a
source checkout those folders stay at the top level, beside this one, and this package reaches them through its path.
"""
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
# A source checkout (or an editable install of one): tabula.engine is ../engine. An installed wheel has its packages
# inside this folder and needs nothing added.
if not (Path(__file__).resolve().parent / "engine").is_dir() and (_CHECKOUT / "engine" / "__init__.py").is_file():
    __path__.append(str(_CHECKOUT))
