// This file is not part of Kueue. tasgate's bench/kueue_peer/build.sh drops it into a private,
// writable copy of sigs.k8s.io/kueue (no Kueue file is edited) so that a small main program can
// reach the unexported TAS cache, snapshot and placement code and time it on tasgate's inputs.

package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/resources"
)

// PeerNode is a Node as tasgate's scorer sees it; resource amounts are in Kueue's canonical
// units (cpu in milli-units, everything else whole units).
type PeerNode struct {
	Name          string            `json:"name"`
	Labels        map[string]string `json:"labels"`
	Allocatable   map[string]int64  `json:"allocatable"`
	Taints        []corev1.Taint    `json:"taints,omitempty"`
	Ready         bool              `json:"ready"`
	Unschedulable bool              `json:"unschedulable,omitempty"`
	// Usage, when set, is put straight into the non-TAS pod cache's total for the node: usage
	// that no set of pods could produce (resources held by zero pods), for differential tests.
	Usage map[string]int64 `json:"usage,omitempty"`
}

// PeerPod stands for Count bound, running non-TAS pods on Node with the same requests.
type PeerPod struct {
	Node     string           `json:"node"`
	Requests map[string]int64 `json:"requests,omitempty"`
	Count    int              `json:"count"`
}

// PeerCluster is one TAS flavor's world: its Topology levels, the flavor and the nodes and pods.
type PeerCluster struct {
	TopologyName      string              `json:"topologyName"`
	Levels            []string            `json:"levels"`
	FlavorNodeLabels  map[string]string   `json:"flavorNodeLabels,omitempty"`
	FlavorTolerations []corev1.Toleration `json:"flavorTolerations,omitempty"`
	Nodes             []PeerNode          `json:"nodes"`
	Pods              []PeerPod           `json:"pods,omitempty"`
}

// PeerPodSet is one PodSet of a workload, in Kueue's own API types where they exist.
type PeerPodSet struct {
	Name            string                       `json:"name"`
	Count           int32                        `json:"count"`
	Requests        map[string]int64             `json:"requests"`
	TopologyRequest *kueue.PodSetTopologyRequest `json:"topologyRequest,omitempty"`
	Implied         bool                         `json:"implied,omitempty"`
	Tolerations     []corev1.Toleration          `json:"tolerations,omitempty"`
	NodeSelector    map[string]string            `json:"nodeSelector,omitempty"`
	Affinity        *corev1.NodeSelector         `json:"affinity,omitempty"`
}

// PeerWorkload is the PodSets of one workload on the flavor, placed in one call.
type PeerWorkload struct {
	Name    string       `json:"name"`
	PodSets []PeerPodSet `json:"podSets"`
}

// PeerInput is one document on the peer's stdin.
type PeerInput struct {
	Cluster   PeerCluster    `json:"cluster"`
	Workloads []PeerWorkload `json:"workloads"`
	// Repeats of each timed step (0: each step runs once, untimed warm-up included).
	BuildRepeats int `json:"buildRepeats"`
	PlaceRepeats int `json:"placeRepeats"`
}

// PeerTiming summarises the samples of one step, in nanoseconds.
type PeerTiming struct {
	Repeats  int   `json:"repeats"`
	MedianNs int64 `json:"medianNs"`
	P90Ns    int64 `json:"p90Ns"`
	MinNs    int64 `json:"minNs"`
}

// PeerDomain is one TopologyDomainAssignment.
type PeerDomain struct {
	Values []string `json:"values"`
	Count  int32    `json:"count"`
}

// PeerAssignment is Kueue's internal TopologyAssignment.
type PeerAssignment struct {
	Levels  []string     `json:"levels"`
	Domains []PeerDomain `json:"domains"`
}

// PeerPodSetResult is what FindTopologyAssignmentsForFlavor said about one PodSet; Present is
// false when Kueue stopped at an earlier group's failure and never looked at this one.
type PeerPodSetResult struct {
	Name       string          `json:"name"`
	Present    bool            `json:"present"`
	Assignment *PeerAssignment `json:"assignment"`
	Failure    string          `json:"failure"`
}

