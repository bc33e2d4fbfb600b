"""Where and on how many threads a computation runs: the torch device, one BLAS thread."""

from __future__ import annotations

import contextlib
import threading

from threadpoolctl import threadpool_limits

from .errors import CmixError


def resolve_device(device: str | None = "auto"):
    """A torch device from --device: 'auto' is CUDA when torch sees a GPU, else CPU;
    'cuda' without a GPU is an error."""
    import torch  # torch: ~1.5 s to import; only where a network or tensor is used

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise CmixError(f"--device cuda: torch {torch.__version__} sees no CUDA GPU here; use "
                        "--device cpu or auto")
    if device not in ("cpu", "cuda"):
        raise CmixError(f"--device must be auto, cpu or cuda, not {device!r}")
    return torch.device(device)


_ONE_BLAS = threading.local()


@contextlib.contextmanager
def one_blas_thread():
    """A context in which numpy's and scipy's BLAS (and MKL's) run on one thread: the sums
    of a fit's products then do not depend on the thread count, and small fits do not pay
    for threads they cannot use. Entering it inside itself (same thread) costs nothing;
    the outermost entry inspects the loaded libraries (~3 ms)."""
    if getattr(_ONE_BLAS, "active", False):
        yield
        return

    _ONE_BLAS.active = True
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        _ONE_BLAS.active = False
