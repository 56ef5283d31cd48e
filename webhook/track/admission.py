"""Kueue's admission of a Workload, read where the lifecycle tracker always found it.

The reader lives in `webhook.state.admission` (the cluster state counts admitted Workloads'
assignments as usage, and the state layer is below this one); this module keeps its old name.
"""

from webhook.state.admission import (
    Domain,
    PodSetAdmission,
    condition_true,
    expand_topology_assignment,
    workload_admission,
)

__all__ = ["Domain", "PodSetAdmission", "condition_true", "expand_topology_assignment", "workload_admission"]
