// Command kueue-gates is tasgate's Kueue peer (bench/kueue_peer) with Kueue's feature gates set:
// Kueue v0.19.2's own TAS cache, snapshot and FindTopologyAssignmentsForFlavor, after
// --feature-gates is applied to the gate set Kueue registers its gates on, as Kueue's own
// config.LoadAndValidateFeatureGates applies it (utilfeature.DefaultMutableFeatureGate.Set). Which
// gate sets Kueue refuses to start with is not checked here: the real Kueue binary says that
// (tests/e2e/test_kueue_gate_start.py).
//
// Usage: kueue-gates [--feature-gates=A=true,B=false] < documents.json
// stdin and stdout are the peer's (scheduler.PeerInput in, scheduler.PeerOutput out, one line
// each). Built by e2e/tools/kueue_gates/build.sh against the peer's private module copy.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"sigs.k8s.io/kueue/pkg/cache/scheduler"
	_ "sigs.k8s.io/kueue/pkg/features" // registers Kueue's gates on DefaultMutableFeatureGate
)

func main() {
	gates := flag.String("feature-gates", "", "Kueue's --feature-gates")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: kueue-gates [--feature-gates=A=true,B=false] < documents.json")
		os.Exit(2)
	}
	if err := utilfeature.DefaultMutableFeatureGate.Set(*gates); err != nil {
		fmt.Fprintln(os.Stderr, "kueue-gates: --feature-gates:", err)
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kueue-gates:", err)
		os.Exit(1)
	}
}

func run(r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	dec.DisallowUnknownFields()
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	for index := 0; ; index++ {
		var in scheduler.PeerInput
		if err := dec.Decode(&in); errors.Is(err, io.EOF) {
			return out.Flush()
		} else if err != nil {
			return fmt.Errorf("document %d: %w", index, err)
		}
		result, err := scheduler.PeerRun(context.Background(), &in)
		if err != nil {
			return fmt.Errorf("document %d: %w", index, err)
		}
		if err := enc.Encode(result); err != nil {
			return err
		}
	}
}
