import sys

from streamk_pgas.reference.cli import entry

sys.exit(entry())
