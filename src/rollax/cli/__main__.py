"""``python -m rollax.cli``: the ``rollax`` command (Ctrl-C handled as the console script
handles it, from here on: ``rollax`` and JAX are imported by then)."""

from _rollax_entry import main

raise SystemExit(main())
