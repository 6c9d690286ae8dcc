import sys

from reference.cli import entry

sys.exit(entry())