// PeerWorkloadResult is one workload's answer and the time of its placement call.
type PeerWorkloadResult struct {
	Name    string             `json:"name"`
	PodSets []PeerPodSetResult `json:"podSets"`
	Place   PeerTiming         `json:"place"`
}

// PeerOutput is one document on the peer's stdout.
type PeerOutput struct {
	Nodes     int                  `json:"nodes"`
	Leaves    int                  `json:"leaves"`
	CacheFill PeerTiming           `json:"cacheFill"`
	Snapshot  PeerTiming           `json:"snapshot"`
	Workloads []PeerWorkloadResult `json:"workloads"`
}

func peerQuantity(name string, value int64) resource.Quantity {
	if name == string(corev1.ResourceCPU) {
		return *resource.NewMilliQuantity(value, resource.DecimalSI)
	}
	if name == string(corev1.ResourceMemory) {
		return *resource.NewQuantity(value, resource.BinarySI)
	}
	return *resource.NewQuantity(value, resource.DecimalSI)
}

func peerResourceList(amounts map[string]int64) corev1.ResourceList {
	out := make(corev1.ResourceList, len(amounts))
	for name, value := range amounts {
		out[corev1.ResourceName(name)] = peerQuantity(name, value)
	}
	return out
}

func peerNodeObject(n *PeerNode) *corev1.Node {
	ready := corev1.ConditionFalse
	if n.Ready {
		ready = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Unschedulable: n.Unschedulable, Taints: n.Taints},
		Status: corev1.NodeStatus{
			Allocatable: peerResourceList(n.Allocatable),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}},
		},
	}
}

// peerPodSpec puts the pod's requests in one container: what the pod template of a PodSet or
// a bound pod is to Kueue's resources.NewRequestsFromPodSpec.
func peerPodSpec(requests map[string]int64) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{
		Name:      "c",
		Resources: corev1.ResourceRequirements{Requests: peerResourceList(requests)},
	}}}
}

// peerCache fills Kueue's TAS cache as its informers would: every Node through SyncNode, every
// bound pod through Update, then a flavor cache for the flavor and Topology.
func peerCache(c *PeerCluster, nodes []*corev1.Node, pods []*corev1.Pod, log logr.Logger) *TASFlavorCache {
	tasCache := NewTASCache(nil, newDefaultSimulator(), resources.NewResourceFormatter())
	for _, node := range nodes {
		tasCache.SyncNode(node)
	}
	for _, pod := range pods {
		tasCache.Update(pod, log)
	}
	for i := range c.Nodes {
		if usage := c.Nodes[i].Usage; usage != nil {
			peerAddNodeUsage(tasCache.nonTasUsageCache, c.Nodes[i].Name, usage)
		}
	}
	return tasCache.NewTASFlavorCache(
		topologyInformation{Levels: slices.Clone(c.Levels)},
		flavorInformation{
			TopologyName: kueue.TopologyReference(c.TopologyName),
			NodeLabels:   c.FlavorNodeLabels,
			Tolerations:  c.FlavorTolerations,
		},
	)
}

func peerAddNodeUsage(cache *nonTasUsageCache, node string, usage map[string]int64) {
	amounts := make(map[corev1.ResourceName]int64, len(usage))
	for name, value := range usage {
		amounts[corev1.ResourceName(name)] = value
	}
	cache.lock.Lock()
	defer cache.lock.Unlock()
	if _, found := cache.nodeUsage[node]; !found {
		cache.nodeUsage[node] = resources.NewRequests()
	}
	cache.nodeUsage[node].Add(resources.NewRequestsFromMap(amounts))
}

func peerPods(c *PeerCluster) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range c.Pods {
		p := &c.Pods[i]
		for k := range p.Count {
			pods = append(pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d-%d", i, k), Namespace: "default"},
				Spec:       func() corev1.PodSpec { s := peerPodSpec(p.Requests); s.NodeName = p.Node; return s }(),
				Status:     corev1.PodStatus{Phase: corev1.PodRunning},
			})
		}
	}
	return pods
}

