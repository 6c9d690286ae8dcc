"""The problem spec: what every layer agrees on, in one place and without torch or Triton.

    datatypes   the datatype names, their element sizes and C's datatype
    modes       the overlap modes (how GEMM and communication share the device) and "auto"
    schedules   the GEMM's Stream-K schedules
    sharding    how C = A @ B is cut over the ranks (a family: the split, each rank's shards, its output,
                the bytes a step moves) and the algorithms of this project, each in one family
    baselines   the vendor / torch baselines of reference/, each in one family: a family's baselines are the
                equal-output peers of its algorithms
    target      the device a problem is planned and built for (detected, or named, e.g. an MI300X)

Everything else (the op, its planner, the benchmark's flags, fixture and log, the sweep, the grid table, the
plots, the reference baselines) reads these records instead of restating them.
"""

if __name__ == "spec":  # imported by its folder's name, from a checkout: be streamk_pgas.spec itself
    from streamk_pgas.namespace import alias_toplevel

    alias_toplevel(__name__)

from streamk_pgas.spec.baselines import BASELINES, Baseline, baseline, peers, vendor_pair
from streamk_pgas.spec.datatypes import DATATYPES, DataType, datatype
from streamk_pgas.spec.modes import AUTO, MODES, Mode, mode
from streamk_pgas.spec.schedules import (
    GEMM_SCHEDULE_CHOICES,
    SCHEDULE_CHOICES,
    SCHEDULES,
    parse_schedule_label,
    schedule_label,
)
from streamk_pgas.spec.sharding import ALGORITHMS, FAMILIES, Algorithm, Family, algorithm, family, family_algorithms
from streamk_pgas.spec.target import (
    INTERPRETER,
    KNOWN_TARGETS,
    Target,
    known_target,
    sm90_or_newer,
    target_from_properties,
)

__all__ = [
    "ALGORITHMS",
    "AUTO",
    "BASELINES",
    "DATATYPES",
    "FAMILIES",
    "GEMM_SCHEDULE_CHOICES",
    "INTERPRETER",
    "KNOWN_TARGETS",
    "MODES",
    "SCHEDULES",
    "SCHEDULE_CHOICES",
    "Algorithm",
    "Baseline",
    "DataType",
    "Family",
    "Mode",
    "Target",
    "algorithm",
    "baseline",
    "datatype",
    "family",
    "family_algorithms",
    "known_target",
    "mode",
    "parse_schedule_label",
    "peers",
    "schedule_label",
    "sm90_or_newer",
    "target_from_properties",
    "vendor_pair",
]
