"""How C = A @ B (A: M x K activations, B: K x N weights) is cut over W ranks, and the algorithms of this project.

A *family* is one way to shard the product, named by what each rank ends with; every run of one family (ours and
the baselines in spec.baselines) ends with the same output, so they are compared with each other only:

    family   A per rank            B per rank            C per rank                     a step moves
    reduce   M x K/W (columns)     K/W x N (rows)        M x N, the whole sum           each rank's M x N partial
    gather   M x K (whole)         K x N/W (columns)     M x N, the whole product       each rank's M x N/W block
    ag_gemm  M/W x K (rows)        K x N/W (columns)     M x N/W, its columns           A's rows (gathered)
    gemm_rs  M x K/W (columns)     K/W x N (rows)        M/W x N, its rows of the sum   the partials' rows
    gemm     M x K                 K x N                 M x N (one GPU each)           nothing

Rank r's shards are the r-th slices along the split dimensions (`a_slice`, `b_slice`, `c_slice`); each split
dimension must be a multiple of W (`split_dims`).
"""

from __future__ import annotations

from dataclasses import dataclass

Slice = tuple[tuple[int, int], tuple[int, int]]  # ((row start, row stop), (column start, column stop))


def part_shape(cut: str, rows: int, cols: int, world: int) -> tuple[int, int]:
    """The shape of each rank's part of a rows x cols matrix cut `cut` over `world` ranks: "rows" (its rows / W
    rows), "cols" (its cols / W columns), or not cut ("whole" for A and B, "full" for C)."""
    shapes = {"whole": (rows, cols), "full": (rows, cols), "rows": (rows // world, cols), "cols": (rows, cols // world)}
    return shapes[cut]


def part_slice(cut: str, rank: int, rows: int, cols: int, world: int) -> Slice:
    """Rank `rank`'s part of a rows x cols matrix cut `cut` over `world` ranks: the rank-th band of rows or columns."""
    r, c = part_shape(cut, rows, cols, world)
    if cut == "rows":
        return (rank * r, (rank + 1) * r), (0, cols)
    if cut == "cols":
        return (0, rows), (rank * c, (rank + 1) * c)
    return (0, rows), (0, cols)


@dataclass(frozen=True)
class Family:
    name: str
    a: str  # A on each rank: "whole", "cols" (its K/W columns), "rows" (its M/W rows)
    b: str  # B on each rank: "whole", "rows" (its K/W rows), "cols" (its N/W columns)
    output: str  # C on each rank: "full" (M x N), "cols" (M x N/W), "rows" (M/W x N)
    moves: str  # what a step moves: "partial", "block", "a_rows", "nothing"
    text: str  # what each rank ends with, for people

    # ---- which dimensions are split ---------------------------------------------------------------------
    def split_dims(self) -> tuple[str, ...]:
        """The dimensions ("m", "n", "k") that are cut into W equal parts: each must be a multiple of W."""
        dims = []
        if self.a == "rows" or self.output == "rows":
            dims.append("m")
        if self.b == "cols" or self.output == "cols":
            dims.append("n")
        if self.a == "cols":
            dims.append("k")
        return tuple(dims)

    def unsplittable(self, m: int, n: int, k: int, world: int) -> str | None:
        """The first split dimension ("m", "n" or "k") that `world` does not divide; None if every one divides."""
        return next((d for d in self.split_dims() if {"m": m, "n": n, "k": k}[d] % world), None)

    # ---- each rank's shapes -----------------------------------------------------------------------------
    def a_shape(self, m: int, k: int, world: int) -> tuple[int, int]:
        return part_shape(self.a, m, k, world)

    def b_shape(self, k: int, n: int, world: int) -> tuple[int, int]:
        return part_shape(self.b, k, n, world)

    def gemm_shape(self, m: int, n: int, k: int, world: int) -> tuple[int, int, int]:
        """(M, N, K) of each rank's GEMM: A's rows are gathered first where A is row-sharded."""
        return m, self.b_shape(k, n, world)[1], self.b_shape(k, n, world)[0]

    def c_shape(self, m: int, n: int, world: int) -> tuple[int, int]:
        return part_shape(self.output, m, n, world)

    # ---- each rank's slices -----------------------------------------------------------------------------
    def a_slice(self, rank: int, m: int, k: int, world: int) -> Slice:
        """Rank `rank`'s part of the whole A."""
        return part_slice(self.a, rank, m, k, world)

    def b_slice(self, rank: int, k: int, n: int, world: int) -> Slice:
        """Rank `rank`'s part of the whole B."""
        return part_slice(self.b, rank, k, n, world)

    def c_slice(self, rank: int, m: int, n: int, world: int) -> Slice:
        """The part of the whole product A @ B that rank `rank`'s C holds."""
        return part_slice(self.output, rank, m, n, world)

    # ---- bytes ------------------------------------------------------------------------------------------
    def payload_bytes(self, m: int, n: int, k: int, world: int, in_bytes: int, out_bytes: int) -> int:
        """The object each rank contributes to the collective: its partial, its block of C, or its rows of A."""
        if self.moves == "a_rows":
            return (m // world) * k * in_bytes
        if self.moves == "block":
            return m * (n // world) * out_bytes
        if self.moves == "partial":
            return m * n * out_bytes
        return 0

    def bytes_moved(self, m: int, n: int, k: int, world: int, in_bytes: int, out_bytes: int
                    ) -> tuple[float, float]:
        """(bytes this rank moves to or from its peers, bytes it moves locally) in one step."""
        w = world
        payload = self.payload_bytes(m, n, k, w, in_bytes, out_bytes)
        if self.moves in ("a_rows",):  # its rows to every peer, and into its own gathered A
            return (w - 1) * payload, payload
        if self.moves == "block":  # its block to every peer
            return (w - 1) * payload, 0.0
        if self.moves == "partial" and self.output == "rows":  # each peer's rows of the partial, to that peer
            return (w - 1) * payload / w, payload / w
        if self.moves == "partial":  # every rank's partial reaches every rank (its own added locally)
            return (w - 1) * payload, payload
        return 0.0, 0.0


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("reduce", "cols", "rows", "full", "partial", "the whole C (M x N) on every rank"),
    Family("gather", "whole", "cols", "full", "block", "the whole C (M x N) on every rank"),
    Family("ag_gemm", "rows", "cols", "cols", "a_rows", "C[:, the rank's N/W columns] (M x N/W)"),
    Family("gemm_rs", "cols", "rows", "rows", "partial", "the rank's M/W rows of the summed C (M/W x N)"),
    Family("gemm", "whole", "whole", "full", "nothing", "the whole C (M x N), each rank its own product"),
)}


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {name!r}")
    return FAMILIES[name]


@dataclass(frozen=True)
class Algorithm:
    """One algorithm of this project: its family (sharding and output) and the modes built for it."""

    name: str
    family: Family
    modes: tuple[str, ...]
    text: str
    # "direct": each rank moves its object straight to where it ends (the family's bytes_moved); "owner": each tile
    # is summed by one owner rank, which then stores the sum where the family's output wants it: into every rank's C
    # (a reduce-scatter + all-gather), or into the C of the rank that owns its rows
    route: str = "direct"

    def has_mode(self, mode: str) -> bool:
        return mode in self.modes

    def bytes_moved(self, m: int, n: int, k: int, world: int, in_bytes: int, out_bytes: int
                    ) -> tuple[float, float]:
        """(bytes this rank moves to or from its peers, bytes it moves locally) in one step. Routed through owners,
        a rank reads its 1/W of the tiles from its W-1 peers and stores their sums into its W-1 peers' C (the
        bandwidth-optimal all-reduce's 2(W-1)/W of |C|), reading its own partial and writing its own C locally;
        where each rank keeps only its rows, the sums' rows go to their owners ((W-1)/W of the sums to peers)."""
        if self.route == "owner":
            w = world
            payload = self.family.payload_bytes(m, n, k, w, in_bytes, out_bytes)
            if self.family.output == "rows":
                return (w - 1) * payload / w + (w - 1) * payload / w**2, payload / w + payload / w**2
            return 2 * (w - 1) * payload / w, 2 * payload / w
        return self.family.bytes_moved(m, n, k, world, in_bytes, out_bytes)


_STREAMING = ("bulk_sync", "two_streams", "fused", "fused_sequential")
ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("all_reduce", FAMILIES["reduce"], _STREAMING,
              "each tile's owner sums every rank's partial of it in rank order and stores the sum into every "
              "rank's C (a reduce-scatter + all-gather, tile by tile)", route="owner"),
    Algorithm("all_scatter", FAMILIES["gather"], (*_STREAMING, "copy_engine"),
              "each finished tile of the rank's columns is stored into every rank's C"),
    Algorithm("one_shot", FAMILIES["reduce"], _STREAMING,
              "each rank publishes its partial; every rank sums every rank's partial of a tile once all have it"),
    Algorithm("all_gather_gemm", FAMILIES["ag_gemm"], (*_STREAMING, "copy_engine"),
              "A's row shards are pushed to every rank while the GEMM multiplies the rows that have arrived"),
    Algorithm("gemm_reduce_scatter", FAMILIES["gemm_rs"], (*_STREAMING, "copy_engine"),
              "each tile's owner sums every rank's partial of it in rank order and stores each row of the sum into "
              "the C of the rank that holds the row", route="owner"),
)}


def family_algorithms(name: str) -> tuple[str, ...]:
    """The algorithms of family `name` (spec.FAMILIES), in ALGORITHMS' order; () for a name that is not a family."""
    return tuple(a.name for a in ALGORITHMS.values() if a.family.name == name)


def algorithm(name: str) -> Algorithm:
    """The record of an algorithm name; ValueError naming the valid ones."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}; got {name!r}")
    return ALGORITHMS[name]
