package importer_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/importer"
)

// BenchmarkImport imports a vhost of n work queues with retry topology
// (shared and per-attempt layouts) and n raw queues.
func BenchmarkImport(b *testing.B) {
	for _, n := range []int{100, 1000} {
		var s strings.Builder
		s.WriteString("version: 1\nvhost: v\nexchanges: [{name: in, type: topic}]\nqueues:\n")
		for i := 0; i < n; i++ {
			layout := "shared"
			if i%2 == 1 {
				layout = "per-attempt"
			}
			fmt.Fprintf(&s, "  - {name: w%d, type: quorum, layout: %s, retry: {delays: [1s, 5s, 30s]}, bindings: [{exchange: in, routing_key: k%d}]}\n", i, layout, i)
			fmt.Fprintf(&s, "  - {name: r%d, raw: true, bindings: [{exchange: in, routing_key: k%d}]}\n", i, i)
		}
		live := mustParseB(b, s.String())
		b.Run(fmt.Sprintf("queues=%d", 2*n), func(b *testing.B) {
			for range b.N {
				res, err := importer.Import(importer.Input{Vhost: "v", Topology: live, Source: "bench"})
				if err != nil || res.Recognised != n {
					b.Fatalf("recognised %d, %v", res.Recognised, err)
				}
			}
		})
	}
}
