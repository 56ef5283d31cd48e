"""The registered scheduling backends, in the order they are asked (``decide.backend``).

Native first: an object that names a native Workload (``scheduling.k8s.io``), or a workload the
policy gives a native gang, is the kube-scheduler's; everything else Kueue's, whose backend
claims every workload it knows (what it does not know is still said, never a denial).
"""

from __future__ import annotations

from webhook.decide.backend import Backend
from webhook.decide.kueue.backend import KueueBackend
from webhook.decide.native.backend import NativeBackend

BACKENDS: tuple[Backend, ...] = (NativeBackend(), KueueBackend())
