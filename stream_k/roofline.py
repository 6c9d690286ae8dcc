"""A device's ceilings (datasheet peaks) and a GEMM's roofline: the least time its FLOPs and its bytes allow.

    peaks = device_peaks("NVIDIA H200")
    roofline_us(M, N, K, "bf16", peaks)     # max(FLOPs / peak, bytes / HBM bandwidth), in microseconds

Bytes count every input read once and C written once. The peaks are the vendors' dense (no sparsity) figures;
measured ceilings sit below them (one H200: ~790 TFLOP/s bf16 through cuBLAS, ~4.3 TB/s copy bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamk_pgas.stream_k.dtypes import output_dtype, torch_dtype


@dataclass(frozen=True)
class DevicePeaks:
    """Datasheet ceilings of one device."""

    name: str
    tflops: dict[str, float]  # dense matrix TFLOP/s per input datatype (fp32: plain FMA, as with input_precision ieee)
    hbm_tb_s: float  # device memory bandwidth, TB/s
    sms: int  # SMs / CUs
    l2_mb: float  # last-level cache on the chip (L2; on AMD the Infinity Cache), MB


# Keyed by a substring of the device's name (torch.cuda.get_device_properties(...).name).
PEAKS: dict[str, DevicePeaks] = {
    "H200": DevicePeaks("NVIDIA H200 SXM", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9, "int8": 1978.9}, 4.8, 132, 60),
    "H100": DevicePeaks("NVIDIA H100 SXM", {"bf16": 989.4, "fp16": 989.4, "fp32": 66.9, "int8": 1978.9}, 3.35, 132,
                        50),
    "B200": DevicePeaks("NVIDIA B200", {"bf16": 2250.0, "fp16": 2250.0, "fp32": 75.0, "int8": 4500.0}, 8.0, 148, 126),
    "MI300X": DevicePeaks("AMD Instinct MI300X", {"bf16": 1307.4, "fp16": 1307.4, "fp32": 163.4, "int8": 2614.9},
                          5.3, 304, 256),
    "MI355X": DevicePeaks("AMD Instinct MI355X", {"bf16": 2516.6, "fp16": 2516.6, "fp32": 157.3, "int8": 5033.2},
                          8.0, 256, 256),
}


def device_peaks(name: str) -> DevicePeaks | None:
    """The ceilings of the device called `name`, or None for a device not in PEAKS."""
    for key, peaks in PEAKS.items():
        if key in name:
            return peaks
    return None


def element_bytes(dtype: str) -> tuple[int, int]:
    """(bytes per input element, bytes per output element) of a datatype name."""
    import torch

    return (torch.empty((), dtype=torch_dtype(dtype)).element_size(),
            torch.empty((), dtype=output_dtype(dtype)).element_size())


def gemm_bytes(M: int, N: int, K: int, dtype: str) -> int:
    """The fewest bytes an M x N x K GEMM moves through device memory: A and B read once, C written once."""
    e_in, e_out = element_bytes(dtype)
    return (M * K + K * N) * e_in + M * N * e_out


def roofline_us(M: int, N: int, K: int, dtype: str, peaks: DevicePeaks) -> float:
    """max(FLOPs / peak, bytes / bandwidth) in microseconds."""
    flops_us = 2.0 * M * N * K / (peaks.tflops[dtype] * 1e6)
    bytes_us = gemm_bytes(M, N, K, dtype) / (peaks.hbm_tb_s * 1e6)
    return max(flops_us, bytes_us)


def memory_bound(M: int, N: int, K: int, dtype: str, peaks: DevicePeaks) -> bool:
    """Whether the bytes term of the roofline is the larger one."""
    return gemm_bytes(M, N, K, dtype) / (peaks.hbm_tb_s * 1e6) > 2.0 * M * N * K / (peaks.tflops[dtype] * 1e6)
