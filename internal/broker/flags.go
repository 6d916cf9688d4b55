package broker

import "fmt"

// Flags names, in the caller's words, the settings an error can point to
// as its remedy; the library names none itself (the CLI passes its
// flags). An empty name leaves its hint out of the message.
type Flags struct {
	// Timeout is Config.Timeout's name.
	Timeout string
	// AllowDestroy names the choice that deletes queues without the
	// if-empty guard (DeleteQueue's ifEmpty false).
	AllowDestroy string
	// URL is Config.URL's name.
	URL string
	// AMQPURL is Config.AMQPURL's name.
	AMQPURL string
	// CACert names the CA certificates Config.TLS trusts.
	CACert string
	// ClientCert and ClientKey name Config.TLS's client certificate.
	ClientCert, ClientKey string
}

// hint is format with the setting's name, or nothing without a name.
func hint(format, name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(format, name)
}
