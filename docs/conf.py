"""Sphinx configuration for the lodtensor docs: ``make docs``.

Only assignments: pytest imports this file (``--doctest-modules`` over ``docs``),
so it must not build anything or import Sphinx.
"""

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # autodoc imports lodtensor from the checkout

_INIT = (ROOT / "lodtensor" / "__init__.py").read_text(encoding="utf-8")

project = "lodtensor"
author = "lodtensor contributors"
copyright = "lodtensor contributors"  # noqa: A001 - Sphinx's name
release = re.search(r'^__version__ = "([^"]+)"', _INIT, re.M).group(1)
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# NumPy-style docstrings (STYLE.md section 5).
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": True, "undoc-members": False}
# The API page documents torch modules (lodtensor.nn, fluid.Program); the docs extra does not install
# torch, so where it is missing autodoc imports them against a stand-in.
autodoc_mock_imports = [] if importlib.util.find_spec("torch") else ["torch"]

# MyST: ``#`` headings get anchors for ``[text](guide.md#concepts)`` links.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

pygments_style = "sphinx"
html_theme = "alabaster"
html_title = f"lodtensor {release}"
html_theme_options = {
    "description": "Variable-length and hierarchical tensors (PaddlePaddle-style LoD) on NumPy",
    "fixed_sidebar": True,
}
