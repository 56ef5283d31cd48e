"""Following gangs after admission, pure: slim records, tasgate's figures, states, predictions.

``records`` parses Workloads, Pods and PodGroups into slim values; ``predict`` runs the decision
path's placement on a queued Workload's PodSets; ``classify`` turns a gang into one of the
lifecycle ``State``s with a reason; ``compare`` holds Kueue's admission against the prediction;
``ledger`` keeps every tracked gang. The live watching is ``webhook.live.tracker``.
"""
