// Package archtest holds the tests that keep rmqtopo's layering as
// docs/architecture.md draws it: which packages may import which.
package archtest
