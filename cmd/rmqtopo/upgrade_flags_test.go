package main

import (
	"strings"
	"testing"
)

// The client certificate flags pair up per broker: kong joins the "and"
// groups of two embedded connFlags unless each has its xorprefix, and
// then --blue-client-cert asked for --green-client-cert too.
func TestUpgradeMoveClientCertPerBroker(t *testing.T) {
	_, stderr, code := runCLI(t, "upgrade", "move", "spec.yaml", "--blue-url", "http://127.0.0.1:1", "--green-url", "http://127.0.0.1:2",
		"--blue-client-cert", "c.pem")
	if code == 0 || !strings.Contains(stderr, "--blue-client-cert and --blue-client-key must be used together") || strings.Contains(stderr, "--green-client") {
		t.Errorf("exit %d, want the blue pair alone named; stderr: %s", code, stderr)
	}
	_, stderr, _ = runCLI(t, "upgrade", "preview", "--to", "4.3", "--url", "http://127.0.0.1:1", "--target-url", "http://127.0.0.1:2",
		"--client-cert", "c.pem")
	if !strings.Contains(stderr, "--client-cert and --client-key must be used together") || strings.Contains(stderr, "--target-") {
		t.Errorf("preview: stderr: %s", stderr)
	}
}
