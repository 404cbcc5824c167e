"""Real GPUs without a framework: device memory held through the CUDA driver API (ctypes).

``cudadriver`` loads ``libcuda.so.1`` and holds N MiB on one device; ``hold`` is a tiny
process around it (``python -m evaltui.gpu.hold``) for checks that need a GPU process to
point at; ``nvml`` is ``pynvml``, imported once without its deprecation warning, through
which the scheduler (evaltui.scheduler.admission.resources) and the run process measure GPUs.
"""
