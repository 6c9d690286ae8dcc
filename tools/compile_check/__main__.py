"""Entry point: the kernels must be imported compiled, not interpreted (scripts/env.sh sets TRITON_INTERPRET=1 on
a machine without a GPU), so the flag is cleared before anything imports Triton."""

import os
import sys

os.environ["TRITON_INTERPRET"] = "0"
# floating-point fusion on, as the Triton on the GPUs has it by default (3.9 warns until it is said)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

from streamk_pgas.tools.compile_check.cli import main

sys.exit(main())