func peerRequests(w *PeerWorkload) FlavorTASRequests {
	out := make(FlavorTASRequests, 0, len(w.PodSets))
	for i := range w.PodSets {
		ps := &w.PodSets[i]
		spec := peerPodSpec(ps.Requests)
		spec.Tolerations = ps.Tolerations
		spec.NodeSelector = ps.NodeSelector
		if ps.Affinity != nil {
			spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: ps.Affinity,
			}}
		}
		podSet := &kueue.PodSet{
			Name:            kueue.PodSetReference(ps.Name),
			Count:           ps.Count,
			Template:        corev1.PodTemplateSpec{Spec: spec},
			TopologyRequest: ps.TopologyRequest,
		}
		var group *string
		if ps.TopologyRequest != nil {
			group = ps.TopologyRequest.PodSetGroupName
		}
		out = append(out, TASPodSetRequests{
			PodSet:            podSet,
			SinglePodRequests: resources.NewRequestsFromPodSpec(&podSet.Template.Spec),
			Count:             ps.Count,
			Flavor:            "tas-flavor",
			Implied:           ps.Implied,
			PodSetGroupName:   group,
		})
	}
	return out
}

// peerTime runs fn once untimed, then repeats times, and summarises the samples.
func peerTime(repeats int, fn func()) PeerTiming {
	fn()
	if repeats <= 0 {
		return PeerTiming{}
	}
	samples := make([]int64, repeats)
	for i := range samples {
		start := time.Now()
		fn()
		samples[i] = int64(time.Since(start))
	}
	slices.Sort(samples)
	p90 := (9*len(samples) + 9) / 10
	return PeerTiming{
		Repeats:  repeats,
		MedianNs: (samples[(len(samples)-1)/2] + samples[len(samples)/2]) / 2,
		P90Ns:    samples[max(0, p90-1)],
		MinNs:    samples[0],
	}
}

func peerResult(w *PeerWorkload, result TASAssignmentsResult) []PeerPodSetResult {
	out := make([]PeerPodSetResult, 0, len(w.PodSets))
	for _, ps := range w.PodSets {
		r, found := result[kueue.PodSetReference(ps.Name)]
		entry := PeerPodSetResult{Name: ps.Name, Present: found, Failure: r.FailureReason}
		if ta := r.TopologyAssignment; ta != nil {
			entry.Assignment = &PeerAssignment{Levels: ta.Levels, Domains: make([]PeerDomain, 0, len(ta.Domains))}
			for _, d := range ta.Domains {
				entry.Assignment.Domains = append(entry.Assignment.Domains, PeerDomain{Values: d.Values, Count: d.Count})
			}
		}
		out = append(out, entry)
	}
	return out
}

// PeerRun builds Kueue's TAS cache and snapshot from the document and places every workload
// with FindTopologyAssignmentsForFlavor, timing the cache fill, the snapshot build (each call
// builds the topology tree again: TASCacheTopologyTree is off by default in v0.19.2) and each
// placement call.
func PeerRun(ctx context.Context, in *PeerInput) (*PeerOutput, error) {
	log := logr.Discard()
	c := &in.Cluster
	nodes := make([]*corev1.Node, len(c.Nodes))
	for i := range c.Nodes {
		nodes[i] = peerNodeObject(&c.Nodes[i])
	}
	pods := peerPods(c)
	var flavorCache *TASFlavorCache
	out := &PeerOutput{Nodes: len(nodes)}
	out.CacheFill = peerTime(in.BuildRepeats, func() { flavorCache = peerCache(c, nodes, pods, log) })
	var snapshot *TASFlavorSnapshot
	var err error
	out.Snapshot = peerTime(in.BuildRepeats, func() { snapshot, err = flavorCache.snapshot(ctx, log, nil) })
	if err != nil {
		return nil, fmt.Errorf("building the TAS snapshot: %w", err)
	}
	out.Leaves = len(snapshot.leaves)
	for i := range in.Workloads {
		w := &in.Workloads[i]
		requests := peerRequests(w)
		var result TASAssignmentsResult
		timing := peerTime(in.PlaceRepeats, func() { result = snapshot.FindTopologyAssignmentsForFlavor(ctx, requests) })
		out.Workloads = append(out.Workloads, PeerWorkloadResult{Name: w.Name, PodSets: peerResult(w, result), Place: timing})
	}
	return out, nil
}
