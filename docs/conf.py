"""Sphinx configuration of the sklearn-crocs documentation.

Build with ``tox -e docs`` or ``make docs`` (``sphinx-build -W --keep-going -b html
docs docs/_build/html``): warnings are errors, and the example gallery in
``examples/`` is executed during the build.
"""

import os
import re
from pathlib import Path

import sklearn_crocs

DOCS = Path(__file__).resolve().parent

# -- Project -----------------------------------------------------------------
project = "sklearn-crocs"
author = "sklearn-crocs developers"
copyright = "sklearn-crocs developers"  # noqa: A001 - Sphinx's name
release = sklearn_crocs.__version__
# The navbar and the title show the version as built (``0.1.0.dev0``, not ``0.1.0``).
version = release

# -- General -----------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    # MathJax 3 from the package, copied into _static/mathjax: no CDN, so the
    # equations render offline.
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",
    "matplotlib.sphinxext.plot_directive",
]
# The Performance page's chart: PNG only, no source link (the script is in the repository).
plot_formats = [("png", 100)]
plot_html_show_source_link = False
plot_html_show_formats = False
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "_intersphinx"]
default_role = "literal"
mathjax_path = "mathjax/tex-chtml.js"  # relative to _static, where the extension copies it
# Long signatures get one parameter per line instead of overflowing the column.
python_maximum_signature_line_length = 88
# Markdown is only used to include CHANGELOG.md; give its headings anchors.
myst_heading_anchors = 3

# -- autodoc / autosummary / numpydoc -------------------------------------------
autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"
# The class template lists the methods itself (autoclass :members:).
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False


def _skip_generated_request_methods(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated ``set_*_request`` methods.

    scikit-learn adds them to every estimator whose ``fit`` or ``score`` takes
    extra arguments (here ``groups``); their docstrings belong to scikit-learn
    and point at its user guide.
    """
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return skip


def _without_cdn_scripts(text):
    """A sphinx-gallery timing table without the block that loads its CDN scripts."""
    return re.sub(r"  \.\. raw:: html\n.*?(?=  \.\. list-table::)", "", text, flags=re.S)


def _timing_tables(app, docname, source):
    """sphinx-gallery's tables of run times: offline, and on the gallery's index.

    sphinx-gallery makes them sortable with jQuery and DataTables loaded
    from CDNs, which fail offline (``$ is not defined``); the tables stay,
    sorted by time already. The gallery's index ends with its table, so that
    it states how long each example took in this build.
    """
    if docname.rpartition("/")[2] == "sg_execution_times":
        source[0] = _without_cdn_scripts(source[0])
    elif docname == "auto_examples/index":
        times = DOCS / "auto_examples" / "sg_execution_times.rst"
        if times.is_file():
            table = _without_cdn_scripts(times.read_text().split("\n**", 1)[1])
            heading = "Run times\n---------\n\nMeasured by sphinx-gallery in this build:"
            source[0] += f"\n\n{heading}\n\n**{table}"


def setup(app):
    app.connect("autodoc-skip-member", _skip_generated_request_methods)
    app.connect("source-read", _timing_tables)


# -- intersphinx ---------------------------------------------------------------
# Links to scikit-learn, NumPy, SciPy, PyTorch and skorch. Each project's
# inventory is downloaded from its website first; when that fails (CI and the
# development machines have no internet), Sphinx falls back to the plain-text
# inventory in docs/_intersphinx/, which lists the external names these pages
# refer to (see docs/_intersphinx/README.md). A failed download with a working
# fallback is logged as information, not as a warning, so ``-W`` still fails
# on every real warning.
intersphinx_timeout = 10
intersphinx_mapping = {
    name: (url, (None, str(DOCS / "_intersphinx" / f"{name}.txt")))
    for name, url in {
        "sklearn": "https://scikit-learn.org/stable/",
        "numpy": "https://numpy.org/doc/stable/",
        "scipy": "https://docs.scipy.org/doc/scipy/",
        "torch": "https://docs.pytorch.org/docs/stable/",
        "skorch": "https://skorch.readthedocs.io/en/stable/",
    }.items()
}

# -- sphinx-gallery -----------------------------------------------------------
# Examples run in the build's process, with matplotlib's non-interactive backend.
os.environ.setdefault("MPLBACKEND", "Agg")
sphinx_gallery_conf = {
    "examples_dirs": str(DOCS.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("sklearn_crocs",),
    "reference_url": {"sklearn_crocs": None},
    "image_scrapers": ("matplotlib",),
    "abort_on_example_error": True,
    "remove_config_comments": True,
    "show_memory": False,
    "min_reported_time": 0,
    "capture_repr": ("_repr_html_", "__repr__"),
    "plot_gallery": "True",
}

# -- HTML ----------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"sklearn-crocs {version}"
html_static_path = ["_static"]
html_css_files = ["css/custom.css"]
html_theme_options = {
    "navbar_align": "left",
    "navbar_start": ["navbar-logo", "version-switcher"],
    # docs/_static/switcher.json lists the published versions: "dev" for
    # development builds such as this one, and an entry per release (its
    # version and URL, "preferred": true on the latest) added when it is made.
    "switcher": {
        "json_url": "_static/switcher.json",
        "version_match": "dev" if ".dev" in release else release,
    },
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_show_sourcelink = False
html_context = {"default_mode": "light"}
