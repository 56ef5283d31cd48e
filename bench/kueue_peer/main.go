// Command kueue-peer places tasgate's benchmark and test inputs with Kueue's own TAS code.
//
// It reads JSON documents (scheduler.PeerInput) from stdin, one after the other, and writes one
// line of JSON (scheduler.PeerOutput) per document to stdout. The scheduler.Peer* names are not
// Kueue's: bench/kueue_peer/build.sh adds them to a private copy of the module (see its header).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/kueue/pkg/cache/scheduler"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: kueue-peer < documents.json  (see bench/kueue_peer.py)")
		os.Exit(2)
	}
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kueue-peer:", err)
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
		if err := out.Flush(); err != nil {
			return err
		}
	}
}
