package broker_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rmqtopo/rmqtopo/internal/broker"
)

// TestHTTPSMissingClientCert: a management API that requires a client
// certificate, and a client without one. The error names the certificate
// and the flags that give one, every time; the config handed to NewClient
// is left as it was.
func TestHTTPSMissingClientCert(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"rabbitmq_version":"3.10.8"}`))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	cfg := &tls.Config{RootCAs: pool}
	c, err := broker.NewClient(broker.Config{URL: srv.URL, TLS: cfg, Flags: broker.Flags{ClientCert: "--client-cert", ClientKey: "--client-key"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		_, err := c.Overview(context.Background())
		if err == nil || !strings.Contains(err.Error(), "client certificate") || !strings.Contains(err.Error(), "--client-cert and --client-key") {
			t.Fatalf("run %d: want an error naming the client certificate and its flags, got %v", i+1, err)
		}
	}
	if cfg.GetClientCertificate != nil || cfg.ServerName != "" {
		t.Errorf("NewClient changed the tls.Config it was given")
	}
}
