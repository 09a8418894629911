"""Allow `python -m dlperf`."""

from dlperf.cli import main

raise SystemExit(main())
