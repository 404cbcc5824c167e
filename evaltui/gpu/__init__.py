"""Real GPUs without a framework: device memory held through the CUDA driver API (ctypes).

``cudadriver`` loads ``libcuda.so.1`` and holds N MiB on one device; ``hold`` is a tiny
process around it (``python -m evaltui.gpu.hold``) for checks that need a GPU process to
point at. Nothing here is imported by the engine or the scheduler: the scheduler measures
GPUs through NVML (evaltui.scheduler.admission.resources); this package makes real usage to measure.
"""
