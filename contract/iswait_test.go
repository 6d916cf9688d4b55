package contract

import "testing"

func TestIsWaitQueueName(t *testing.T) {
	for name, want := range map[string]bool{
		"rmqtopo.wait.5s":               true,
		"rmqtopo.wait.1500ms":           true,
		"orders.wait.1.10s":             true,
		"payments.capture.wait.3.5m":    true,
		"a.b.wait.12.2h":                true,
		"demo.order_processor.delay_2s": true,
		"wait-queue-10s":                true,
		"wait-queue-500ms":              true,
		"orders":                        false,
		"orders.dlq":                    false,
		"orders.wait":                   false,
		"orders.wait.1":                 false,
		"orders.wait.x.5s":              false,
		"orders.delay_2m":               false,
		"wait-queue-":                   false,
		"my-wait-queue-10s":             false,
		"rmqtopo.lock":                  false,
	} {
		if got := IsWaitQueue(name); got != want {
			t.Errorf("IsWaitQueueName(%q) = %t, want %t", name, got, want)
		}
	}
}
