"""``python -m rollax.cli``: the ``rollax`` command."""

from rollax.cli import main

raise SystemExit(main())
