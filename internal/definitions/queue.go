package definitions

import "github.com/rmqtopo/rmqtopo/topology"

// NormalizeQueueArgs normalises a queue's arguments as read from the
// broker exactly as a definitions export is: integers of every width as
// one type, and an explicit classic type the same as none.
func NormalizeQueueArgs(args map[string]any) topology.Args { return normalizeQueueArgs(args, "") }
