// Package clustertest holds rmqtopo's tests that need more than one plain
// RabbitMQ node: a 3-node cluster (plan through any node, apply with a node
// down, quorum replicas, and the apply benchmark against a cluster) and a
// node with TLS on AMQP and the management API (certificates, mutual TLS,
// the errors of the CLI's TLS flags, and the runtime helper over amqps).
// The fault tests kill nodes during a retry storm, a dlq replay and a dlq
// sweep and count every message.
//
// The tests start their own brokers through internal/brokertest (a cluster
// of three private nodes, a TLS node) and drive the real rmqtopo binary,
// built once per run, as a user would. Point them at an existing cluster
// with RMQTOPO_TEST_CLUSTER_URLS and RMQTOPO_TEST_CLUSTER_AMQP_URLS (see
// brokertest.GetCluster); tests that kill nodes then skip.
package clustertest
