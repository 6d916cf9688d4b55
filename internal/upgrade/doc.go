// Package upgrade judges a vhost read from a live broker against a target
// RabbitMQ release: what the target refuses, ignores or does differently,
// and which route (in place along RabbitMQ's allowed hops, or blue-green)
// reaches it. It is pure: internal/upgrade/live reads the broker into a
// Snapshot, Judge turns it into a Report, and Text and JSON render that,
// so that rendering never talks to the broker.
package upgrade
