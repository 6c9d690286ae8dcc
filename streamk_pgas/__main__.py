import sys

from streamk_pgas.cli import main

sys.exit(main())
