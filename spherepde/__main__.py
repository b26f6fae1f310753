"""``python -m spherepde`` is the ``spherepde`` command."""
import sys

from spherepde.cli import main

sys.exit(main())
