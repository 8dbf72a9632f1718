"""rollax's version, in a module of its own so that any layer may name it without importing the
package's face (:mod:`rollax`), and so that ``rollax --version`` can read it without importing
anything (``_rollax_entry.quick_version``). ``pyproject.toml`` states the same number; a test
holds the two equal."""

__version__ = "0.1.0"
